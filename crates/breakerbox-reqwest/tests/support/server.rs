//! A real HTTP/1.1 server on 127.0.0.1 whose replies (status, headers, body, delay) are
//! scripted per request, and which counts the requests it receives.

#![allow(dead_code)] // each test file uses a different part of it

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// One scripted reply.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Bytes,
    pub delay: Duration,
    /// Send the body in chunks of this size without a Content-Length.
    pub chunked: Option<usize>,
    /// Close the connection without answering.
    pub hang_up: bool,
}

impl Reply {
    pub fn status(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: Bytes::from_static(b"ok"),
            delay: Duration::ZERO,
            chunked: None,
            hang_up: false,
        }
    }

    pub fn ok() -> Reply {
        Reply::status(200)
    }

    /// A reply with a JSON body.
    pub fn json(status: u16, body: &str) -> Reply {
        Reply::status(status)
            .header("content-type", "application/json")
            .body(body.to_owned())
    }

    pub fn hang_up() -> Reply {
        Reply {
            hang_up: true,
            ..Reply::ok()
        }
    }

    pub fn body(mut self, body: impl Into<Bytes>) -> Reply {
        self.body = body.into();
        self
    }

    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Reply {
        self.headers.push((name, value.into()));
        self
    }

    pub fn delay(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }

    pub fn chunked(mut self, chunk: usize) -> Reply {
        self.chunked = Some(chunk.max(1));
        self
    }
}

struct State {
    hits: AtomicUsize,
    script: Mutex<VecDeque<Reply>>,
    fallback: Mutex<Reply>,
}

/// The server; stops when dropped.
pub struct Server {
    addr: SocketAddr,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl Server {
    /// Starts a server answering 200 "ok" until told otherwise.
    pub async fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State {
            hits: AtomicUsize::new(0),
            script: Mutex::new(VecDeque::new()),
            fallback: Mutex::new(Reply::ok()),
        });
        let shared = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let state = shared.clone();
                tokio::spawn(async move {
                    let service =
                        service_fn(move |_request: hyper::Request<hyper::body::Incoming>| {
                            let state = state.clone();
                            async move { answer(&state).await }
                        });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Server { addr, state, task }
    }

    /// Queues `reply` for the next request not yet answered from the queue.
    pub fn push(&self, reply: Reply) {
        self.state.script.lock().unwrap().push_back(reply);
    }

    /// The reply once the queue is empty.
    pub fn set_fallback(&self, reply: Reply) {
        *self.state.fallback.lock().unwrap() = reply;
    }

    /// How many requests arrived.
    pub fn hits(&self) -> usize {
        self.state.hits.load(Ordering::SeqCst)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// The breaker key of this server (`host:port`).
    pub fn key(&self) -> String {
        self.addr.to_string()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn answer(state: &State) -> Result<hyper::Response<Scripted>, std::io::Error> {
    state.hits.fetch_add(1, Ordering::SeqCst);
    let reply = {
        let next = state.script.lock().unwrap().pop_front();
        next.unwrap_or_else(|| state.fallback.lock().unwrap().clone())
    };
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    if reply.hang_up {
        // An error from the service makes hyper close the connection without a response.
        return Err(std::io::Error::other("scripted hang-up"));
    }
    let mut response = hyper::Response::builder().status(reply.status);
    for (name, value) in &reply.headers {
        response = response.header(*name, value);
    }
    let body = Scripted::new(reply.body, reply.chunked);
    Ok(response.body(body).unwrap())
}

/// A body sent whole (with a Content-Length) or in chunks (without one).
pub struct Scripted {
    chunks: VecDeque<Bytes>,
    exact: Option<u64>,
}

impl Scripted {
    fn new(body: Bytes, chunked: Option<usize>) -> Scripted {
        match chunked {
            None => Scripted {
                exact: Some(body.len() as u64),
                chunks: VecDeque::from([body]),
            },
            Some(size) => {
                let mut chunks = VecDeque::new();
                let mut rest = body;
                while !rest.is_empty() {
                    let take = size.min(rest.len());
                    chunks.push_back(rest.split_to(take));
                }
                Scripted {
                    chunks,
                    exact: None,
                }
            }
        }
    }
}

impl Body for Scripted {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.chunks.pop_front().map(|c| Ok(Frame::data(c))))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self.exact {
            Some(n) => http_body::SizeHint::with_exact(n),
            None => http_body::SizeHint::default(),
        }
    }
}

/// A reqwest client for loopback tests: no proxy from the environment, no pooled
/// connections (so a hang-up never poisons the next request).
pub fn plain_client() -> reqwest::Client {
    client_builder().build().unwrap()
}

pub fn client_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(0)
}

/// A loopback port with nothing listening on it.
pub async fn closed_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    addr
}

/// A server that reads each request and resets the connection (RST) instead of answering.
/// Returns its address and a count of the connections it reset.
pub async fn resetting_server() -> (SocketAddr, Arc<AtomicUsize>, JoinHandle<()>) {
    use tokio::io::AsyncReadExt;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let resets = Arc::new(AtomicUsize::new(0));
    let count = resets.clone();
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut buffer = [0u8; 4096];
            let _ = stream.read(&mut buffer).await;
            let socket = socket2::SockRef::from(&stream);
            let _ = socket.set_linger(Some(Duration::ZERO));
            drop(stream);
            count.fetch_add(1, Ordering::SeqCst);
        }
    });
    (addr, resets, task)
}
