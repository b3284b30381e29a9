//! Real servers on 127.0.0.1: a flaky upstream whose status, body, delay and streaming
//! are scripted, and a hyper client to call it.

#![allow(clippy::unwrap_used)] // test support: a poisoned lock or a failed bind ends the test

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// What the upstream answers, changed by the test between requests.
pub struct Script {
    status: AtomicU16,
    delay_ms: AtomicU64,
    /// Chunks of the body; with more than one, they are streamed (no Content-Length) with
    /// `gap_ms` between them.
    chunks: Mutex<Vec<String>>,
    gap_ms: AtomicU64,
    requests: AtomicUsize,
}

impl Script {
    pub fn set_status(&self, status: u16) {
        self.status.store(status, Ordering::SeqCst);
    }
    pub fn set_delay(&self, delay: Duration) {
        self.delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }
    pub fn set_body(&self, body: &str) {
        *self.chunks.lock().unwrap() = vec![body.to_owned()];
    }
    pub fn set_chunks(&self, chunks: &[&str], gap: Duration) {
        *self.chunks.lock().unwrap() = chunks.iter().map(|c| c.to_string()).collect();
        self.gap_ms.store(gap.as_millis() as u64, Ordering::SeqCst);
    }
    /// How many requests reached the upstream.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

async fn answer(State(script): State<Arc<Script>>) -> Response {
    script.requests.fetch_add(1, Ordering::SeqCst);
    let delay = script.delay_ms.load(Ordering::SeqCst);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    let status = script.status.load(Ordering::SeqCst);
    let chunks = script.chunks.lock().unwrap().clone();
    let gap = Duration::from_millis(script.gap_ms.load(Ordering::SeqCst));
    let body = if chunks.len() == 1 {
        Body::from(chunks[0].clone())
    } else {
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(1);
        tokio::spawn(async move {
            for (i, chunk) in chunks.into_iter().enumerate() {
                if i > 0 {
                    tokio::time::sleep(gap).await;
                }
                if tx.send(Bytes::from(chunk)).await.is_err() {
                    return;
                }
            }
        });
        Body::new(Chunks { rx })
    };
    Response::builder().status(status).body(body).unwrap()
}

/// A body streamed from a channel: no `Content-Length`, chunks as they come.
struct Chunks {
    rx: tokio::sync::mpsc::Receiver<Bytes>,
}

impl http_body::Body for Chunks {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        self.rx
            .poll_recv(cx)
            .map(|chunk| chunk.map(|c| Ok(http_body::Frame::data(c))))
    }
}

/// Starts the upstream on 127.0.0.1 (a free port); it answers 200 with body `ok`.
pub async fn spawn_upstream() -> (SocketAddr, Arc<Script>) {
    let script = Arc::new(Script {
        status: AtomicU16::new(200),
        delay_ms: AtomicU64::new(0),
        chunks: Mutex::new(vec!["ok".to_owned()]),
        gap_ms: AtomicU64::new(0),
        requests: AtomicUsize::new(0),
    });
    let app = Router::new()
        .route("/", get(answer))
        .with_state(script.clone());
    (serve(app).await, script)
}

/// Serves `app` on 127.0.0.1 (a free port) in the background.
pub async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// A plain hyper client (HTTP/1, no TLS).
pub fn client() -> Client<HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

/// A GET request to `addr`.
pub fn get_request(addr: SocketAddr) -> http::Request<Full<Bytes>> {
    http::Request::get(format!("http://{addr}/"))
        .body(Full::default())
        .unwrap()
}
