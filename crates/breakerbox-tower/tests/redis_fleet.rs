//! The tower layer on the Redis engine, end to end: two processes share one breaker
//! through Redis in front of a real loopback upstream, called with hyper's client.

#![allow(clippy::unwrap_used)] // tests unwrap
// Tests measure real elapsed time against real servers.
#![allow(clippy::disallowed_methods)]

#[path = "../../breakerbox-redis/tests/support/redis_server.rs"]
mod redis_server;

#[path = "../../breakerbox-redis/tests/support/http_fleet.rs"]
mod http_fleet;

use breakerbox::CircuitOpen;
use breakerbox_http::HttpJudge;
use breakerbox_tower::CircuitBreakerLayer;
use bytes::Bytes;
use http_body_util::Full;
use http_fleet::Sent;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tower::{ServiceBuilder, ServiceExt};

/// The keyed form over a registry of Redis breakers made on demand by one `RedisNode`:
/// one breaker per host, a dead host rejected without calling the inner service, the
/// others untouched, and a second node (another process's) seeing the same trip.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_layer_over_a_redis_node_registry_trips_one_host_only() {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    let redis = redis_server::RedisServer::start();
    let config = breakerbox::Config::builder()
        .consecutive_failures(2)
        .recovery_timeout(std::time::Duration::from_secs(60))
        .build()
        .unwrap();
    let node = breakerbox_redis::RedisNode::connect(&redis.url()).unwrap();
    let registry = Arc::new(node.registry::<String>(config.clone(), 16).unwrap());
    let calls: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let seen = calls.clone();
    let inner = tower::service_fn(move |host: String| {
        let seen = seen.clone();
        async move {
            *seen.lock().unwrap().entry(host.clone()).or_default() += 1;
            if host == "dead" {
                Err(std::io::Error::other("connection refused"))
            } else {
                Ok(host)
            }
        }
    });
    let service = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::keyed(
            registry.clone(),
            |host: &String| host.clone(),
        ))
        .service(inner);
    for _ in 0..2 {
        let error = service
            .clone()
            .oneshot("dead".to_string())
            .await
            .unwrap_err();
        assert!(error.downcast_ref::<CircuitOpen>().is_none(), "{error}");
    }
    // The failures reach Redis at once; the view then rejects without Redis.
    let dead = registry.get(&"dead".to_string()).unwrap();
    dead.flush().await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while breakerbox::Breaker::phase(&dead) != breakerbox::Phase::Open {
        assert!(std::time::Instant::now() < deadline, "never tripped");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    for _ in 0..5 {
        let error = service
            .clone()
            .oneshot("dead".to_string())
            .await
            .unwrap_err();
        assert!(error.downcast_ref::<CircuitOpen>().is_some(), "{error}");
        assert_eq!(
            service.clone().oneshot("alive".to_string()).await.unwrap(),
            "alive"
        );
    }
    assert_eq!(calls.lock().unwrap()["dead"], 2, "nothing sent once open");
    assert_eq!(calls.lock().unwrap()["alive"], 5);
    // Another process's node shares the breaker of that host.
    let other = breakerbox_redis::RedisNode::connect(&redis.url()).unwrap();
    let other_registry = other.registry::<String>(config, 16).unwrap();
    let shared = other_registry.get(&"dead".to_string()).unwrap();
    let refused = breakerbox::Breaker::acquire_now_or_later(&shared).await;
    assert!(refused.is_err(), "the trip is shared");
    assert_eq!(node.breakers(), 2, "one breaker per host on one node");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_share_one_redis_breaker_through_the_layer() {
    http_fleet::run_scenario("http_fleet_worker").await;
}

/// One process of the fleet (run by the test above, ignored otherwise).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a worker process of two_processes_share_one_redis_breaker_through_the_layer"]
async fn http_fleet_worker() {
    let Some((redis, upstream, run_for)) = http_fleet::worker_settings() else {
        return;
    };
    let breaker = http_fleet::breaker(&redis).await;
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let service = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::new(breaker).http(HttpJudge::default()))
        .service(client);
    let uri: http::Uri = upstream.parse().unwrap();
    http_fleet::run_callers(3, run_for, move || {
        let service = service.clone();
        let request = http::Request::get(uri.clone())
            .body(Full::new(Bytes::new()))
            .unwrap();
        async move {
            match service.oneshot(request).await {
                Ok(_) => Sent::Response,
                Err(error) if error.downcast_ref::<CircuitOpen>().is_some() => Sent::Rejected,
                Err(_) => Sent::Error,
            }
        }
    })
    .await;
}
