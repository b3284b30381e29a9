//! `breakerbox proxy` judges the upstream, never the client: stalled or vanished clients,
//! keep-alive races and cut response bodies, each driven through the real binary.

#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

#[path = "support/proxy_harness.rs"]
mod harness;

use std::io::Read as _;
use std::net::Shutdown;
use std::thread;
use std::time::{Duration, Instant};

use harness::{
    eventually, get, listeners, post_head, read_reply, send_raw, temp_dir, try_request, Fault,
    ProxyProcess, Upstream,
};

fn config(upstream: &Upstream, breaker: &str, limits: &str) -> String {
    format!(
        "{}[limits]\n{limits}\n[[upstream]]\nname = \"payments\"\nroute = \"/payments/\"\nurl = \"{}\"\n[upstream.breaker]\n{breaker}\n",
        listeners(),
        upstream.url()
    )
}

fn failures(proxy: &ProxyProcess) -> u64 {
    proxy.status()["breakers"]["payments"]["calls"]["failure"]
        .as_u64()
        .unwrap()
}

#[test]
fn clients_that_stall_their_body_past_the_request_timeout_do_not_trip_the_breaker() {
    let upstream = Upstream::start();
    let dir = temp_dir("stalled-bodies-do-not-trip");
    let proxy = ProxyProcess::start(
        &dir,
        &config(
            &upstream,
            "consecutive_failures = 2",
            "request_timeout = \"300ms\"",
        ),
    );
    // Five clients announce 100 bytes, send 10 and stall (the default client body
    // timeout is far longer than the request timeout).
    let stalled: Vec<_> = (0..5)
        .map(|_| {
            let mut bytes = post_head(proxy.addr, "/payments/charge", 100).into_bytes();
            bytes.extend_from_slice(&[b'x'; 10]);
            send_raw(proxy.addr, &bytes)
        })
        .collect();
    thread::sleep(Duration::from_millis(1500));
    assert_eq!(failures(&proxy), 0, "a stalled client counted as a failure");
    assert_eq!(proxy.phase("payments"), "closed");
    let healthy = get(proxy.addr, "/payments/ok");
    assert_eq!((healthy.status, healthy.body.as_str()), (200, "ok"));
    drop(stalled);
}

#[test]
fn a_stalled_client_body_gets_408_after_the_client_body_timeout_and_counts_for_nothing() {
    let upstream = Upstream::start();
    let dir = temp_dir("stalled-body-408");
    let proxy = ProxyProcess::start(
        &dir,
        &config(
            &upstream,
            "consecutive_failures = 1",
            "request_timeout = \"200ms\"\nclient_body_timeout = \"800ms\"",
        ),
    );
    let mut bytes = post_head(proxy.addr, "/payments/charge", 100).into_bytes();
    bytes.extend_from_slice(&[b'x'; 10]);
    let started = Instant::now();
    let stream = send_raw(proxy.addr, &bytes);
    let reply = read_reply(stream).unwrap();
    let took = started.elapsed();
    assert_eq!(reply.status, 408, "{reply:?}");
    assert_eq!(reply.json()["error"], "client_body_timeout");
    assert!(
        took >= Duration::from_millis(700) && took < Duration::from_secs(10),
        "answered after {took:?}"
    );
    let status = proxy.status();
    let b = &status["breakers"]["payments"];
    assert_eq!(b["phase"], "closed");
    assert_eq!(b["calls"]["failure"], 0);
    assert_eq!(b["calls"]["success"], 0);
    assert_eq!(get(proxy.addr, "/payments/ok").status, 200);
}

#[test]
fn a_client_that_disconnects_mid_body_gets_nothing_and_counts_for_nothing() {
    let upstream = Upstream::start();
    let dir = temp_dir("client-gone-mid-body");
    let proxy = ProxyProcess::start(
        &dir,
        &config(
            &upstream,
            "consecutive_failures = 1",
            "request_timeout = \"5s\"",
        ),
    );
    for _ in 0..3 {
        let mut bytes = post_head(proxy.addr, "/payments/charge", 1000).into_bytes();
        bytes.extend_from_slice(&[b'x'; 10]);
        let mut stream = send_raw(proxy.addr, &bytes);
        thread::sleep(Duration::from_millis(100));
        stream.shutdown(Shutdown::Write).unwrap();
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        let answer = String::from_utf8_lossy(&answer);
        assert!(
            !answer.starts_with("HTTP/1.1 5"),
            "a client that went away got a 5xx: {answer}"
        );
    }
    assert!(eventually(Duration::from_secs(5), || {
        proxy.status()["breakers"]["payments"]["probes_in_flight"] == 0
    }));
    assert_eq!(failures(&proxy), 0);
    assert_eq!(proxy.phase("payments"), "closed");
    assert_eq!(get(proxy.addr, "/payments/ok").status, 200);
}

#[test]
fn a_stalled_client_holding_the_probe_slot_releases_it_and_a_healthy_probe_closes_the_breaker() {
    let upstream = Upstream::start();
    upstream.answer(500, "down");
    let dir = temp_dir("stalled-probe-released");
    let proxy = ProxyProcess::start(
        &dir,
        &config(
            &upstream,
            "consecutive_failures = 1\nrecovery_timeout = \"300ms\"\nmax_probes = 1\nrequired_successes = 1",
            "request_timeout = \"200ms\"\nclient_body_timeout = \"600ms\"",
        ),
    );
    assert_eq!(get(proxy.addr, "/payments/x").status, 500);
    assert_eq!(proxy.phase("payments"), "open");
    upstream.answer(200, "back");
    thread::sleep(Duration::from_millis(400));
    // The attacker's request takes the only probe slot, then stalls.
    let mut bytes = post_head(proxy.addr, "/payments/charge", 100).into_bytes();
    bytes.extend_from_slice(&[b'x'; 10]);
    let stream = send_raw(proxy.addr, &bytes);
    assert!(eventually(Duration::from_secs(5), || proxy
        .phase("payments")
        == "half_open"));
    assert_eq!(read_reply(stream).unwrap().status, 408);
    let probe = get(proxy.addr, "/payments/x");
    assert_eq!((probe.status, probe.body.as_str()), (200, "back"));
    assert_eq!(proxy.phase("payments"), "closed");
}

fn metric(proxy: &ProxyProcess, line_start: &str) -> Option<u64> {
    get(proxy.admin, "/metrics")
        .body
        .lines()
        .find_map(|l| l.strip_prefix(line_start)?.trim().parse().ok())
}

#[test]
fn a_response_body_cut_short_after_a_200_head_is_a_failure_and_the_client_sees_the_cut() {
    let upstream = Upstream::start();
    upstream.answer(200, &"0123456789".repeat(10));
    upstream.fault(Fault::Truncate(25));
    let dir = temp_dir("truncated-body");
    let proxy = ProxyProcess::start(
        &dir,
        &config(
            &upstream,
            "consecutive_failures = 2",
            "request_timeout = \"5s\"",
        ),
    );
    for _ in 0..2 {
        let cut = try_request(proxy.addr, "GET", "/payments/x", &[], b"");
        assert!(cut.is_err(), "a cut body reached the client whole: {cut:?}");
    }
    assert!(eventually(Duration::from_secs(5), || proxy
        .phase("payments")
        == "open"));
    assert_eq!(failures(&proxy), 2);
    assert_eq!(
        metric(
            &proxy,
            "breakerbox_upstream_errors_total{breaker=\"payments\",kind=\"body_truncated\"}"
        ),
        Some(2)
    );
}

#[test]
fn a_cut_body_read_for_judging_is_a_failure_answered_502() {
    let upstream = Upstream::start();
    upstream.answer(200, &"{\"code\":\"fine\"}".repeat(4));
    upstream.fault(Fault::Truncate(10));
    let config = format!(
        "{}[[upstream]]\nname = \"payments\"\nroute = \"/payments/\"\nurl = \"{}\"\n\
         [upstream.breaker]\nconsecutive_failures = 1\n\
         [upstream.judge.business]\npointers = [\"/code\"]\nfailure_codes = [\"E1\"]\n",
        listeners(),
        upstream.url()
    );
    let dir = temp_dir("truncated-judged-body");
    let proxy = ProxyProcess::start(&dir, &config);
    let reply = get(proxy.addr, "/payments/x");
    assert_eq!(reply.status, 502, "{reply:?}");
    assert_eq!(reply.json()["detail"], "body truncated");
    assert_eq!(failures(&proxy), 1);
    assert_eq!(proxy.phase("payments"), "open");
}

#[test]
fn a_trickling_response_body_is_cut_at_the_request_timeout_and_counts_as_a_failure() {
    let upstream = Upstream::start();
    upstream.answer(200, &"x".repeat(100));
    upstream.fault(Fault::Trickle(Duration::from_millis(100)));
    let dir = temp_dir("trickled-body");
    let proxy = ProxyProcess::start(
        &dir,
        &config(
            &upstream,
            "consecutive_failures = 1",
            "request_timeout = \"800ms\"",
        ),
    );
    let started = Instant::now();
    let cut = try_request(proxy.addr, "GET", "/payments/x", &[], b"");
    let took = started.elapsed();
    assert!(cut.is_err(), "a trickled body reached the client: {cut:?}");
    assert!(
        took < Duration::from_secs(6),
        "the client was held {took:?}"
    );
    assert!(eventually(Duration::from_secs(5), || failures(&proxy) == 1));
    assert_eq!(proxy.phase("payments"), "open");
    assert_eq!(
        metric(
            &proxy,
            "breakerbox_upstream_errors_total{breaker=\"payments\",kind=\"body_timeout\"}"
        ),
        Some(1)
    );
}

#[test]
fn a_client_that_reads_a_large_body_slowly_is_not_charged_to_the_upstream() {
    let upstream = Upstream::start();
    let big = "y".repeat(24 * 1024 * 1024);
    upstream.answer(200, &big);
    let dir = temp_dir("slow-reader");
    let proxy = ProxyProcess::start(
        &dir,
        &config(
            &upstream,
            "consecutive_failures = 1",
            "request_timeout = \"500ms\"",
        ),
    );
    let stream = send_raw(
        proxy.addr,
        format!(
            "GET /payments/big HTTP/1.1\r\nhost: {}\r\nconnection: close\r\n\r\n",
            proxy.addr
        )
        .as_bytes(),
    );
    // The client reads nothing for three request timeouts, then everything.
    thread::sleep(Duration::from_millis(1500));
    let reply = read_reply(stream).unwrap();
    assert_eq!((reply.status, reply.body.len()), (200, big.len()));
    assert!(eventually(Duration::from_secs(5), || {
        proxy.status()["breakers"]["payments"]["calls"]["success"] == 1
    }));
    assert_eq!(failures(&proxy), 0);
}

#[test]
fn a_stalled_upload_gives_its_probe_slot_back_long_before_the_client_body_timeout() {
    let upstream = Upstream::start();
    upstream.answer(500, "down");
    let dir = temp_dir("stalled-probe-early-release");
    let proxy = ProxyProcess::start(
        &dir,
        &config(
            &upstream,
            "consecutive_failures = 1\nrecovery_timeout = \"300ms\"\nmax_probes = 1\nrequired_successes = 1\nhalf_open_timeout = \"60s\"",
            "request_timeout = \"5s\"\nclient_body_timeout = \"30s\"",
        ),
    );
    assert_eq!(get(proxy.addr, "/payments/x").status, 500);
    upstream.answer(200, "back");
    thread::sleep(Duration::from_millis(400));
    let mut bytes = post_head(proxy.addr, "/payments/charge", 100).into_bytes();
    bytes.extend_from_slice(&[b'x'; 10]);
    let stalled = send_raw(proxy.addr, &bytes);
    assert!(eventually(Duration::from_secs(5), || proxy
        .phase("payments")
        == "half_open"));
    // Well before the 30 s client body timeout, a healthy request gets the slot.
    let started = Instant::now();
    let closed = eventually(Duration::from_secs(10), || {
        get(proxy.addr, "/payments/x").status == 200
    });
    assert!(closed, "the stalled upload kept the probe slot");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(proxy.phase("payments"), "closed");
    drop(stalled);
}

#[test]
fn a_client_that_leaves_mid_response_is_not_judged_and_frees_its_probe_slot() {
    let upstream = Upstream::start();
    upstream.answer(500, "down");
    let dir = temp_dir("client-leaves-mid-response");
    let proxy = ProxyProcess::start(
        &dir,
        &config(
            &upstream,
            "consecutive_failures = 1\nrecovery_timeout = \"300ms\"\nmax_probes = 1\nrequired_successes = 1\nhalf_open_timeout = \"60s\"",
            "request_timeout = \"30s\"",
        ),
    );
    assert_eq!(get(proxy.addr, "/payments/x").status, 500);
    upstream.answer(200, &"z".repeat(24 * 1024 * 1024));
    thread::sleep(Duration::from_millis(400));
    // The probe's client reads a little of a large body, then goes away.
    let mut stream = send_raw(
        proxy.addr,
        format!("GET /payments/big HTTP/1.1\r\nhost: {}\r\n\r\n", proxy.addr).as_bytes(),
    );
    let mut head = [0u8; 1024];
    let n = stream.read(&mut head).unwrap();
    assert!(String::from_utf8_lossy(&head[..n]).starts_with("HTTP/1.1 200"));
    assert_eq!(proxy.phase("payments"), "half_open");
    drop(stream);
    upstream.answer(200, "ok");
    assert!(
        eventually(Duration::from_secs(10), || get(proxy.addr, "/payments/x")
            .status
            == 200),
        "the departed client's probe slot was not given back"
    );
    let status = proxy.status();
    let b = &status["breakers"]["payments"];
    assert_eq!(b["phase"], "closed");
    assert_eq!(b["calls"]["success"], 1, "{b}");
    assert_eq!(b["calls"]["failure"], 1, "{b}");
}

#[test]
fn an_upstream_that_gives_up_on_a_stalled_client_body_is_not_judged_for_it() {
    let upstream = Upstream::start();
    upstream.fault(Fault::BodyTimeout(Duration::from_millis(300)));
    let dir = temp_dir("upstream-gives-up-on-stalled-body");
    let proxy = ProxyProcess::start(
        &dir,
        &config(
            &upstream,
            "consecutive_failures = 1",
            "request_timeout = \"10s\"\nclient_body_timeout = \"10s\"",
        ),
    );
    for _ in 0..3 {
        let mut bytes = post_head(proxy.addr, "/payments/charge", 100).into_bytes();
        bytes.extend_from_slice(&[b'x'; 10]);
        let reply = read_reply(send_raw(proxy.addr, &bytes)).unwrap();
        assert_eq!(reply.status, 408, "{reply:?}");
    }
    assert_eq!(
        failures(&proxy),
        0,
        "the stalled clients were judged against the upstream"
    );
    assert_eq!(proxy.phase("payments"), "closed");
}

#[test]
fn a_probe_whose_client_stops_reading_the_response_gives_its_slot_back() {
    let upstream = Upstream::start();
    upstream.answer(500, "down");
    let dir = temp_dir("probe-reader-stalls");
    let proxy = ProxyProcess::start(
        &dir,
        &config(
            &upstream,
            "consecutive_failures = 1\nrecovery_timeout = \"300ms\"\nmax_probes = 1\nrequired_successes = 1\nhalf_open_timeout = \"60s\"",
            "request_timeout = \"30s\"",
        ),
    );
    assert_eq!(get(proxy.addr, "/payments/x").status, 500);
    upstream.answer(200, &"z".repeat(24 * 1024 * 1024));
    thread::sleep(Duration::from_millis(400));
    // The probe's client reads the head, then stops reading (and stays connected).
    let mut stalled = send_raw(
        proxy.addr,
        format!("GET /payments/big HTTP/1.1\r\nhost: {}\r\n\r\n", proxy.addr).as_bytes(),
    );
    let mut head = [0u8; 1024];
    let n = stalled.read(&mut head).unwrap();
    assert!(String::from_utf8_lossy(&head[..n]).starts_with("HTTP/1.1 200"));
    upstream.answer(200, "ok");
    assert!(
        eventually(Duration::from_secs(10), || get(proxy.addr, "/payments/x")
            .status
            == 200),
        "the stalled reader kept the probe slot"
    );
    assert_eq!(proxy.phase("payments"), "closed");
    drop(stalled);
}
