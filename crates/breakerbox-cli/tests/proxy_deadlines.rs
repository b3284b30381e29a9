//! Rule 22 through `breakerbox proxy` (the real binary): an upstream on 127.0.0.1 that
//! accepts requests and never answers. The upstream's breaker config sets `call_timeout`
//! and `probe_timeout`; the proxy bounds each upstream exchange by the permit's deadline
//! (below its `request_timeout`), answers 504, and counts a timeout failure.

#![allow(clippy::disallowed_methods)]

#[path = "support/proxy_harness.rs"]
mod harness;

use std::thread;
use std::time::{Duration, Instant};

use std::io::Write as _;

use harness::{get, listeners, post_head, read_reply, send_raw, temp_dir, ProxyProcess, Upstream};

const NEVER: Duration = Duration::from_secs(60);

fn config(upstream: &Upstream) -> String {
    format!(
        "{}[limits]\nrequest_timeout = \"30s\"\n\
         [[upstream]]\nname = \"payments\"\nroute = \"/payments/\"\nurl = \"{}\"\n\
         [upstream.breaker]\nconsecutive_failures = 2\nrecovery_timeout = \"300ms\"\n\
         half_open_timeout = \"20s\"\nmax_probes = 1\nrequired_successes = 1\n\
         call_timeout = \"300ms\"\nprobe_timeout = \"150ms\"\n",
        listeners(),
        upstream.url()
    )
}

#[test]
fn an_upstream_that_never_answers_trips_the_breaker_on_timeouts() {
    let upstream = Upstream::start();
    upstream.delay(NEVER);
    let dir = temp_dir("deadline-trip");
    let proxy = ProxyProcess::start(&dir, &config(&upstream));
    for _ in 0..2 {
        let started = Instant::now();
        let reply = get(proxy.addr, "/payments/hang");
        assert_eq!(reply.status, 504);
        assert_eq!(reply.json()["error"], "upstream_timeout");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "the call deadline, not the 30 s request timeout: {:?}",
            started.elapsed()
        );
    }
    assert_eq!(proxy.phase("payments"), "open");
    assert_eq!(get(proxy.addr, "/payments/hang").status, 503);
    let metrics = get(proxy.admin, "/metrics").body;
    assert!(
        metrics
            .contains("breakerbox_upstream_errors_total{breaker=\"payments\",kind=\"timeout\"} 2"),
        "{metrics}"
    );
}

#[test]
fn a_hung_probe_frees_its_slot_at_the_probe_timeout() {
    let upstream = Upstream::start();
    upstream.delay(NEVER);
    let dir = temp_dir("deadline-probe");
    let proxy = ProxyProcess::start(&dir, &config(&upstream));
    for _ in 0..2 {
        assert_eq!(get(proxy.addr, "/payments/hang").status, 504);
    }
    thread::sleep(Duration::from_millis(350));
    let addr = proxy.addr;
    let probing = thread::spawn(move || {
        let started = Instant::now();
        (get(addr, "/payments/probe").status, started.elapsed())
    });
    // While the probe hangs, the only slot is taken.
    assert!(harness::eventually(Duration::from_secs(2), || {
        proxy.status()["breakers"]["payments"]["probes_in_flight"] == 1
    }));
    assert_eq!(get(proxy.addr, "/payments/second").status, 503);
    let (status, took) = probing.join().unwrap();
    assert_eq!(status, 504);
    assert!(
        took < Duration::from_secs(3),
        "freed at the probe timeout: {took:?}"
    );
    assert_eq!(
        proxy.phase("payments"),
        "open",
        "a hung probe is a failed probe"
    );

    // The upstream is back: the next probe is admitted and closes the breaker, long before
    // the half-open deadline (20 s) would have reclaimed the slot.
    upstream.delay(Duration::ZERO);
    thread::sleep(Duration::from_millis(350));
    assert_eq!(get(proxy.addr, "/payments/ok").status, 200);
    assert_eq!(proxy.phase("payments"), "closed");
}

/// Issue 9 stays true under a deadline: the time a client takes to send its body is not
/// the upstream's. Stalled clients trip nothing, and a client that pauses longer than the
/// call timeout before finishing its body gets a judged success.
#[test]
fn a_client_that_stalls_its_body_past_the_call_timeout_is_not_charged_to_the_upstream() {
    let upstream = Upstream::start();
    let dir = temp_dir("deadline-client-stall");
    let proxy = ProxyProcess::start(&dir, &config(&upstream));
    let stalled: Vec<_> = (0..3)
        .map(|_| {
            let mut bytes = post_head(proxy.addr, "/payments/charge", 100).into_bytes();
            bytes.extend_from_slice(&[b'x'; 10]);
            send_raw(proxy.addr, &bytes)
        })
        .collect();
    thread::sleep(Duration::from_millis(1_000));
    let calls = &proxy.status()["breakers"]["payments"]["calls"];
    assert_eq!(calls["failure"], 0, "a stalled client counted as a failure");
    assert_eq!(proxy.phase("payments"), "closed");
    drop(stalled);

    let mut bytes = post_head(proxy.addr, "/payments/charge", 4).into_bytes();
    bytes.extend_from_slice(b"ab");
    let mut slow = send_raw(proxy.addr, &bytes);
    thread::sleep(Duration::from_millis(600));
    slow.write_all(b"cd").unwrap();
    let reply = read_reply(slow).unwrap();
    assert_eq!(reply.status, 200, "{}", reply.body);
    let calls = &proxy.status()["breakers"]["payments"]["calls"];
    assert_eq!(
        (calls["success"].as_u64(), calls["failure"].as_u64()),
        (Some(1), Some(0))
    );
}
