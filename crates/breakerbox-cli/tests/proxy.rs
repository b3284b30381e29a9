//! `breakerbox proxy` end to end: the real binary against a scripted upstream on 127.0.0.1.

#![allow(clippy::disallowed_methods)]

#[path = "support/proxy_harness.rs"]
mod harness;
#[path = "../../breakerbox/tests/support/prometheus.rs"]
mod prometheus;

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use harness::{
    admin_post, eventually, get, listeners, request, temp_dir, write, ProxyProcess, Upstream,
};

fn one_upstream(upstream: &Upstream, breaker: &str, extra: &str) -> String {
    format!(
        "{}{extra}\n[[upstream]]\nname = \"payments\"\nroute = \"/payments/\"\nurl = \"{}\"\n[upstream.breaker]\n{breaker}\n",
        listeners(),
        upstream.url()
    )
}

#[test]
fn forwards_method_path_query_headers_and_body_and_hands_back_the_response() {
    let upstream = Upstream::start();
    upstream.answer(201, "created");
    let dir = temp_dir("forwards");
    let proxy = ProxyProcess::start(
        &dir,
        &one_upstream(&upstream, "consecutive_failures = 3", ""),
    );

    let reply = request(
        proxy.addr,
        "PUT",
        "/payments/42?currency=eur&x=1",
        &[
            ("x-request-id", "abc"),
            ("keep-alive", "timeout=5"),
            ("x-forwarded-for", "10.0.0.9"),
        ],
        b"{\"amount\":10}",
    );
    assert_eq!(reply.status, 201);
    assert_eq!(reply.body, "created");
    assert_eq!(reply.header("x-upstream"), Some("scripted"));

    let seen = upstream.last();
    assert_eq!(seen.method, "PUT");
    assert_eq!(seen.target, "/payments/42?currency=eur&x=1");
    assert_eq!(seen.body, b"{\"amount\":10}");
    assert_eq!(
        seen.headers.get("x-request-id").map(String::as_str),
        Some("abc")
    );
    assert_eq!(
        seen.headers.get("x-forwarded-for").map(String::as_str),
        Some("10.0.0.9, 127.0.0.1")
    );
    assert!(
        !seen.headers.contains_key("keep-alive"),
        "hop-by-hop header forwarded: {:?}",
        seen.headers
    );
    assert_eq!(upstream.count(), 1);
}

#[test]
fn an_unknown_route_answers_404_json_without_contacting_any_upstream() {
    let upstream = Upstream::start();
    let dir = temp_dir("unknown-route");
    let proxy = ProxyProcess::start(
        &dir,
        &one_upstream(&upstream, "consecutive_failures = 3", ""),
    );
    let reply = get(proxy.addr, "/inventory/1");
    assert_eq!(reply.status, 404);
    assert_eq!(reply.json()["error"], "no_route");
    assert_eq!(upstream.count(), 0);
}

#[test]
fn host_and_longest_prefix_pick_the_upstream() {
    let a = Upstream::start();
    let b = Upstream::start();
    let c = Upstream::start();
    a.answer(200, "a");
    b.answer(200, "b");
    c.answer(200, "c");
    let config = format!(
        "{}\n[[upstream]]\nname = \"api\"\nroute = \"/api/\"\nurl = \"{}\"\n\
         [[upstream]]\nname = \"api-v2\"\nroute = \"/api/v2/\"\nurl = \"{}\"\nstrip_prefix = true\n\
         [[upstream]]\nname = \"shop\"\nhost = \"shop.example\"\nurl = \"{}/base\"\n",
        listeners(),
        a.url(),
        b.url(),
        c.url()
    );
    let dir = temp_dir("routing");
    let proxy = ProxyProcess::start(&dir, &config);
    assert_eq!(get(proxy.addr, "/api/users").body, "a");
    assert_eq!(get(proxy.addr, "/api/v2/users?id=1").body, "b");
    assert_eq!(b.last().target, "/users?id=1");
    let reply = request(
        proxy.addr,
        "GET",
        "/api/x",
        &[("host", "shop.example:8080")],
        b"",
    );
    assert_eq!(reply.body, "c");
    assert_eq!(c.last().target, "/base/api/x");
}

#[test]
fn failures_trip_the_breaker_and_open_answers_503_with_retry_after_without_contacting_the_upstream()
{
    let upstream = Upstream::start();
    upstream.answer(500, "boom");
    let dir = temp_dir("trip");
    let proxy = ProxyProcess::start(
        &dir,
        &one_upstream(
            &upstream,
            "consecutive_failures = 3\nrecovery_timeout = \"30s\"",
            "",
        ),
    );
    for _ in 0..3 {
        let reply = get(proxy.addr, "/payments/charge");
        assert_eq!(reply.status, 500, "failures are handed back as they are");
        assert_eq!(reply.body, "boom");
    }
    assert_eq!(upstream.count(), 3);

    for _ in 0..5 {
        let reply = get(proxy.addr, "/payments/charge");
        assert_eq!(reply.status, 503);
        let retry: u64 = reply
            .header("retry-after")
            .expect("Retry-After")
            .parse()
            .unwrap();
        assert!((29..=30).contains(&retry), "Retry-After {retry}");
        let body = reply.json();
        assert_eq!(body["error"], "circuit_open");
        assert_eq!(body["upstream"], "payments");
        let ms = body["retry_after_ms"].as_u64().unwrap();
        assert!(ms > 28_000 && ms <= 30_000, "retry_after_ms {ms}");
    }
    assert_eq!(upstream.count(), 3, "the upstream was contacted while open");

    let status = proxy.status();
    let b = &status["breakers"]["payments"];
    assert_eq!(b["phase"], "open");
    assert_eq!(b["trips"], 1);
    assert_eq!(b["rejections"], 5);
    assert_eq!(b["calls"]["failure"], 3);
    assert_eq!(status["transitions"][0]["to"], "open");
    assert_eq!(status["transitions"][0]["reason"], "consecutive_failures");
}

#[test]
fn an_open_breaker_recovers_through_a_probe_once_the_upstream_is_healthy() {
    let upstream = Upstream::start();
    upstream.answer(503, "down");
    let dir = temp_dir("recover");
    let proxy = ProxyProcess::start(
        &dir,
        &one_upstream(
            &upstream,
            "consecutive_failures = 2\nrecovery_timeout = \"700ms\"\nrequired_successes = 1",
            "",
        ),
    );
    for _ in 0..2 {
        assert_eq!(get(proxy.addr, "/payments/a").status, 503);
    }
    assert_eq!(
        get(proxy.addr, "/payments/a").json()["error"],
        "circuit_open"
    );
    upstream.answer(200, "back");
    thread::sleep(Duration::from_millis(800));
    let probe = get(proxy.addr, "/payments/a");
    assert_eq!((probe.status, probe.body.as_str()), (200, "back"));
    assert_eq!(proxy.phase("payments"), "closed");
    assert_eq!(upstream.count(), 3);
    let transitions: Vec<String> = proxy.status()["transitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            format!(
                "{}->{}",
                t["from"].as_str().unwrap(),
                t["to"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        transitions,
        ["half_open->closed", "open->half_open", "closed->open"]
    );
}

#[test]
fn a_failed_probe_reopens_the_breaker() {
    let upstream = Upstream::start();
    upstream.answer(500, "down");
    let dir = temp_dir("probe-fails");
    let proxy = ProxyProcess::start(
        &dir,
        &one_upstream(
            &upstream,
            "consecutive_failures = 1\nrecovery_timeout = \"500ms\"",
            "",
        ),
    );
    assert_eq!(get(proxy.addr, "/payments/a").status, 500);
    thread::sleep(Duration::from_millis(600));
    assert_eq!(
        get(proxy.addr, "/payments/a").status,
        500,
        "the probe is forwarded"
    );
    assert_eq!(
        get(proxy.addr, "/payments/a").status,
        503,
        "and its failure re-opens"
    );
    assert_eq!(upstream.count(), 2);
    assert_eq!(proxy.status()["breakers"]["payments"]["trips"], 2);
}

#[test]
fn an_unreachable_upstream_answers_502_json_and_counts_as_a_failure() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let config = format!(
        "{}\n[[upstream]]\nname = \"gone\"\nroute = \"/\"\nurl = \"http://127.0.0.1:{port}\"\n[upstream.breaker]\nconsecutive_failures = 2\n",
        listeners()
    );
    let dir = temp_dir("unreachable");
    let proxy = ProxyProcess::start(&dir, &config);
    for _ in 0..2 {
        let reply = get(proxy.addr, "/x");
        assert_eq!(reply.status, 502);
        assert_eq!(reply.json()["error"], "bad_gateway");
        assert_eq!(reply.json()["upstream"], "gone");
    }
    assert_eq!(get(proxy.addr, "/x").status, 503);
    let metrics = get(proxy.admin, "/metrics").body;
    assert!(
        metrics.contains("breakerbox_upstream_errors_total{breaker=\"gone\",kind=\"connect\"} 2"),
        "{metrics}"
    );
}

#[test]
fn a_slow_upstream_answers_504_after_the_request_timeout() {
    let upstream = Upstream::start();
    upstream.delay(Duration::from_secs(3));
    let dir = temp_dir("timeout");
    let proxy = ProxyProcess::start(
        &dir,
        &one_upstream(
            &upstream,
            "consecutive_failures = 5",
            "[limits]\nrequest_timeout = \"300ms\"",
        ),
    );
    let started = Instant::now();
    let reply = get(proxy.addr, "/payments/slow");
    assert_eq!(reply.status, 504);
    assert_eq!(reply.json()["error"], "upstream_timeout");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(
        proxy.status()["breakers"]["payments"]["calls"]["failure"],
        1
    );
}

#[test]
fn a_business_error_code_in_a_200_body_is_a_failure_and_the_body_is_handed_on_unchanged() {
    let upstream = Upstream::start();
    let body = r#"{"ok":false,"error_code":"E042"}"#;
    upstream.answer(200, body);
    let config = format!(
        "{}\n[[upstream]]\nname = \"payments\"\nroute = \"/payments/\"\nurl = \"{}\"\n\
         [upstream.breaker]\nconsecutive_failures = 2\n\
         [upstream.judge]\nclient_errors = \"failure\"\n[upstream.judge.business]\npointers = [\"/error_code\"]\nfailure_codes = [\"E042\"]\n",
        listeners(),
        upstream.url()
    );
    let dir = temp_dir("business");
    let proxy = ProxyProcess::start(&dir, &config);
    for _ in 0..2 {
        let reply = get(proxy.addr, "/payments/x");
        assert_eq!((reply.status, reply.body.as_str()), (200, body));
    }
    assert_eq!(get(proxy.addr, "/payments/x").status, 503);
}

#[test]
fn status_and_metrics_report_every_breaker() {
    let upstream = Upstream::start();
    let config = format!(
        "{}\n[[upstream]]\nname = \"payments\"\nroute = \"/payments/\"\nurl = \"{u}\"\n[upstream.breaker]\nfailure_rate = 0.5\nwindow = \"count:10\"\nmin_calls = 4\n\
         [[upstream]]\nname = \"inventory\"\nroute = \"/inventory/\"\nurl = \"{u}\"\n",
        listeners(),
        u = upstream.url()
    );
    let dir = temp_dir("status-metrics");
    let proxy = ProxyProcess::start(&dir, &config);
    get(proxy.addr, "/payments/1");
    upstream.answer(500, "x");
    get(proxy.addr, "/payments/1");
    upstream.answer(404, "missing");
    get(proxy.addr, "/payments/1");

    let status = proxy.status();
    let p = &status["breakers"]["payments"];
    assert_eq!(p["phase"], "closed");
    assert_eq!(p["generation"], 0);
    assert_eq!(p["window"]["calls"], 2);
    assert_eq!(p["window"]["failures"], 1);
    assert_eq!(p["failure_rate"], 0.5);
    assert_eq!(p["calls"]["success"], 1);
    assert_eq!(p["calls"]["failure"], 1);
    assert_eq!(p["calls"]["ignore"], 1);
    assert_eq!(p["probes_in_flight"], 0);
    assert!(p["retry_after_ms"].is_null());
    assert_eq!(status["breakers"]["inventory"]["phase"], "closed");

    admin_post(proxy.admin, "/breakers/inventory/trip", &[]);
    let metrics = get(proxy.admin, "/metrics");
    assert_eq!(metrics.status, 200);
    assert!(metrics
        .header("content-type")
        .unwrap()
        .starts_with("text/plain; version=0.0.4"));
    for line in [
        "# TYPE breakerbox_state gauge",
        "breakerbox_state{breaker=\"payments\",phase=\"closed\"} 1",
        "breakerbox_state{breaker=\"payments\",phase=\"open\"} 0",
        "breakerbox_state{breaker=\"inventory\",phase=\"forced_open\"} 1",
        "# TYPE breakerbox_calls_total counter",
        "breakerbox_calls_total{breaker=\"payments\",verdict=\"success\"} 1",
        "breakerbox_calls_total{breaker=\"payments\",verdict=\"failure\"} 1",
        "breakerbox_calls_total{breaker=\"payments\",verdict=\"ignore\"} 1",
        "breakerbox_rejections_total{breaker=\"inventory\",reason=\"open\"} 0",
        "breakerbox_rejections_total{breaker=\"inventory\",reason=\"ramp\"} 0",
        "breakerbox_transitions_total{breaker=\"inventory\",from=\"closed\",to=\"forced_open\"} 1",
        "breakerbox_stale_results_total{breaker=\"payments\"} 0",
    ] {
        assert!(
            metrics.body.lines().any(|l| l == line),
            "missing {line:?} in\n{}",
            metrics.body
        );
    }
    // Written by the exporter, and valid for Prometheus.
    prometheus::assert_promtool_accepts(&metrics.body);
}

#[test]
fn trip_and_reset_actions_work_from_loopback() {
    let upstream = Upstream::start();
    let dir = temp_dir("actions");
    let proxy = ProxyProcess::start(
        &dir,
        &one_upstream(&upstream, "consecutive_failures = 3", ""),
    );
    let reply = admin_post(proxy.admin, "/breakers/payments/trip", &[]);
    assert_eq!(reply.status, 200);
    assert_eq!(reply.json()["phase"], "forced_open");
    let rejected = get(proxy.addr, "/payments/1");
    assert_eq!(rejected.status, 503);
    assert!(rejected.json()["retry_after_ms"].is_null());
    assert_eq!(rejected.header("retry-after"), None);
    assert_eq!(upstream.count(), 0);

    let reply = admin_post(proxy.admin, "/breakers/payments/reset", &[]);
    assert_eq!(
        (reply.status, reply.json()["phase"].as_str()),
        (200, Some("closed"))
    );
    assert_eq!(get(proxy.addr, "/payments/1").status, 200);
    assert_eq!(upstream.count(), 1);

    assert_eq!(
        admin_post(proxy.admin, "/breakers/nope/trip", &[]).status,
        404
    );
    assert_eq!(get(proxy.admin, "/breakers/payments/trip").status, 405);
}

#[test]
fn with_a_token_every_action_needs_it_even_from_loopback() {
    let upstream = Upstream::start();
    let config = format!(
        "listen = \"127.0.0.1:0\"\n[admin]\nlisten = \"127.0.0.1:0\"\ntoken = \"s3cret\"\n\
         [[upstream]]\nname = \"payments\"\nroute = \"/\"\nurl = \"{}\"\n",
        upstream.url()
    );
    let dir = temp_dir("token");
    let proxy = ProxyProcess::start(&dir, &config);
    assert_eq!(
        admin_post(proxy.admin, "/breakers/payments/trip", &[]).status,
        401
    );
    assert_eq!(
        admin_post(
            proxy.admin,
            "/breakers/payments/trip",
            &[("authorization", "Bearer wrong")]
        )
        .status,
        403
    );
    assert_eq!(proxy.phase("payments"), "closed");
    assert_eq!(
        admin_post(
            proxy.admin,
            "/breakers/payments/trip",
            &[("authorization", "Bearer s3cret")]
        )
        .status,
        200
    );
    assert_eq!(proxy.phase("payments"), "forced_open");
    assert_eq!(
        get(proxy.admin, "/status").status,
        200,
        "reads need no token"
    );
}

#[test]
fn check_accepts_a_good_config_and_names_every_bad_key() {
    let dir = temp_dir("check");
    let good = write(
        &dir,
        "good.toml",
        "listen = \"127.0.0.1:8080\"\n[admin]\nlisten = \"127.0.0.1:9090\"\n[limits]\nmax_body_bytes = 1000\nrequest_timeout = \"5s\"\n\
         [[upstream]]\nname = \"a\"\nroute = \"/a/\"\nurl = \"http://127.0.0.1:3000\"\n[upstream.breaker]\nfailure_rate = 0.5\n\
         [upstream.judge]\nslow_threshold = \"800ms\"\n[[upstream]]\nname = \"b\"\nhost = \"b.local\"\nurl = \"http://127.0.0.1:3001\"\n",
    );
    let out = Command::new(harness::binary())
        .args(["proxy", "--check"])
        .arg(&good)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ok: 2 upstreams"
    );

    let bad = write(
        &dir,
        "bad.toml",
        "listen = \"nowhere\"\ncolour = \"blue\"\n[limits]\nrequest_timeout = \"soon\"\n\
         [[upstream]]\nname = \"a\"\nroute = \"/a/\"\nurl = \"ftp://x\"\n\
         [[upstream]]\nname = \"b\"\nroute = \"/b/\"\nurl = \"http://127.0.0.1:1\"\n[upstream.breaker]\nfailure_rate = 1.5\n\
         [[upstream]]\nname = \"a\"\nurl = \"http://127.0.0.1:2\"\n[upstream.judge]\nslow_threshold = \"0s\"\n",
    );
    let out = Command::new(harness::binary())
        .args(["proxy", "--check"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    for expected in [
        "listen: invalid value \"nowhere\"",
        "colour: unknown key",
        "limits.request_timeout: invalid value \"soon\"",
        "upstream[0].url: invalid value \"ftp://x\"",
        "upstream[1].breaker.failure_rate: invalid value 1.5",
        "upstream[2]: needs a `route`",
        "upstream[2].judge.slow_threshold",
    ] {
        assert!(
            stderr.contains(expected),
            "missing {expected:?} in:\n{stderr}"
        );
    }
    let not_toml = write(&dir, "broken.toml", "listen = \n");
    let out = Command::new(harness::binary())
        .args(["proxy", "--check"])
        .arg(&not_toml)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid TOML"));
}

#[test]
fn oversized_bodies_get_413_and_oversized_headers_get_431_without_reaching_the_upstream() {
    let upstream = Upstream::start();
    let dir = temp_dir("limits");
    let proxy = ProxyProcess::start(
        &dir,
        &one_upstream(
            &upstream,
            "consecutive_failures = 3",
            "[limits]\nmax_body_bytes = 1024\nmax_header_bytes = 2048",
        ),
    );
    let big = vec![b'x'; 4096];
    let reply = request(proxy.addr, "POST", "/payments/1", &[], &big);
    assert_eq!(reply.status, 413);
    assert_eq!(reply.json()["error"], "body_too_large");

    let mut chunked = Vec::new();
    for _ in 0..4 {
        chunked.extend_from_slice(b"200\r\n");
        chunked.extend_from_slice(&[b'y'; 512]);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let reply = request(
        proxy.addr,
        "POST",
        "/payments/1",
        &[("transfer-encoding", "chunked")],
        &chunked,
    );
    assert_eq!(reply.status, 413, "a chunked body over the limit");

    let long = "v".repeat(3000);
    let reply = request(proxy.addr, "GET", "/payments/1", &[("x-long", &long)], b"");
    assert_eq!(reply.status, 431);
    let huge = "v".repeat(20_000);
    let reply = request(proxy.addr, "GET", "/payments/1", &[("x-huge", &huge)], b"");
    assert_eq!(reply.status, 431, "beyond the parser's buffer too");
    assert_eq!(upstream.count(), 0);

    let reply = request(proxy.addr, "POST", "/payments/1", &[], &[b'z'; 1000]);
    assert_eq!(reply.status, 200);
    assert_eq!(upstream.last().body.len(), 1000);
    assert_eq!(
        proxy.status()["breakers"]["payments"]["calls"]["failure"],
        0
    );
}

#[test]
fn sigterm_stops_accepting_and_finishes_requests_in_flight() {
    let upstream = Upstream::start();
    upstream.delay(Duration::from_millis(1500));
    upstream.answer(200, "finished");
    let dir = temp_dir("shutdown");
    let mut proxy = ProxyProcess::start(
        &dir,
        &one_upstream(
            &upstream,
            "consecutive_failures = 3",
            "[limits]\nshutdown_grace = \"10s\"",
        ),
    );
    let addr = proxy.addr;
    let in_flight = thread::spawn(move || get(addr, "/payments/slow"));
    assert!(eventually(Duration::from_secs(5), || upstream.count() == 1));
    proxy.terminate();
    assert!(
        eventually(Duration::from_secs(5), || std::net::TcpStream::connect(
            addr
        )
        .is_err()),
        "still accepting after SIGTERM"
    );
    let reply = in_flight.join().unwrap();
    assert_eq!((reply.status, reply.body.as_str()), (200, "finished"));
    assert_eq!(proxy.wait_exit(Duration::from_secs(10)), Some(0));
    assert!(proxy.stderr().contains("stopped"), "{}", proxy.stderr());
}

#[test]
fn upstream_connections_are_kept_alive_and_shared_by_concurrent_requests() {
    let upstream = Upstream::start();
    let dir = temp_dir("keep-alive");
    let config = format!(
        "workers = 2\n{}",
        one_upstream(&upstream, "consecutive_failures = 3", "")
    );
    let proxy = ProxyProcess::start(&dir, &config);
    for i in 0..30 {
        let reply = get(proxy.addr, &format!("/payments/{i}"));
        assert_eq!((reply.status, reply.body.as_str()), (200, "ok"));
    }
    assert!(
        upstream.connections() <= 2,
        "30 sequential requests opened {} upstream connections",
        upstream.connections()
    );

    let addr = proxy.addr;
    let clients: Vec<_> = (0..8)
        .map(|c| {
            thread::spawn(move || {
                for i in 0..25 {
                    let reply = get(addr, &format!("/payments/{c}/{i}"));
                    assert_eq!((reply.status, reply.body.as_str()), (200, "ok"));
                }
            })
        })
        .collect();
    for c in clients {
        c.join().expect("a client thread failed");
    }
    assert_eq!(upstream.count(), 230);
    assert!(
        upstream.connections() <= 2 + 16,
        "{} upstream connections for 8 concurrent clients",
        upstream.connections()
    );
    assert_eq!(
        proxy.status()["breakers"]["payments"]["calls"]["success"],
        230
    );
}

#[test]
fn in_shadow_mode_the_breaker_trips_but_clients_still_reach_the_upstream_and_status_counts_it() {
    let upstream = Upstream::start();
    upstream.answer(500, "boom");
    let dir = temp_dir("shadow");
    let config = format!(
        "{}\n[[upstream]]\nname = \"payments\"\nroute = \"/payments/\"\nurl = \"{}\"\nmode = \"shadow\"\n[upstream.breaker]\nconsecutive_failures = 3\nrecovery_timeout = \"30s\"\n",
        listeners(),
        upstream.url()
    );
    let proxy = ProxyProcess::start(&dir, &config);
    for _ in 0..8 {
        let reply = get(proxy.addr, "/payments/charge");
        assert_eq!(reply.status, 500, "every call reaches the upstream");
        assert_eq!(reply.body, "boom");
    }
    assert_eq!(upstream.count(), 8, "nothing was rejected");

    let status = proxy.status();
    let b = &status["breakers"]["payments"];
    assert_eq!(b["phase"], "open", "the breaker tripped as usual: {b}");
    assert_eq!(b["trips"], 1);
    assert_eq!(b["shadow"], true);
    assert_eq!(b["shadow_rejections"], 5, "{b}");
    assert_eq!(status["transitions"][0]["reason"], "consecutive_failures");
    let metrics = get(proxy.admin, "/metrics").body;
    assert!(
        metrics.contains("breakerbox_shadow_rejections_total{breaker=\"payments\"} 5"),
        "{metrics}"
    );

    // Leaving shadow mode at runtime: the open breaker rejects again.
    let reply = admin_post(proxy.admin, "/breakers/payments/unshadow", &[]);
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(get(proxy.addr, "/payments/charge").status, 503);
    assert_eq!(upstream.count(), 8);
}

#[test]
fn after_a_recovery_a_growing_share_of_requests_reaches_the_upstream() {
    let upstream = Upstream::start();
    upstream.answer(500, "boom");
    let dir = temp_dir("ramp");
    let proxy = ProxyProcess::start(
        &dir,
        &one_upstream(
            &upstream,
            "consecutive_failures = 1\nrecovery_timeout = \"300ms\"\nrequired_successes = 1\nramp_start = 0.1\nramp_duration = \"4s\"",
            "",
        ),
    );
    assert_eq!(get(proxy.addr, "/payments/charge").status, 500);
    thread::sleep(Duration::from_millis(350));
    upstream.answer(200, "ok");
    assert_eq!(get(proxy.addr, "/payments/probe").status, 200, "the probe");
    let b = &proxy.status()["breakers"]["payments"];
    assert_eq!(b["phase"], "closed", "{b}");
    assert!(b["ramp"].as_f64().is_some_and(|f| f < 0.5), "{b}");
    // Three bursts of 50 requests: right after the close, half-way, after the ramp.
    let mut reached = Vec::new();
    for pause in [0, 2_000, 2_000] {
        thread::sleep(Duration::from_millis(pause));
        let before = upstream.count();
        for i in 0..50 {
            let reply = get(proxy.addr, &format!("/payments/{i}"));
            if reply.status == 503 {
                assert!(reply.body.contains("\"reason\":\"ramp\""), "{}", reply.body);
            } else {
                assert_eq!(reply.status, 200);
            }
        }
        reached.push(upstream.count() - before);
    }
    assert!(
        reached[0] < 25 && reached[0] < reached[1] && reached[2] == 50,
        "requests that reached the upstream per burst: {reached:?}"
    );
    // The ramp's 503s are counted apart from the open phase's.
    let metrics = get(proxy.admin, "/metrics").body;
    let ramp = 150 - reached.iter().sum::<usize>();
    for line in [
        format!("breakerbox_rejections_total{{breaker=\"payments\",reason=\"ramp\"}} {ramp}"),
        "breakerbox_rejections_total{breaker=\"payments\",reason=\"open\"} 0".to_string(),
    ] {
        assert!(metrics.contains(&line), "no {line} in\n{metrics}");
    }
}
