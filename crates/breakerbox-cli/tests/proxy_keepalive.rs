//! `breakerbox proxy` and pooled upstream connections the upstream closed: a request
//! that lost that race is retried once on a fresh connection, and only a failure on a
//! fresh connection counts against the upstream.

#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

#[path = "support/proxy_harness.rs"]
mod harness;

use harness::{get, listeners, request, temp_dir, Fault, KeepAlive, ProxyProcess, Upstream};

fn config(upstream: &Upstream, breaker: &str) -> String {
    format!(
        "workers = 1\n{}[[upstream]]\nname = \"payments\"\nroute = \"/payments/\"\nurl = \"{}\"\n[upstream.breaker]\n{breaker}\n",
        listeners(),
        upstream.url()
    )
}

fn calls(proxy: &ProxyProcess, verdict: &str) -> u64 {
    proxy.status()["breakers"]["payments"]["calls"][verdict]
        .as_u64()
        .unwrap()
}

#[test]
fn an_upstream_that_closes_each_connection_after_answering_causes_no_502() {
    let upstream = Upstream::start();
    upstream.fault(Fault::CloseAfterEach);
    let dir = temp_dir("keepalive-close-after-each");
    let proxy = ProxyProcess::start(&dir, &config(&upstream, "consecutive_failures = 1"));
    // Back-to-back requests on one client connection: each one may find the pooled
    // upstream connection before the proxy has seen the upstream's close.
    let addr = proxy.addr;
    let clients: Vec<_> = (0..4)
        .map(|c| {
            std::thread::spawn(move || {
                let mut client = KeepAlive::connect(addr);
                let mut bad = Vec::new();
                for i in 0..150 {
                    let reply = client.get(&format!("/payments/{c}/{i}")).unwrap();
                    if reply.status != 200 {
                        bad.push((i, reply.status, reply.body));
                    }
                }
                bad
            })
        })
        .collect();
    let bad: Vec<_> = clients
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    assert!(
        bad.is_empty(),
        "{} of 600 failed: {:?}",
        bad.len(),
        &bad[..bad.len().min(3)]
    );
    assert_eq!(calls(&proxy, "failure"), 0);
    assert_eq!(calls(&proxy, "success"), 600);
}

#[test]
fn an_idempotent_request_dropped_on_a_reused_connection_is_retried_once_on_a_fresh_one() {
    let upstream = Upstream::start();
    upstream.fault(Fault::DropReused);
    let dir = temp_dir("keepalive-drop-reused");
    let proxy = ProxyProcess::start(&dir, &config(&upstream, "consecutive_failures = 1"));
    for i in 0..20 {
        let reply = get(proxy.addr, &format!("/payments/{i}"));
        assert_eq!((i, reply.status), (i, 200), "{}", reply.body);
    }
    assert_eq!(upstream.count(), 20);
    assert_eq!(calls(&proxy, "failure"), 0);
    assert_eq!(proxy.phase("payments"), "closed");
}

#[test]
fn a_post_dropped_after_it_was_written_on_a_reused_connection_is_not_retried_nor_judged() {
    // With a body (hyper's client, warmed by a POST with a body) and without one (the
    // inline client, warmed by a GET): each reuses the connection its warm-up left.
    let cases: [(&str, &str, &[u8], &[u8]); 2] = [
        ("body", "POST", b"{}", b"{\"amount\":1}"),
        ("no-body", "GET", b"", b""),
    ];
    for (case, warm_method, warm_body, body) in cases {
        let upstream = Upstream::start();
        upstream.fault(Fault::DropReused);
        let dir = temp_dir(&format!("keepalive-post-not-retried-{case}"));
        let proxy = ProxyProcess::start(&dir, &config(&upstream, "consecutive_failures = 1"));
        let warm = request(proxy.addr, warm_method, "/payments/warm", &[], warm_body);
        assert_eq!(warm.status, 200, "{case}");
        let reply = request(proxy.addr, "POST", "/payments/charge", &[], body);
        assert_eq!(reply.status, 502, "{case}: {}", reply.body);
        assert_eq!(upstream.count(), 1, "{case}: the POST was sent twice");
        assert_eq!(calls(&proxy, "failure"), 0, "{case}");
        assert_eq!(proxy.phase("payments"), "closed", "{case}");
    }
}

#[test]
fn a_request_dropped_on_a_fresh_connection_counts_as_one_failure() {
    let upstream = Upstream::start();
    upstream.fault(Fault::DropAll);
    let dir = temp_dir("keepalive-fresh-failure");
    let proxy = ProxyProcess::start(&dir, &config(&upstream, "consecutive_failures = 2"));
    assert_eq!(get(proxy.addr, "/payments/1").status, 502);
    assert_eq!(calls(&proxy, "failure"), 1);
    assert_eq!(get(proxy.addr, "/payments/2").status, 502);
    assert_eq!(calls(&proxy, "failure"), 2);
    assert_eq!(proxy.phase("payments"), "open");
}
