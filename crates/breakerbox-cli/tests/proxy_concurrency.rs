//! `breakerbox proxy`'s concurrency limits per upstream (`max_in_flight`, `max_pending`,
//! `pending_timeout`): a slow upstream gets at most its places, the rest are answered
//! 503 `overloaded` at once and never judged, and other upstreams keep being served.

#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

#[path = "support/proxy_harness.rs"]
mod harness;

use std::thread;
use std::time::{Duration, Instant};

use harness::{check, eventually, get, listeners, temp_dir, ProxyProcess, Reply, Upstream};

fn config(slow: &Upstream, fast: &Upstream, limits: &str) -> String {
    format!(
        "{}[[upstream]]\nname = \"slow\"\nroute = \"/slow/\"\nurl = \"{}\"\n{limits}\n\
         [upstream.breaker]\nconsecutive_failures = 1\n\
         [[upstream]]\nname = \"fast\"\nroute = \"/fast/\"\nurl = \"{}\"\n",
        listeners(),
        slow.url(),
        fast.url()
    )
}

/// Sends `n` requests to `target` at once, each on its own connection: (reply, time it
/// took), in no particular order.
fn burst(addr: std::net::SocketAddr, target: &str, n: usize) -> Vec<(Reply, Duration)> {
    let threads: Vec<_> = (0..n)
        .map(|_| {
            let target = target.to_string();
            thread::spawn(move || {
                let started = Instant::now();
                let reply = get(addr, &target);
                (reply, started.elapsed())
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

#[test]
fn a_slow_upstream_gets_its_places_and_the_rest_are_refused_at_once_without_tripping() {
    let slow = Upstream::start();
    slow.delay(Duration::from_millis(1500));
    let fast = Upstream::start();
    let dir = temp_dir("concurrency-burst");
    let proxy = ProxyProcess::start(
        &dir,
        &config(
            &slow,
            &fast,
            "max_in_flight = 2\nmax_pending = 1\npending_timeout = \"5s\"",
        ),
    );
    let addr = proxy.addr;
    let clients = thread::spawn(move || burst(addr, "/slow/pay", 6));

    // While the slow upstream holds its two places, it sees no third request, and the
    // other upstream answers at once.
    assert!(
        eventually(Duration::from_secs(5), || slow.heads() == 2),
        "the slow upstream never got its two requests"
    );
    let started = Instant::now();
    let other = get(proxy.addr, "/fast/x");
    assert_eq!(other.status, 200, "{other:?}");
    assert!(started.elapsed() < Duration::from_millis(800));
    assert_eq!(
        slow.heads(),
        2,
        "more than max_in_flight requests reached the upstream"
    );

    let replies = clients.join().unwrap();
    let (served, refused): (Vec<_>, Vec<_>) = replies.iter().partition(|(r, _)| r.status == 200);
    // Two in flight, and the one that waited gets the first place freed.
    assert_eq!(served.len(), 3, "{replies:?}");
    assert_eq!(refused.len(), 3, "{replies:?}");
    for (reply, took) in &refused {
        assert_eq!(reply.status, 503, "{reply:?}");
        assert_eq!(reply.json()["error"], "overloaded", "{reply:?}");
        assert_eq!(reply.json()["upstream"], "slow");
        assert!(
            *took < Duration::from_millis(1000),
            "an overloaded request waited {took:?} instead of being refused at once"
        );
    }
    let waited = served.iter().map(|(_, took)| *took).max().unwrap();
    assert!(
        waited >= Duration::from_millis(2900),
        "the queued request did not wait for a place ({waited:?})"
    );
    assert_eq!(slow.count(), 3);

    // Overloads are counted apart and never judged: a breaker that trips on one failure
    // stays closed, and it saw three successes.
    assert_eq!(proxy.phase("slow"), "closed");
    let status = proxy.status();
    let entry = &status["breakers"]["slow"];
    assert_eq!(entry["overloaded"], 3, "{entry}");
    assert_eq!(entry["calls"]["success"], 3, "{entry}");
    assert_eq!(entry["calls"]["failure"], 0, "{entry}");
    assert_eq!(entry["concurrency"]["max_in_flight"], 2, "{entry}");
    assert_eq!(entry["concurrency"]["in_flight"], 0, "{entry}");
    let metrics = get(proxy.admin, "/metrics").body;
    assert!(
        metrics.contains("breakerbox_overloaded_total{breaker=\"slow\"} 3"),
        "{metrics}"
    );
}

#[test]
fn a_queued_request_waits_at_most_the_pending_timeout() {
    let slow = Upstream::start();
    slow.delay(Duration::from_millis(2000));
    let fast = Upstream::start();
    let dir = temp_dir("concurrency-pending");
    let proxy = ProxyProcess::start(
        &dir,
        &config(
            &slow,
            &fast,
            "max_in_flight = 1\nmax_pending = 4\npending_timeout = \"200ms\"",
        ),
    );
    let addr = proxy.addr;
    let first = thread::spawn(move || get(addr, "/slow/first"));
    assert!(eventually(Duration::from_secs(5), || slow.heads() == 1));
    let started = Instant::now();
    let queued = get(proxy.addr, "/slow/second");
    let took = started.elapsed();
    assert_eq!(queued.status, 503, "{queued:?}");
    assert_eq!(queued.json()["error"], "overloaded");
    assert!(
        queued.json()["detail"]
            .as_str()
            .is_some_and(|d| d.contains("pending_timeout")),
        "{queued:?}"
    );
    assert!(
        took >= Duration::from_millis(190) && took < Duration::from_millis(1500),
        "waited {took:?}"
    );
    assert_eq!(first.join().unwrap().status, 200);
    assert_eq!(slow.count(), 1, "the queued request reached the upstream");
    assert_eq!(proxy.phase("slow"), "closed");
}

#[test]
fn concurrency_keys_are_checked_and_name_their_key() {
    let dir = temp_dir("concurrency-config");
    let upstream = |keys: &str| {
        format!(
            "{}[[upstream]]\nname = \"a\"\nroute = \"/\"\nurl = \"http://127.0.0.1:9\"\n{keys}\n",
            listeners()
        )
    };
    let cases = [
        (
            "max_in_flight = 0",
            "upstream[0].max_in_flight: invalid value 0",
        ),
        (
            "max_in_flight = \"ten\"",
            "upstream[0].max_in_flight: expected an integer",
        ),
        (
            "max_in_flight = 2000000",
            "upstream[0].max_in_flight: invalid value 2000000",
        ),
        (
            "max_in_flight = 2\nmax_pending = -1",
            "upstream[0].max_pending: invalid value -1",
        ),
        (
            "max_pending = 3",
            "upstream[0].max_pending: needs max_in_flight",
        ),
        (
            "pending_timeout = \"1s\"",
            "upstream[0].pending_timeout: needs max_in_flight",
        ),
        (
            "max_in_flight = 2\npending_timeout = \"0s\"",
            "upstream[0].pending_timeout: invalid value",
        ),
    ];
    for (i, (keys, expected)) in cases.iter().enumerate() {
        let (ok, stderr) = check(&dir, &format!("bad{i}.toml"), &upstream(keys));
        assert!(!ok, "{keys:?} passed --check");
        assert!(stderr.contains(expected), "{keys:?}: {stderr}");
    }
    let (ok, stderr) = check(
        &dir,
        "good.toml",
        &upstream("max_in_flight = 64\nmax_pending = 0"),
    );
    assert!(ok, "{stderr}");
}
