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

/// An upstream that answers every request `503` with `Retry-After: 120`.
fn busy_upstream() -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming().take(100) {
            let Ok(mut stream) = stream else { continue };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && head.len() < 16_384 {
                match stream.read(&mut byte) {
                    Ok(1) => head.push(byte[0]),
                    _ => break,
                }
            }
            let _ = stream.write_all(
                b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 120\r\n\
                  Content-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    format!("http://{addr}")
}

#[test]
fn a_retry_after_from_the_upstream_holds_the_shared_breaker_open_that_long() {
    let redis = RedisServer::start();
    let config = format!(
        "listen = \"127.0.0.1:0\"\nredis = \"{}\"\nredis_prefix = \"hint:\"\n[admin]\nlisten = \"127.0.0.1:0\"\n\
         [[upstream]]\nname = \"payments\"\nroute = \"/\"\nurl = \"{}\"\n\
         [upstream.breaker]\nconsecutive_failures = 1\nrecovery_timeout = \"10s\"\n\
         backoff_multiplier = 1.0\nmax_open_duration = \"5m\"\n\
         [upstream.judge]\nhonor_retry_after = true\n",
        redis.url(),
        busy_upstream()
    );
    let proxy = ProxyProcess::start(&temp_dir("redis-hint"), &config);
    assert_eq!(get(proxy.addr, "/x").status, 503, "the upstream's own 503");
    assert!(
        eventually(Duration::from_secs(5), || {
            get(proxy.addr, "/x").json()["error"] == "circuit_open"
        }),
        "the shared breaker did not open"
    );
    let rejected = get(proxy.addr, "/x").json();
    let ms = rejected["retry_after_ms"].as_u64().unwrap_or(0);
    assert!(
        (110_000..=120_000).contains(&ms),
        "open for the upstream's 120 s, not the 10 s recovery: {rejected}"
    );
    // Every proxy sharing the breaker sees the same end: it is stored in Redis.
    let until: u64 = redis
        .command(&["HGET", "hint:{payments}", "until"])
        .and_then(|u| u.parse().ok())
        .unwrap_or(0);
    let now = redis.time_us().unwrap_or(u64::MAX);
    assert!(
        until.saturating_sub(now) > 110_000_000,
        "stored open until {until}, now {now}"
    );
}

#[test]
fn redis_options_from_the_config_file_reach_the_shared_breaker() {
    // Strict mode: every forwarded request asks Redis (acquire) and reports to it
    // (record), where the default local view sends neither for a closed breaker.
    let redis = RedisServer::start();
    let upstream = Upstream::start();
    let config = format!(
        "{}[redis_options]\nmode = \"strict\"\ntimeout = \"500ms\"\n",
        shared_config(&redis, &upstream)
    );
    let proxy = ProxyProcess::start(&temp_dir("redis-options"), &config);
    let before = redis.command_calls("evalsha");
    for _ in 0..20 {
        assert_eq!(get(proxy.addr, "/x").status, 200);
    }
    // The last record goes out after its response reached the client: give it a moment.
    let mut used = redis.command_calls("evalsha") - before;
    for _ in 0..100 {
        if used >= 40 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        used = redis.command_calls("evalsha") - before;
    }
    assert!(
        used >= 40,
        "{used} script calls for 20 requests in strict mode"
    );
}

/// Rule 21 through the proxy: with `quorum = 2`, one proxy whose upstream path fails opens
/// only itself (counted in its `/metrics`); the shared breaker stays closed for the other.
#[test]
fn with_a_quorum_one_proxy_with_a_failing_path_opens_only_itself() {
    let redis = RedisServer::start();
    let bad = Upstream::start();
    let good = Upstream::start();
    bad.answer(500, "broken path");
    let config = |upstream: &Upstream, node: &str| {
        shared_config(&redis, upstream).replace(
            "consecutive_failures = 2\n",
            "consecutive_failures = 2\nquorum = 2\n",
        ) + &format!("[redis_options]\nnode_id = \"{node}\"\nmode = \"strict\"\n")
    };
    let a = ProxyProcess::start(&temp_dir("quorum-a"), &config(&bad, "node-a"));
    let b = ProxyProcess::start(&temp_dir("quorum-b"), &config(&good, "node-b"));

    for _ in 0..2 {
        assert_eq!(get(a.addr, "/x").status, 500);
    }
    assert!(
        eventually(Duration::from_secs(3), || get(a.addr, "/x").status == 503),
        "proxy A did not open locally"
    );
    assert_eq!(get(b.addr, "/x").status, 200, "B keeps serving");
    assert_eq!(
        b.phase("payments"),
        "closed",
        "the shared breaker stays closed"
    );
    // One local open, extended by each failure that still reached the path while it began.
    let sample =
        "breakerbox_local_opens_total{breaker=\"payments\",reason=\"consecutive_failures\"} ";
    let opens = |text: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(sample))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    };
    assert!(
        eventually(Duration::from_secs(3), || opens(
            &get(a.admin, "/metrics").body
        ) >= 1),
        "no {sample} in\n{}\nstatus: {}",
        get(a.admin, "/metrics").body,
        a.status()
    );
    let metrics = get(b.admin, "/metrics").body;
    assert!(
        !metrics.contains("breakerbox_local_opens_total{"),
        "{metrics}"
    );
}
