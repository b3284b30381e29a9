//! Two `breakerbox proxy` processes sharing one breaker through a real redis-server.

#![allow(clippy::disallowed_methods)]

#[path = "support/proxy_harness.rs"]
mod harness;
// The Redis engine's own harness: spawns redis-server on a free loopback port.
#[path = "../../breakerbox-redis/tests/support/redis_server.rs"]
mod redis_server;

use std::time::Duration;

use harness::{admin_post, eventually, get, temp_dir, ProxyProcess, Upstream};
use redis_server::RedisServer;

fn shared_config(redis: &RedisServer, upstream: &Upstream) -> String {
    format!(
        "listen = \"127.0.0.1:0\"\nredis = \"{}\"\nredis_prefix = \"proxytest:\"\n[admin]\nlisten = \"127.0.0.1:0\"\n\
         [[upstream]]\nname = \"payments\"\nroute = \"/\"\nurl = \"{}\"\n\
         [upstream.breaker]\nconsecutive_failures = 2\nrecovery_timeout = \"30s\"\n",
        redis.url(),
        upstream.url()
    )
}

#[test]
fn tripping_through_one_proxy_makes_the_other_reject_and_a_reset_through_either_reopens_both() {
    let redis = RedisServer::start();
    let upstream_a = Upstream::start();
    let upstream_b = Upstream::start();
    upstream_a.answer(500, "down");
    let a = ProxyProcess::start(&temp_dir("redis-a"), &shared_config(&redis, &upstream_a));
    let b = ProxyProcess::start(&temp_dir("redis-b"), &shared_config(&redis, &upstream_b));

    assert_eq!(get(b.addr, "/x").status, 200, "closed at first");
    let before = upstream_b.count();

    for _ in 0..2 {
        assert_eq!(get(a.addr, "/x").status, 500);
    }
    assert!(
        eventually(Duration::from_secs(3), || get(a.addr, "/x").status == 503),
        "proxy A did not open"
    );
    assert_eq!(
        b.phase("payments"),
        "open",
        "B reads the shared state from redis"
    );
    assert_eq!(b.status()["breakers"]["payments"]["shared"], true);
    assert!(
        eventually(Duration::from_secs(5), || get(b.addr, "/x").status == 503),
        "proxy B never rejected"
    );
    let seen = upstream_b.count();
    assert!(
        seen <= before + 5,
        "B kept forwarding: {} requests",
        seen - before
    );
    for _ in 0..5 {
        let reply = get(b.addr, "/x");
        assert_eq!(reply.status, 503);
        assert_eq!(reply.json()["error"], "circuit_open");
        assert!(reply.header("retry-after").is_some());
    }
    assert_eq!(
        upstream_b.count(),
        seen,
        "B contacted its upstream while open"
    );

    assert_eq!(
        admin_post(b.admin, "/breakers/payments/reset", &[]).status,
        200
    );
    assert!(
        eventually(Duration::from_secs(5), || a.phase("payments") == "closed"),
        "the reset through B did not reach A"
    );
    upstream_a.answer(200, "fine");
    assert!(
        eventually(Duration::from_secs(5), || get(a.addr, "/x").status == 200),
        "A did not forward again after the reset"
    );

    assert_eq!(
        admin_post(a.admin, "/breakers/payments/trip", &[]).status,
        200
    );
    assert!(
        eventually(Duration::from_secs(5), || get(b.addr, "/x").status == 503),
        "a trip through A did not reach B"
    );
    let metrics = get(b.admin, "/metrics").body;
    assert!(
        metrics.contains("breakerbox_state{breaker=\"payments\",phase=\"forced_open\"} 1"),
        "{metrics}"
    );
}

#[test]
fn a_probe_through_either_proxy_closes_the_shared_breaker_for_both() {
    let redis = RedisServer::start();
    let upstream = Upstream::start();
    upstream.answer(500, "down");
    let config = format!(
        "listen = \"127.0.0.1:0\"\nredis = \"{}\"\nredis_prefix = \"probetest:\"\n[admin]\nlisten = \"127.0.0.1:0\"\n\
         [[upstream]]\nname = \"payments\"\nroute = \"/\"\nurl = \"{}\"\n\
         [upstream.breaker]\nconsecutive_failures = 1\nrecovery_timeout = \"1s\"\nrequired_successes = 1\n",
        redis.url(),
        upstream.url()
    );
    let a = ProxyProcess::start(&temp_dir("probe-a"), &config);
    let b = ProxyProcess::start(&temp_dir("probe-b"), &config);
    assert_eq!(get(a.addr, "/x").status, 500);
    assert!(
        eventually(Duration::from_secs(3), || get(b.addr, "/x").status == 503),
        "B did not see the trip"
    );
    upstream.answer(200, "back");
    std::thread::sleep(Duration::from_millis(1100));
    assert!(
        eventually(Duration::from_secs(5), || get(b.addr, "/x").status == 200),
        "B's probe was not admitted"
    );
    assert!(
        eventually(Duration::from_secs(5), || a.phase("payments") == "closed"),
        "the close through B did not reach A"
    );
    assert_eq!(get(a.addr, "/x").status, 200);
}
