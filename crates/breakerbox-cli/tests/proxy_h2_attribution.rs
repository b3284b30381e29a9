//! `breakerbox proxy` judges the upstream, never the client, over HTTP/2 as over
//! HTTP/1.1 (`proxy_attribution.rs`): clients that stall a stream's body, reset a stream
//! mid-body or mid-response, or flood a connection with streams they reset at once.
//! The client is the `h2` crate's, so the test controls every frame it sends.

#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

#[path = "support/proxy_harness.rs"]
mod harness;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use harness::{eventually, get, h2_connect, listeners, runtime, temp_dir, ProxyProcess, Upstream};

fn config(upstream: &Upstream, breaker: &str, limits: &str) -> String {
    format!(
        "workers = 1\n{}[limits]\n{limits}\n[[upstream]]\nname = \"payments\"\nroute = \"/payments/\"\nurl = \"{}\"\n[upstream.breaker]\n{breaker}\n",
        listeners(),
        upstream.url()
    )
}

fn calls(proxy: &ProxyProcess, kind: &str) -> u64 {
    proxy.status()["breakers"]["payments"]["calls"][kind]
        .as_u64()
        .unwrap()
}

/// An HTTP/2 client on a new connection to `addr`.
async fn connect(addr: SocketAddr) -> h2::client::SendRequest<Bytes> {
    h2_connect(addr).await.0
}

/// A POST to `path` announcing `length` bytes of body, of which it sends `sent`.
fn post(
    client: &mut h2::client::SendRequest<Bytes>,
    addr: SocketAddr,
    path: &str,
    length: usize,
    sent: usize,
) -> (h2::client::ResponseFuture, h2::SendStream<Bytes>) {
    let request = http::Request::post(format!("http://{addr}{path}"))
        .header("content-length", length.to_string())
        .body(())
        .unwrap();
    let (response, mut body) = client.send_request(request, false).unwrap();
    body.send_data(Bytes::from(vec![b'x'; sent]), false)
        .unwrap();
    (response, body)
}

/// A proxy whose one breaker has just gone half-open (one probe at a time, one success
/// to close, a minute to confirm), in front of an upstream that answered the failure
/// that tripped it and now answers `answer` with 200.
fn half_open(name: &str, answer: &str) -> (Upstream, ProxyProcess) {
    let upstream = Upstream::start();
    upstream.answer(500, "down");
    let dir = temp_dir(name);
    let proxy = ProxyProcess::start(
        &dir,
        &config(
            &upstream,
            "consecutive_failures = 1\nrecovery_timeout = \"300ms\"\nmax_probes = 1\nrequired_successes = 1\nhalf_open_timeout = \"60s\"",
            "request_timeout = \"30s\"",
        ),
    );
    assert_eq!(get(proxy.addr, "/payments/x").status, 500);
    upstream.answer(200, answer);
    std::thread::sleep(Duration::from_millis(400));
    (upstream, proxy)
}

/// The probe: a GET on `client`, its 200 head taken, its body not yet read.
async fn probe_answer(
    client: &mut h2::client::SendRequest<Bytes>,
    addr: SocketAddr,
) -> h2::RecvStream {
    let request = http::Request::get(format!("http://{addr}/payments/big"))
        .body(())
        .unwrap();
    let (response, _) = client.send_request(request, true).unwrap();
    let response = response.await.unwrap();
    assert_eq!(response.status(), 200);
    response.into_body()
}

#[test]
fn a_stream_whose_body_stalls_gets_408_after_the_client_body_timeout_and_counts_for_nothing() {
    let upstream = Upstream::start();
    let dir = temp_dir("h2-stalled-body-408");
    let proxy = ProxyProcess::start(
        &dir,
        &config(
            &upstream,
            "consecutive_failures = 1",
            "request_timeout = \"200ms\"\nclient_body_timeout = \"800ms\"",
        ),
    );
    let addr = proxy.addr;
    let (status, took) = runtime().block_on(async move {
        let mut client = connect(addr).await;
        let started = Instant::now();
        let (response, _body) = post(&mut client, addr, "/payments/charge", 100, 10);
        let response = tokio::time::timeout(Duration::from_secs(10), response)
            .await
            .expect("an answer within 10 s")
            .unwrap();
        (response.status().as_u16(), started.elapsed())
    });
    assert_eq!(status, 408);
    assert!(
        took >= Duration::from_millis(700) && took < Duration::from_secs(10),
        "answered after {took:?}"
    );
    assert_eq!(calls(&proxy, "failure"), 0);
    assert_eq!(calls(&proxy, "success"), 0);
    assert_eq!(proxy.phase("payments"), "closed");
    assert_eq!(get(proxy.addr, "/payments/ok").status, 200);
}

#[test]
fn streams_that_stall_their_body_past_the_request_timeout_do_not_trip_the_breaker() {
    let upstream = Upstream::start();
    let dir = temp_dir("h2-stalled-bodies-do-not-trip");
    let proxy = ProxyProcess::start(
        &dir,
        &config(
            &upstream,
            "consecutive_failures = 2",
            "request_timeout = \"300ms\"",
        ),
    );
    let addr = proxy.addr;
    let rt = runtime();
    // Five streams on one connection announce 100 bytes, send 10 and stall (the default
    // client body timeout is far longer than the request timeout).
    let held = rt.block_on(async move {
        let mut client = connect(addr).await;
        (0..5)
            .map(|_| post(&mut client, addr, "/payments/charge", 100, 10))
            .collect::<Vec<_>>()
    });
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        calls(&proxy, "failure"),
        0,
        "a stalled stream counted as a failure"
    );
    assert_eq!(proxy.phase("payments"), "closed");
    let healthy = get(proxy.addr, "/payments/ok");
    assert_eq!((healthy.status, healthy.body.as_str()), (200, "ok"));
    drop(held);
}

#[test]
fn a_stream_reset_mid_body_counts_for_nothing_and_gives_its_probe_slot_back() {
    let (_upstream, proxy) = half_open("h2-reset-mid-body", "ok");
    let addr = proxy.addr;
    let rt = runtime();
    // The probe: a stream that sends part of its body, waits until the proxy holds it
    // as the half-open phase's one probe, then is reset by its client.
    let client = rt.block_on(async move {
        let mut client = connect(addr).await;
        let (_response, body) = post(&mut client, addr, "/payments/charge", 1000, 10);
        (client, body)
    });
    assert!(
        eventually(Duration::from_secs(5), || {
            proxy.status()["breakers"]["payments"]["probes_in_flight"] == 1
        }),
        "the stream did not become the probe"
    );
    let (client, mut body) = client;
    body.send_reset(h2::Reason::CANCEL);
    assert!(
        eventually(Duration::from_secs(5), || {
            proxy.status()["breakers"]["payments"]["probes_in_flight"] == 0
        }),
        "the reset stream kept the probe slot"
    );
    assert_eq!(calls(&proxy, "failure"), 1, "only the first 500 counts");
    assert_eq!(proxy.phase("payments"), "half_open");
    // The slot is free: a healthy probe closes the breaker.
    assert_eq!(get(proxy.addr, "/payments/x").status, 200);
    assert_eq!(proxy.phase("payments"), "closed");
    drop(client);
}

#[test]
fn a_probe_stream_reset_mid_response_is_not_judged_and_frees_its_slot() {
    let (upstream, proxy) = half_open("h2-reset-mid-response", &"z".repeat(24 * 1024 * 1024));
    let addr = proxy.addr;
    let rt = runtime();
    // The probe's client reads the head and a little of a large body, then resets the
    // stream (its connection stays open).
    let client = rt.block_on(async move {
        let mut client = connect(addr).await;
        let mut body = probe_answer(&mut client, addr).await;
        let first = body.data().await.unwrap().unwrap();
        assert!(!first.is_empty());
        // Dropping the last handle of an open stream resets it (CANCEL).
        drop(body);
        client
    });
    upstream.answer(200, "ok");
    assert!(
        eventually(Duration::from_secs(10), || get(proxy.addr, "/payments/x")
            .status
            == 200),
        "the reset stream's probe slot was not given back"
    );
    let status = proxy.status();
    let b = &status["breakers"]["payments"];
    assert_eq!(b["phase"], "closed");
    assert_eq!(b["calls"]["success"], 1, "{b}");
    assert_eq!(b["calls"]["failure"], 1, "{b}");
    drop(client);
}

#[test]
fn a_connection_that_opens_and_resets_streams_in_a_flood_is_bounded_and_others_are_served() {
    let upstream = Upstream::start();
    upstream.delay(Duration::from_millis(50));
    let dir = temp_dir("h2-rapid-reset");
    let proxy = ProxyProcess::start(
        &dir,
        &config(
            &upstream,
            "consecutive_failures = 5",
            "request_timeout = \"5s\"",
        ),
    );
    let addr = proxy.addr;
    let rt = runtime();
    // 5,000 streams opened and reset at once, as fast as the client can write them
    // (the "rapid reset" attack): the proxy may end the connection, but it must not
    // fall over, count the resets against the upstream, or send the upstream a request
    // per reset stream.
    let (sent, ended) = rt.block_on(async move {
        let mut client = connect(addr).await;
        let mut sent = 0usize;
        let mut ended = false;
        for _ in 0..5_000 {
            let request = http::Request::get(format!("http://{addr}/payments/flood"))
                .body(())
                .unwrap();
            match client.send_request(request, true) {
                Ok((_response, mut stream)) => {
                    stream.send_reset(h2::Reason::CANCEL);
                    sent += 1;
                }
                Err(_) => {
                    ended = true;
                    break;
                }
            }
            if sent.is_multiple_of(64) {
                match tokio::time::timeout(Duration::from_secs(5), client.clone().ready()).await {
                    Ok(Ok(ready)) => client = ready,
                    _ => {
                        ended = true;
                        break;
                    }
                }
            }
        }
        (sent, ended)
    });
    eprintln!("flood: {sent} streams sent, connection ended: {ended}");
    assert!(sent > 0);
    // Others are served at once, and the flood charged nothing to the upstream.
    let started = Instant::now();
    let healthy = get(proxy.addr, "/payments/ok");
    assert_eq!((healthy.status, healthy.body.as_str()), (200, "ok"));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(eventually(Duration::from_secs(10), || {
        proxy.status()["breakers"]["payments"]["probes_in_flight"] == 0
    }));
    assert_eq!(calls(&proxy, "failure"), 0);
    assert_eq!(proxy.phase("payments"), "closed");
    let forwarded = upstream.count();
    eprintln!("flood: {forwarded} reached the upstream");
    assert!(
        forwarded < 1_000,
        "{forwarded} of {sent} reset streams reached the upstream (connection ended: {ended})"
    );
}

#[test]
fn a_probe_stream_whose_client_stops_reading_gives_its_slot_back() {
    let (upstream, proxy) = half_open("h2-probe-reader-stalls", &"z".repeat(24 * 1024 * 1024));
    let addr = proxy.addr;
    let rt = runtime();
    // The probe's client takes the head and never reads the body: it gives no flow
    // control credit back, so the proxy can send no more than the first window, and the
    // stream and its connection stay open.
    let stalled = rt.block_on(async move {
        let mut client = connect(addr).await;
        let body = probe_answer(&mut client, addr).await;
        (client, body)
    });
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
