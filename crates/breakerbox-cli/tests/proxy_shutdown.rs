//! `breakerbox proxy` shutdown: it does not wait for clients that never sent a whole
//! request, and its exit code says when it had to cut requests in flight.

#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

#[path = "support/proxy_harness.rs"]
mod harness;

use std::thread;
use std::time::{Duration, Instant};

use harness::{eventually, listeners, send_raw, temp_dir, ProxyProcess, Upstream};

fn config(upstream: &Upstream, grace: &str) -> String {
    format!(
        "{}[limits]\nshutdown_grace = \"{grace}\"\n[[upstream]]\nname = \"payments\"\nroute = \"/\"\nurl = \"{}\"\n",
        listeners(),
        upstream.url()
    )
}

#[test]
fn a_half_sent_head_does_not_hold_shutdown_for_the_grace_period() {
    let upstream = Upstream::start();
    let dir = temp_dir("shutdown-half-head");
    let mut proxy = ProxyProcess::start(&dir, &config(&upstream, "20s"));
    let _stalled = send_raw(proxy.addr, b"GET /x HTTP/1.1\r\nhost: a\r\nx-slow");
    // An idle keep-alive connection that already finished a request does not either.
    let mut idle = harness::KeepAlive::connect(proxy.addr);
    assert_eq!(idle.get("/x").unwrap().status, 200);
    thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    proxy.terminate();
    let code = proxy.wait_exit(Duration::from_secs(8));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "shutdown waited {:?} for a client that never sent a request",
        started.elapsed()
    );
    assert_eq!(code, Some(0), "{}", proxy.stderr());
}

#[test]
fn a_shutdown_that_cuts_requests_in_flight_exits_non_zero() {
    let upstream = Upstream::start();
    upstream.delay(Duration::from_secs(5));
    let dir = temp_dir("shutdown-cut");
    let mut proxy = ProxyProcess::start(&dir, &config(&upstream, "500ms"));
    let addr = proxy.addr;
    let in_flight = thread::spawn(move || harness::try_request(addr, "GET", "/slow", &[], b""));
    assert!(eventually(Duration::from_secs(5), || upstream.count() == 1));
    proxy.terminate();
    let code = proxy.wait_exit(Duration::from_secs(10));
    assert_eq!(code, Some(3), "{}", proxy.stderr());
    assert!(
        proxy.stderr().contains("1 connection(s) cut"),
        "{}",
        proxy.stderr()
    );
    assert!(in_flight.join().unwrap().is_err());
}
