//! A gRPC caller's own deadline through `breakerbox proxy`: a client that sends tiny
//! deadlines (`grpc-timeout: 1n`) and ignores them itself gets `DEADLINE_EXCEEDED` from a
//! server that honours them, as grpc-go and grpc-java servers do. Those answers are the
//! caller's budget running out, not the server failing: they never trip the breaker of a
//! healthy server. The server's own `DEADLINE_EXCEEDED` (a deadline of its downstream,
//! before the caller's) still counts.

#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

#[path = "support/proxy_harness.rs"]
mod harness;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use harness::{temp_dir, ProxyProcess};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::{TokioExecutor, TokioIo};

/// The server's own budget for its downstream: it gives up after this, or at the
/// caller's deadline when that comes first.
const OWN_BUDGET: Duration = Duration::from_millis(20);

/// A gRPC server over h2c that honours the caller's `grpc-timeout` and whose downstream
/// never answers: it waits for the caller's deadline or its own budget, whichever comes
/// first, then answers `DEADLINE_EXCEEDED` (`Unary`: trailers-only; `Stream`: one message
/// at once, the status in the trailers).
async fn deadline_server() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let service = hyper::service::service_fn(|request: http::Request<_>| async move {
                let caller = breakerbox_http::caller_deadline(request.headers());
                let wait = caller.map_or(OWN_BUDGET, |d| d.min(OWN_BUDGET));
                let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, Infallible>>(2);
                let response = http::Response::builder().header("content-type", "application/grpc");
                let response = if request.uri().path() == "/test.Flaky/Stream" {
                    // One message at once, the status in the trailers when it gives up.
                    tokio::spawn(async move {
                        let _ = tx
                            .send(Ok(Frame::data(Bytes::from_static(b"\0\0\0\0\x03one"))))
                            .await;
                        tokio::time::sleep(wait).await;
                        let mut trailers = http::HeaderMap::new();
                        trailers.insert("grpc-status", http::HeaderValue::from_static("4"));
                        let _ = tx.send(Ok(Frame::trailers(trailers))).await;
                    });
                    response
                } else {
                    tokio::time::sleep(wait).await;
                    drop(tx);
                    response
                        .header("grpc-status", "4")
                        .header("grpc-message", "deadline exceeded")
                };
                let body = StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(rx));
                Ok::<_, Infallible>(response.body(body).unwrap())
            });
            tokio::spawn(
                hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tcp), service),
            );
        }
    });
    addr
}

/// One unary call to the proxy with `grpc-timeout` (none when `None`), from a client that
/// does not enforce it: the answer's HTTP status and `grpc-status`.
async fn call(
    sender: &mut hyper::client::conn::http2::SendRequest<Full<Bytes>>,
    timeout: Option<&str>,
) -> (u16, String) {
    call_method(sender, "Unary", timeout).await
}

/// [`call`] of `method`.
async fn call_method(
    sender: &mut hyper::client::conn::http2::SendRequest<Full<Bytes>>,
    method: &str,
    timeout: Option<&str>,
) -> (u16, String) {
    let mut request = http::Request::builder()
        .method("POST")
        .uri(format!("http://grpc.test/test.Flaky/{method}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some(timeout) = timeout {
        request = request.header("grpc-timeout", timeout);
    }
    let request = request
        .body(Full::new(Bytes::from_static(b"\0\0\0\0\x04ping")))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status().as_u16();
    let grpc_status = response
        .headers()
        .get("grpc-status")
        .map(|v| v.to_str().unwrap().to_string());
    let collected = response.into_body().collect().await.unwrap();
    let grpc_status = grpc_status
        .or_else(|| {
            collected
                .trailers()
                .and_then(|t| t.get("grpc-status"))
                .map(|v| v.to_str().unwrap().to_string())
        })
        .unwrap_or_default();
    (status, grpc_status)
}

fn verdicts(proxy: &ProxyProcess) -> (u64, u64, u64) {
    let calls = &proxy.status()["breakers"]["grpc"]["calls"];
    let n = |k: &str| calls[k].as_u64().unwrap_or(0);
    (n("success"), n("failure"), n("ignore"))
}

#[test]
fn tiny_caller_deadlines_never_trip_a_healthy_servers_breaker() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let upstream = rt.block_on(deadline_server());
    let dir = temp_dir("grpc-deadline");
    let config = format!(
        "listen = \"127.0.0.1:0\"\nworkers = 1\n[admin]\nlisten = \"127.0.0.1:0\"\n\
         [[upstream]]\nname = \"grpc\"\nroute = \"/\"\nurl = \"http://{upstream}\"\n\
         protocol = \"http2\"\n\
         [upstream.breaker]\nconsecutive_failures = 3\nrecovery_timeout = \"30s\"\n\
         [upstream.judge]\ngrpc = true\n"
    );
    let proxy = ProxyProcess::start(&dir, &config);
    let mut sender = rt.block_on(async {
        let tcp = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
        let (sender, connection) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .handshake(TokioIo::new(tcp))
            .await
            .unwrap();
        tokio::spawn(connection);
        sender
    });

    // The hostile client: deadlines of a nanosecond, a microsecond, a millisecond; the
    // server gives up at each at once. Many more than the three failures that trip.
    for timeout in ["1n", "1u", "1m"].repeat(4) {
        let (status, grpc_status) = rt.block_on(call(&mut sender, Some(timeout)));
        assert_eq!(
            (status, grpc_status.as_str()),
            (200, "4"),
            "relayed as sent"
        );
    }
    assert_eq!(verdicts(&proxy), (0, 0, 12), "{}", proxy.status());
    assert_eq!(proxy.phase("grpc"), "closed");
    assert_eq!(
        proxy.last_reason("grpc"),
        "grpc DEADLINE_EXCEEDED after the caller's deadline of 1ms"
    );

    // Streamed: the head at once, DEADLINE_EXCEEDED in the trailers at the caller's 15 ms
    // deadline (before the server's own 20 ms), judged by when the trailers came, not by
    // the head.
    for _ in 0..4 {
        let (status, grpc_status) = rt.block_on(call_method(&mut sender, "Stream", Some("15m")));
        assert_eq!((status, grpc_status.as_str()), (200, "4"));
    }
    assert_eq!(verdicts(&proxy), (0, 0, 16), "{}", proxy.status());
    assert_eq!(
        proxy.last_reason("grpc"),
        "grpc DEADLINE_EXCEEDED after the caller's deadline of 15ms"
    );

    // The server's own deadline, long before the caller's (10 s) or with no caller
    // deadline at all: its failures, and three in a row trip it.
    for timeout in [Some("10S"), None, Some("10S")] {
        let (status, grpc_status) = rt.block_on(call(&mut sender, timeout));
        assert_eq!((status, grpc_status.as_str()), (200, "4"));
    }
    assert_eq!(verdicts(&proxy), (0, 3, 16), "{}", proxy.status());
    assert_eq!(proxy.phase("grpc"), "open", "{}", proxy.status());
    assert_eq!(
        proxy.last_reason("grpc"),
        "grpc DEADLINE_EXCEEDED: deadline exceeded"
    );
}
