//! Active health checks (rule 24) of an upstream that speaks only HTTP/2 (`protocol =
//! "http2"`, h2c): the checker speaks the upstream's protocol, so its checks reach the
//! health path and can close the breaker.

#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

#[path = "support/proxy_harness.rs"]
mod harness;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use harness::{eventually, get, listeners, temp_dir, ProxyProcess};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};

/// What the h2c upstream answers and saw.
#[derive(Default)]
struct State {
    real_status: AtomicU16,
    health_checks: AtomicUsize,
    real_requests: AtomicUsize,
}

/// An h2c-only upstream on loopback: `/healthz` answers 200, every other path
/// `real_status`; an HTTP/1.1 request gets no answer (the server speaks only HTTP/2).
fn h2c_upstream() -> (SocketAddr, Arc<State>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let state = Arc::new(State {
        real_status: AtomicU16::new(200),
        ..State::default()
    });
    let shared = state.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let state = shared.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let state = state.clone();
                        async move { Ok::<_, Infallible>(answer(&state, &request)) }
                    });
                    let http = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
                    let _ = http.serve_connection(TokioIo::new(tcp), service).await;
                });
            }
        });
    });
    (addr, state)
}

fn answer(state: &State, request: &http::Request<Incoming>) -> http::Response<Full<Bytes>> {
    let status = if request.uri().path() == "/healthz" {
        state.health_checks.fetch_add(1, Ordering::SeqCst);
        200
    } else {
        state.real_requests.fetch_add(1, Ordering::SeqCst);
        state.real_status.load(Ordering::SeqCst)
    };
    http::Response::builder()
        .status(status)
        .body(Full::new(Bytes::from_static(b"{}")))
        .unwrap()
}

#[test]
fn health_checks_of_an_http2_upstream_speak_http2_and_close_the_breaker() {
    let (addr, upstream) = h2c_upstream();
    let dir = temp_dir("health-h2");
    let config = format!(
        "{}[[upstream]]\nname = \"dep\"\nroute = \"/\"\nurl = \"http://{addr}\"\nprotocol = \"http2\"\n\
         health = {{ path = \"/healthz\", interval = \"200ms\", timeout = \"150ms\" }}\n\
         [upstream.breaker]\nconsecutive_failures = 2\nrecovery_timeout = \"300ms\"\n\
         required_successes = 2\njitter = 0.0\n",
        listeners()
    );
    let proxy = ProxyProcess::start(&dir, &config);
    upstream.real_status.store(500, Ordering::SeqCst);
    for _ in 0..2 {
        assert_eq!(get(proxy.addr, "/api").status, 500);
    }
    assert_eq!(proxy.phase("dep"), "open");
    let real_at_trip = upstream.real_requests.load(Ordering::SeqCst);
    upstream.real_status.store(200, Ordering::SeqCst);
    // Only the checker's HTTP/2 checks can close it: real requests are rejected meanwhile.
    let closed = eventually(Duration::from_secs(10), || {
        let _ = get(proxy.addr, "/api");
        proxy.phase("dep") == "closed"
    });
    assert!(
        closed,
        "the breaker closes on healthy checks over HTTP/2 (checks seen: {}, status: {})",
        upstream.health_checks.load(Ordering::SeqCst),
        proxy.status()["breakers"]["dep"]["health"]
    );
    assert!(upstream.health_checks.load(Ordering::SeqCst) >= 2);
    assert!(
        upstream.real_requests.load(Ordering::SeqCst) <= real_at_trip + 1,
        "no real request probed the half-open breaker"
    );
    assert_eq!(get(proxy.addr, "/api").status, 200, "traffic resumes");
}
