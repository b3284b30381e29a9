//! Breakers of the Redis engine in the admin service, each test on its own
//! `redis-server` (spawned on a free loopback port): served beside in-memory ones, a trip
//! through the service reaches the shared state, a registry of shared breakers is listed as
//! it grows, and a Redis that stops answering is reported, not waited on.

#![allow(clippy::unwrap_used)]
// Tests wait on a real server.
#![allow(clippy::disallowed_methods)]

#[path = "../../breakerbox-redis/tests/support/redis_server.rs"]
mod redis_server;
mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use breakerbox::{CircuitBreaker, Config, Phase};
use breakerbox_admin::AdminService;
use breakerbox_redis::{RedisBreaker, RedisNode};
use redis_server::RedisServer;
use support::{eventually, Served};

fn config() -> Config {
    Config::builder()
        .consecutive_failures(3)
        .recovery_timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

#[test]
fn a_redis_breaker_is_served_beside_an_in_memory_one_and_a_trip_reaches_the_shared_state() {
    let server = RedisServer::start();
    let url = server.url();
    let search = CircuitBreaker::builder().name("search").build().unwrap();
    // Another process's handle on the same shared breaker.
    let elsewhere: Arc<Mutex<Option<RedisBreaker>>> = Arc::default();
    let other = elsewhere.clone();
    let served = Served::start(|| async move {
        let payments = RedisBreaker::builder(&url, "payments")
            .prefix("admin-test:")
            .config(config())
            .build()
            .await
            .unwrap();
        let node_b = RedisBreaker::builder(&url, "payments")
            .prefix("admin-test:")
            .config(config())
            .build()
            .await
            .unwrap();
        *other.lock().unwrap() = Some(node_b);
        AdminService::builder()
            .breaker(payments)
            .breaker(search.clone())
            .build()
            .unwrap()
    });
    let node_b = elsewhere.lock().unwrap().clone().unwrap();

    let status = served.json("/status");
    assert_eq!(status["breakers"]["payments"]["phase"], "closed");
    assert_eq!(
        status["breakers"]["payments"]["config"]["consecutive_failures"],
        3
    );
    assert_eq!(status["breakers"]["search"]["phase"], "closed");

    let reply = served.act("/breakers/payments/trip?for=10m", &[], "");
    assert_eq!(reply.status, 200, "{}", reply.body);
    let shared = served.block_on(node_b.snapshot()).unwrap();
    assert_eq!(
        shared.phase,
        Phase::ForcedOpen,
        "read from Redis by another handle"
    );
    assert!(shared.retry_after.unwrap() > Duration::from_secs(590));
    assert!(
        eventually(Duration::from_secs(5), || node_b.phase()
            == Phase::ForcedOpen),
        "the other handle's view did not hear of the trip"
    );
    let status = served.json("/status");
    let p = &status["breakers"]["payments"];
    assert_eq!(p["phase"], "forced_open");
    assert!(p["retry_after_ms"].as_u64().unwrap() > 590_000, "{p}");
    assert_eq!(status["breakers"]["search"]["phase"], "closed");

    assert_eq!(served.act("/breakers/payments/reset", &[], "").status, 200);
    assert_eq!(
        served.block_on(node_b.snapshot()).unwrap().phase,
        Phase::Closed
    );
    drop(served);
    drop(server);
}

#[test]
fn a_registry_of_shared_breakers_is_listed_as_it_grows() {
    let server = RedisServer::start();
    let url = server.url();
    let hosts = Arc::new(Mutex::new(None));
    let kept = hosts.clone();
    let served = Served::start(|| async move {
        let node = RedisNode::connect(&url).unwrap();
        let registry = Arc::new(
            node.registry_with::<String>(config(), 64, |b| b.prefix("admin-registry:"))
                .unwrap(),
        );
        *kept.lock().unwrap() = Some(registry.clone());
        AdminService::builder().registry(registry).build().unwrap()
    });
    let registry = hosts.lock().unwrap().clone().unwrap();
    assert_eq!(served.json("/status")["breakers"], serde_json::json!({}));
    let a = served.block_on(async { registry.get(&"a.example".to_string()).unwrap() });
    assert_eq!(
        served.json("/status")["breakers"]["a.example"]["phase"],
        "closed"
    );
    served.block_on(async { registry.get(&"b.example".to_string()).unwrap() });
    let reply = served.act("/breakers/b.example/disable", &[], r#"{"for":"5m"}"#);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let status = served.json("/status");
    assert_eq!(status["breakers"]["a.example"]["phase"], "closed");
    assert_eq!(status["breakers"]["b.example"]["phase"], "disabled");
    assert_eq!(served.act("/breakers/c.example/trip", &[], "").status, 404);
    assert_eq!(registry.len(), 2);
    drop(a);
    drop(served);
}

#[test]
fn a_redis_that_stops_answering_is_reported_in_status_and_an_action_fails_within_the_timeout() {
    let server = RedisServer::start();
    let url = server.url();
    let served = Served::start(|| async move {
        let payments = RedisBreaker::builder(&url, "payments")
            .prefix("admin-stall:")
            .timeout(Duration::from_millis(100))
            .config(config())
            .build()
            .await
            .unwrap();
        AdminService::builder()
            .breaker(payments)
            .timeout(Duration::from_millis(500))
            .build()
            .unwrap()
    });
    assert_eq!(
        served.json("/status")["breakers"]["payments"]["phase"],
        "closed"
    );
    server.pause();
    let started = Instant::now();
    let status = served.json("/status");
    let p = &status["breakers"]["payments"];
    assert!(p["error"].is_string(), "{p}");
    assert_eq!(p["phase"], "closed", "the phase this process knows");
    let reply = served.act("/breakers/payments/trip", &[], "");
    assert_eq!(reply.status, 502, "{}", reply.body);
    assert_eq!(reply.json()["error"], "action_failed");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    server.resume();
    drop(served);
}
