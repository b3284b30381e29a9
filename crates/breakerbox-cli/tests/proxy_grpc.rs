//! gRPC through `breakerbox proxy`: a real tonic server behind it (`protocol = "http2"`,
//! judged by `grpc-status`), a tonic client in front of it (HTTP/2 with prior knowledge).
//! Trailers-only answers are judged at their head, streamed ones at their end from their
//! trailers, which reach the client; a stream cut before its trailers is a failure, and
//! one its client cancels is judged by nobody.

#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

#[path = "support/grpc_upstream.rs"]
mod grpc;
#[path = "support/proxy_harness.rs"]
mod harness;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use grpc::{Answer, GrpcServer};
use harness::{eventually, runtime, temp_dir, ProxyProcess};
use http_body_util::StreamBody;
use hyper::body::Frame;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tonic::Code;

/// One worker (so one upstream connection), one gRPC upstream.
fn config(upstream: SocketAddr, failures: u32) -> String {
    format!(
        "listen = \"127.0.0.1:0\"\nworkers = 1\n[admin]\nlisten = \"127.0.0.1:0\"\n\
         [[upstream]]\nname = \"grpc\"\nroute = \"/\"\nurl = \"http://{upstream}\"\n\
         protocol = \"http2\"\n\
         [upstream.breaker]\nconsecutive_failures = {failures}\nrecovery_timeout = \"30s\"\n\
         [upstream.judge]\ngrpc = true\n"
    )
}

fn calls(proxy: &ProxyProcess, verdict: &str) -> u64 {
    proxy.status()["breakers"]["grpc"]["calls"][verdict]
        .as_u64()
        .unwrap_or(0)
}

#[test]
fn unavailable_trips_the_breaker_through_the_proxy_and_not_found_does_not() {
    let rt = runtime();
    let server = rt.block_on(GrpcServer::start());
    let dir = temp_dir("grpc-unary");
    let proxy = ProxyProcess::start(&dir, &config(server.addr, 3));
    let mut client = rt.block_on(grpc::client(proxy.addr));

    // OK, its status in the trailers: successes, on one shared upstream connection.
    for _ in 0..3 {
        assert_eq!(rt.block_on(grpc::unary(&mut client)).unwrap(), b"ping");
    }
    assert_eq!(calls(&proxy, "success"), 3, "{}", proxy.status());
    assert_eq!(
        server.connections(),
        1,
        "one HTTP/2 connection carries them"
    );

    // NOT_FOUND (client-caused, trailers-only): ignored, however many.
    server.answer(Answer::Code(Code::NotFound));
    for _ in 0..5 {
        let status = rt.block_on(grpc::unary(&mut client)).unwrap_err();
        assert_eq!(status.code(), Code::NotFound, "{status:?}");
        assert_eq!(
            status.message(),
            "told to fail",
            "relayed as the server said"
        );
    }
    assert_eq!(calls(&proxy, "ignore"), 5, "{}", proxy.status());
    assert_eq!(proxy.phase("grpc"), "closed");

    // UNAVAILABLE: three in a row trip it.
    server.answer(Answer::Code(Code::Unavailable));
    for _ in 0..3 {
        let status = rt.block_on(grpc::unary(&mut client)).unwrap_err();
        assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    }
    assert_eq!(proxy.phase("grpc"), "open", "{}", proxy.status());
    assert_eq!(proxy.last_reason("grpc"), "grpc UNAVAILABLE: told to fail");
    // Open: answered at once as gRPC (UNAVAILABLE, the proxy's JSON as its message), and
    // the server is not called.
    let before = server.calls();
    let refused = rt.block_on(grpc::unary(&mut client)).unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert!(
        refused.message().contains(r#""error":"circuit_open""#),
        "{refused:?}"
    );
    assert_eq!(refused.metadata().get("retry-after").unwrap(), "30");
    assert_eq!(server.calls(), before, "the server was not called");
}

#[test]
fn a_streamed_grpc_answer_is_judged_at_its_end_from_its_trailers() {
    let rt = runtime();
    let server = rt.block_on(GrpcServer::start());
    let dir = temp_dir("grpc-stream");
    let proxy = ProxyProcess::start(&dir, &config(server.addr, 1));
    let mut client = rt.block_on(grpc::client(proxy.addr));

    // Two messages, then OK in the trailers, which reach the client.
    rt.block_on(async {
        let mut messages = grpc::stream(&mut client).await.unwrap();
        assert_eq!(messages.message().await.unwrap().unwrap(), b"one");
        assert_eq!(messages.message().await.unwrap().unwrap(), b"two");
        assert_eq!(messages.message().await.unwrap(), None, "ended by OK");
    });
    assert!(
        eventually(Duration::from_secs(5), || calls(&proxy, "success") == 1),
        "{}",
        proxy.status()
    );

    // A stream in progress is not judged; one its client cancels is judged by nobody.
    server.answer(Answer::Hang);
    rt.block_on(async {
        let mut messages = grpc::stream(&mut client).await.unwrap();
        assert_eq!(messages.message().await.unwrap().unwrap(), b"one");
        let b = &proxy.status()["breakers"]["grpc"];
        assert_eq!(b["calls"]["success"], 1, "{b}");
        assert_eq!(b["calls"]["failure"], 0, "{b}");
        drop(messages);
    });
    std::thread::sleep(Duration::from_millis(200));
    let b = &proxy.status()["breakers"]["grpc"];
    assert_eq!(
        b["calls"]["failure"], 0,
        "a cancelled stream is not judged: {b}"
    );
    assert_eq!(proxy.phase("grpc"), "closed");

    // Two messages, then UNAVAILABLE in the trailers: a failure, which opens it.
    server.answer(Answer::Code(Code::Unavailable));
    rt.block_on(async {
        let mut messages = grpc::stream(&mut client).await.unwrap();
        assert_eq!(messages.message().await.unwrap().unwrap(), b"one");
        assert_eq!(messages.message().await.unwrap().unwrap(), b"two");
        let status = messages.message().await.unwrap_err();
        assert_eq!(status.code(), Code::Unavailable, "{status:?}");
        assert_eq!(status.message(), "failed mid-stream");
    });
    assert!(
        eventually(Duration::from_secs(5), || proxy.phase("grpc") == "open"),
        "{}",
        proxy.status()
    );
    assert_eq!(
        proxy.last_reason("grpc"),
        "grpc UNAVAILABLE: failed mid-stream"
    );
}

/// An HTTP/2 upstream whose every answer is a gRPC head and one message, then a reset
/// stream (no trailers).
async fn cutting_server() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let service = hyper::service::service_fn(|_req| async {
                let (tx, rx) =
                    tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(2);
                tokio::spawn(async move {
                    let one = Frame::data(Bytes::from_static(b"\0\0\0\0\x03one"));
                    let _ = tx.send(Ok(one)).await;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    let _ = tx.send(Err(std::io::Error::other("cut"))).await;
                });
                let body = StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(rx));
                let response = http::Response::builder()
                    .header("content-type", "application/grpc")
                    .body(body)
                    .unwrap();
                Ok::<_, Infallible>(response)
            });
            tokio::spawn(
                hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tcp), service),
            );
        }
    });
    addr
}

#[test]
fn a_grpc_stream_cut_before_its_trailers_is_a_failure() {
    let rt = runtime();
    let upstream = rt.block_on(cutting_server());
    let dir = temp_dir("grpc-cut");
    let proxy = ProxyProcess::start(&dir, &config(upstream, 5));
    let mut client = rt.block_on(grpc::client(proxy.addr));
    rt.block_on(async {
        let mut messages = grpc::stream(&mut client).await.unwrap();
        assert_eq!(messages.message().await.unwrap().unwrap(), b"one");
        let cut = messages.message().await.unwrap_err();
        assert_ne!(cut.code(), Code::Ok, "{cut:?}");
    });
    assert!(
        eventually(Duration::from_secs(5), || calls(&proxy, "failure") == 1),
        "{}",
        proxy.status()
    );
    assert_eq!(proxy.last_reason("grpc"), "transport: body read failed");
}

#[test]
fn a_retry_pushback_keeps_the_breaker_open_as_long_as_the_server_asked() {
    let rt = runtime();
    let server = rt.block_on(GrpcServer::start());
    let dir = temp_dir("grpc-pushback");
    let config = config(server.addr, 1).replace(
        "recovery_timeout = \"30s\"\n",
        "recovery_timeout = \"30s\"\nmax_open_duration = \"5m\"\n",
    ) + "honor_retry_after = true\n";
    let proxy = ProxyProcess::start(&dir, &config);
    let mut client = rt.block_on(grpc::client(proxy.addr));
    server.answer(Answer::Pushback(90_000));
    let status = rt.block_on(grpc::unary(&mut client)).unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert_eq!(proxy.phase("grpc"), "open");
    let b = &proxy.status()["breakers"]["grpc"];
    assert_eq!(b["last_judgement"]["retry_after_ms"], 90_000, "{b}");
    let left = b["retry_after_ms"].as_u64().unwrap();
    assert!(
        (60_000..=90_000).contains(&left),
        "open for the pushback, not 30 s: {b}"
    );
    let refused = rt.block_on(grpc::unary(&mut client)).unwrap_err();
    assert_eq!(refused.metadata().get("retry-after").unwrap(), "90");
}
