//! Active health checks (rule 24) end to end: the real binary against a loopback upstream
//! whose health path and real paths answer separately, so the tests count on the upstream
//! side which requests were health checks and which were real.

#![allow(clippy::disallowed_methods)]

#[path = "support/proxy_harness.rs"]
mod harness;
#[path = "support/health_upstream.rs"]
mod health_upstream;

use std::thread;
use std::time::{Duration, Instant};

use harness::{check, eventually, get, listeners, post, temp_dir, ProxyProcess};
use health_upstream::HealthUpstream;

/// One upstream `dep` on `/` with `health` (a TOML inline table) and `breaker` keys.
fn config(upstream: &HealthUpstream, health: &str, breaker: &str) -> String {
    format!(
        "{}[[upstream]]\nname = \"dep\"\nroute = \"/\"\nurl = \"{}\"\n{health}\n[upstream.breaker]\n{breaker}\n",
        listeners(),
        upstream.url()
    )
}

/// Sends failing requests until the breaker is open.
fn trip(proxy: &ProxyProcess, upstream: &HealthUpstream) {
    upstream.real(500);
    for _ in 0..2 {
        assert_eq!(get(proxy.addr, "/api/pay").status, 500);
    }
    assert_eq!(proxy.phase("dep"), "open");
}

fn health_status(proxy: &ProxyProcess) -> serde_json::Value {
    proxy.status()["breakers"]["dep"]["health"].clone()
}

#[test]
fn half_open_is_probed_by_health_checks_real_requests_wait_and_resume_on_close() {
    let upstream = HealthUpstream::start("/healthz");
    let dir = temp_dir("health-close");
    let proxy = ProxyProcess::start(
        &dir,
        &config(
            &upstream,
            "health = { path = \"/healthz\", interval = \"300ms\", timeout = \"200ms\" }",
            "consecutive_failures = 2\nrecovery_timeout = \"400ms\"\nrequired_successes = 3\njitter = 0.0",
        ),
    );
    // Closed: no checks at all.
    thread::sleep(Duration::from_millis(700));
    assert!(upstream.checks().is_empty(), "no checks while closed");
    trip(&proxy, &upstream);
    let real_at_trip = upstream.real_requests().len();
    // The dependency recovers; real requests would now succeed, but none may probe it.
    upstream.real(200);
    assert!(
        eventually(Duration::from_secs(5), || proxy.phase("dep") == "half_open"),
        "the first check turns the breaker half-open"
    );
    let mut probing = 0;
    let started = Instant::now();
    while proxy.phase("dep") == "half_open" && started.elapsed() < Duration::from_secs(5) {
        let reply = get(proxy.addr, "/api/pay");
        if reply.status == 503 && reply.json()["reason"] == "health probing" {
            probing += 1;
            assert_eq!(reply.json()["error"], "circuit_open");
            assert!(reply.header("retry-after").is_some());
        } else {
            // Only a close lets a real request through.
            assert_eq!(reply.status, 200, "{}", reply.body);
            assert_eq!(proxy.phase("dep"), "closed");
        }
        thread::sleep(Duration::from_millis(20));
    }
    assert!(
        probing > 5,
        "real requests were held back while half-open: {probing}"
    );
    assert!(
        eventually(Duration::from_secs(5), || proxy.phase("dep") == "closed"),
        "three healthy checks close the breaker"
    );
    let real_before_close = upstream.real_requests().len();
    let checks = upstream.checks();
    assert!(checks.len() >= 3, "checks: {checks:?}");
    assert!(checks.iter().all(|m| m == "GET"), "checks: {checks:?}");
    // Real requests reached the upstream only as the breaker closed, none while half-open
    // (the loop above stopped at the close; at most its last request went through).
    assert!(
        real_before_close - real_at_trip <= 1,
        "real requests while half-open: {}",
        real_before_close - real_at_trip
    );
    // Traffic resumes.
    assert_eq!(get(proxy.addr, "/api/pay").status, 200);
    assert_eq!(upstream.real_requests().len(), real_before_close + 1);
    let health = health_status(&proxy);
    assert_eq!(health["path"], "/healthz");
    assert!(
        health["checks"]["success"].as_u64().unwrap() >= 3,
        "{health}"
    );
    assert_eq!(health["last"]["verdict"], "success", "{health}");
    assert_eq!(health["last"]["status"], 200, "{health}");
    assert!(
        health["rejections"].as_u64().unwrap() >= probing,
        "{health}"
    );
    // Closed again: no more checks.
    let n = upstream.checks().len();
    thread::sleep(Duration::from_millis(800));
    assert_eq!(upstream.checks().len(), n, "no checks once closed");
    let metrics = get(proxy.admin, "/metrics").body;
    assert!(
        metrics.contains("breakerbox_health_checks_total{breaker=\"dep\",result=\"success\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("breakerbox_rejections_total{breaker=\"dep\",reason=\"health\"}"),
        "{metrics}"
    );
}

#[test]
fn a_failing_or_timing_out_health_check_reopens_and_no_real_request_probes() {
    let upstream = HealthUpstream::start("/healthz");
    let dir = temp_dir("health-reopen");
    let proxy = ProxyProcess::start(
        &dir,
        &config(
            &upstream,
            "health = { path = \"/healthz\", interval = \"200ms\", timeout = \"100ms\" }",
            "consecutive_failures = 2\nrecovery_timeout = \"300ms\"\nrequired_successes = 1\njitter = 0.0",
        ),
    );
    upstream.health(503, Duration::ZERO);
    trip(&proxy, &upstream);
    let real_at_trip = upstream.real_requests().len();
    upstream.real(200);
    // Failing checks: each cool-down ends in a failed check that re-opens the breaker.
    assert!(
        eventually(Duration::from_secs(5), || upstream.checks().len() >= 2),
        "a check after each cool-down"
    );
    let health = health_status(&proxy);
    assert_eq!(health["last"]["verdict"], "failure", "{health}");
    assert_eq!(health["last"]["reason"], "status 503", "{health}");
    assert_eq!(health["last"]["phase"], "open", "{health}");
    // A check that takes longer than its timeout fails too, as `timeout`.
    upstream.health(200, Duration::from_millis(400));
    let n = upstream.checks().len();
    assert!(eventually(Duration::from_secs(5), || {
        upstream.checks().len() >= n + 2 && health_status(&proxy)["last"]["reason"] == "timeout"
    }));
    let health = health_status(&proxy);
    assert_eq!(health["last"]["verdict"], "failure", "{health}");
    assert_ne!(proxy.phase("dep"), "closed");
    // Real requests meanwhile: all rejected, none reached the upstream.
    for _ in 0..20 {
        let reply = get(proxy.addr, "/api/pay");
        assert_eq!(reply.status, 503, "{}", reply.body);
        thread::sleep(Duration::from_millis(15));
    }
    assert_eq!(upstream.real_requests().len(), real_at_trip);
    // Healthy and quick again: one check closes it.
    upstream.health(200, Duration::ZERO);
    assert!(eventually(Duration::from_secs(5), || proxy.phase("dep") == "closed"));
    assert_eq!(get(proxy.addr, "/api/pay").status, 200);
}

#[test]
fn a_post_is_never_used_as_a_probe() {
    let upstream = HealthUpstream::start("/healthz");
    let dir = temp_dir("health-post");
    let proxy = ProxyProcess::start(
        &dir,
        &config(
            &upstream,
            "health = { path = \"/healthz\", interval = \"500ms\", timeout = \"200ms\" }",
            "consecutive_failures = 2\nrecovery_timeout = \"300ms\"\nrequired_successes = 2\nmax_probes = 4\njitter = 0.0",
        ),
    );
    trip(&proxy, &upstream);
    let real_at_trip = upstream.real_requests().len();
    upstream.real(200);
    // POSTs from the trip to the close, as fast as they go: through the end of the
    // cool-down (where the first acquire would make a real request the probe) and the
    // whole half-open phase.
    let started = Instant::now();
    let mut rejected = 0;
    loop {
        let reply = post(proxy.addr, "/api/charge", &[]);
        if reply.status == 200 {
            break;
        }
        assert_eq!(reply.status, 503, "{}", reply.body);
        rejected += 1;
        assert!(started.elapsed() < Duration::from_secs(10), "never closed");
    }
    assert!(rejected > 10, "{rejected}");
    let real = upstream.real_requests();
    // Exactly one POST reached the upstream: the one after the close.
    assert_eq!(real.len(), real_at_trip + 1, "{real:?}");
    assert_eq!(proxy.phase("dep"), "closed");
    assert!(upstream.checks().len() >= 2);
}

#[test]
fn health_config_errors_name_their_keys() {
    let upstream = HealthUpstream::start("/healthz");
    let dir = temp_dir("health-config");
    let cases = [
        (
            "interval = \"0s\", path = \"/h\"",
            "upstream[0].health.interval",
        ),
        (
            "path = \"/h\", interval = \"1s\", timeout = \"2s\"",
            "upstream[0].health.timeout",
        ),
        ("path = \"healthz\"", "upstream[0].health.path"),
        ("interval = \"1s\"", "upstream[0].health.path: missing"),
        (
            "path = \"/h\", method = \"POST\"",
            "upstream[0].health.method",
        ),
        ("path = \"/h\", every = \"1s\"", "upstream[0].health.every"),
    ];
    for (i, (table, key)) in cases.iter().enumerate() {
        let text = config(
            &upstream,
            &format!("health = {{ {table} }}"),
            "consecutive_failures = 2",
        );
        let (ok, stderr) = check(&dir, &format!("bad{i}.toml"), &text);
        assert!(!ok, "{table} was accepted");
        assert!(stderr.contains(key), "{table}: {stderr}");
    }
    let good = config(
        &upstream,
        "[upstream.health]\npath = \"/healthz?deep=1\"\nmethod = \"head\"",
        "consecutive_failures = 2",
    );
    let (ok, stderr) = check(&dir, "good.toml", &good);
    assert!(ok, "{stderr}");
}
