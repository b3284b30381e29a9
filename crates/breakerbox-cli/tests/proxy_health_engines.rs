//! Active health checks (rule 24) across a reload and with the Redis engine: the real
//! binary, a loopback upstream that tells health checks from real requests, and a real
//! redis-server on a free port.

#![allow(clippy::disallowed_methods)]

#[path = "support/proxy_harness.rs"]
mod harness;
#[path = "support/health_upstream.rs"]
mod health_upstream;
// The Redis engine's own harness: spawns redis-server on a free loopback port.
#[path = "../../breakerbox-redis/tests/support/redis_server.rs"]
mod redis_server;

use std::thread;
use std::time::{Duration, Instant};

use harness::{admin_post, eventually, get, listeners, temp_dir, write, ProxyProcess};
use health_upstream::HealthUpstream;
use redis_server::RedisServer;

const BREAKER: &str = "consecutive_failures = 2\nrecovery_timeout = \"300ms\"\nrequired_successes = 1\nbackoff_multiplier = 1.0\njitter = 0.0";
const HEALTH: &str = "health = { path = \"/healthz\", interval = \"200ms\", timeout = \"100ms\" }";

fn config(head: &str, upstream: &HealthUpstream, health: &str) -> String {
    format!(
        "{head}[[upstream]]\nname = \"dep\"\nroute = \"/\"\nurl = \"{}\"\n{health}\n[upstream.breaker]\n{BREAKER}\n",
        upstream.url()
    )
}

fn trip(proxy: &ProxyProcess, upstream: &HealthUpstream) {
    upstream.real(500);
    for _ in 0..2 {
        assert_eq!(get(proxy.addr, "/api/pay").status, 500);
    }
    assert_eq!(proxy.phase("dep"), "open");
}

/// Reloads `text`, which changes `health` and nothing else: the breaker is kept.
fn reload(proxy: &ProxyProcess, dir: &std::path::Path, text: &str) {
    write(dir, "proxy.toml", text);
    let reply = admin_post(proxy.admin, "/reload", &[]);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let changed = &reply.json()["changed"][0];
    assert_eq!(
        changed["keys"],
        serde_json::json!(["health"]),
        "{}",
        reply.body
    );
    assert_eq!(changed["breaker"], "kept", "{}", reply.body);
}

#[test]
fn a_reload_removes_and_adds_health_checks_and_keeps_the_breaker() {
    let upstream = HealthUpstream::start("/healthz");
    let dir = temp_dir("health-reload");
    let proxy = ProxyProcess::start(&dir, &config(listeners(), &upstream, HEALTH));
    upstream.health(503, Duration::ZERO);
    trip(&proxy, &upstream);
    let real_at_trip = upstream.real_requests().len();
    assert!(eventually(Duration::from_secs(5), || upstream
        .checks()
        .len()
        >= 2));
    // Without `health`, the breaker (still open: kept by the reload) is probed by real
    // requests again, and nothing checks the health path.
    reload(&proxy, &dir, &config(listeners(), &upstream, ""));
    assert_ne!(proxy.phase("dep"), "closed", "the reload kept the breaker");
    thread::sleep(Duration::from_millis(300));
    let checks = upstream.checks().len();
    upstream.real(200);
    assert!(eventually(Duration::from_secs(5), || {
        get(proxy.addr, "/api/pay").status == 200
    }));
    assert_eq!(proxy.phase("dep"), "closed");
    assert!(
        upstream.real_requests().len() > real_at_trip,
        "a real request probed"
    );
    thread::sleep(Duration::from_millis(500));
    assert_eq!(
        upstream.checks().len(),
        checks,
        "no checks after the reload removed them"
    );
    // `health` back (with another interval): checks resume after the next trip.
    let slower = HEALTH.replace("200ms", "250ms");
    reload(&proxy, &dir, &config(listeners(), &upstream, &slower));
    assert_eq!(
        proxy.status()["breakers"]["dep"]["health"]["interval_ms"],
        250
    );
    upstream.health(200, Duration::ZERO);
    trip(&proxy, &upstream);
    let real_at_trip = upstream.real_requests().len();
    upstream.real(200);
    let resumed = || upstream.checks().len() > checks;
    assert!(eventually(Duration::from_secs(5), resumed));
    assert!(eventually(Duration::from_secs(5), || proxy.phase("dep") == "closed"));
    assert_eq!(
        upstream.real_requests().len(),
        real_at_trip,
        "no real request probed"
    );
}

#[test]
fn with_redis_the_health_check_takes_the_shared_probe_slot() {
    let redis = RedisServer::start();
    let upstream = HealthUpstream::start("/healthz");
    let dir = temp_dir("health-redis");
    let head = format!(
        "listen = \"127.0.0.1:0\"\nredis = \"{}\"\nredis_prefix = \"healthtest:\"\n\
         [admin]\nlisten = \"127.0.0.1:0\"\n",
        redis.url()
    );
    // Two proxies on one shared breaker, both with health checks.
    let text = config(&head, &upstream, HEALTH).replace(
        "required_successes = 1",
        "required_successes = 2\nmax_probes = 1",
    );
    let a = ProxyProcess::start(&dir, &text);
    let b = ProxyProcess::start(&temp_dir("health-redis-b"), &text);
    upstream.health(200, Duration::from_millis(30));
    trip(&a, &upstream);
    let real_at_trip = upstream.real_requests().len();
    // Real requests through both proxies until the shared breaker closes. The real paths
    // still fail: a real request used as a probe would come back 500 (and re-open it).
    // The first real request that reaches the upstream ends the loop: it may only be one
    // that raced the close (a second 500 would trip the shared breaker again, which is
    // two failures in a row, not a probe).
    let started = Instant::now();
    let mut held_back = 0;
    let mut late = 0;
    'probing: while a.phase("dep") != "closed" {
        for proxy in [&a, &b] {
            let reply = get(proxy.addr, "/api/pay");
            if reply.status == 500 {
                assert_eq!(proxy.phase("dep"), "closed", "a real request probed");
                late += 1;
                break 'probing;
            }
            assert_eq!(reply.status, 503, "{}", reply.body);
            let reason = reply.json()["reason"].as_str().unwrap_or("").to_string();
            assert!(
                reason == "health probing" || reason == "open",
                "{}",
                reply.body
            );
            held_back += 1;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "never closed");
        thread::sleep(Duration::from_millis(10));
    }
    assert!(held_back > 5, "{held_back}");
    assert_eq!(upstream.real_requests().len() - real_at_trip, late);
    // Closed by the checks: real traffic resumes through both proxies.
    upstream.real(200);
    assert!(eventually(Duration::from_secs(5), || get(
        a.addr, "/api/pay"
    )
    .status
        == 200));
    assert!(eventually(Duration::from_secs(5), || get(
        b.addr, "/api/pay"
    )
    .status
        == 200));
    assert!(upstream.checks().len() >= 2);
    let checks = |p: &ProxyProcess| {
        p.status()["breakers"]["dep"]["health"]["checks"]["success"]
            .as_u64()
            .unwrap_or(0)
    };
    assert!(checks(&a) + checks(&b) >= 2);
}
