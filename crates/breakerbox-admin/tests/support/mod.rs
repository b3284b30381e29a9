//! Test support: the admin service served by hyper (or axum) on 127.0.0.1 with an
//! ephemeral port, and a tiny blocking HTTP/1.1 client.

#![allow(dead_code)]
// Tests wait on real sockets, so they read the OS clock.
#![allow(clippy::disallowed_methods)]
// Test support: a failed read or parse is a failed test.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use breakerbox_admin::{AdminService, PeerAddr};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::runtime::Runtime;

/// A server on 127.0.0.1 running on its own runtime, stopped on drop.
pub struct Served {
    /// Where it listens.
    pub addr: SocketAddr,
    runtime: Option<Runtime>,
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

impl Served {
    /// Serves the service that `build` makes (inside the runtime: a Redis breaker's
    /// background tasks need one), inserting each connection's [`PeerAddr`].
    pub fn start<F, Fut>(build: F) -> Served
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = AdminService>,
    {
        let runtime = runtime();
        let service = runtime.block_on(build());
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        runtime.spawn(async move {
            loop {
                let Ok((stream, peer)) = listener.accept().await else {
                    continue;
                };
                let service = service.clone();
                tokio::spawn(async move {
                    let handler = service_fn(move |mut request: http::Request<Incoming>| {
                        let service = service.clone();
                        request.extensions_mut().insert(PeerAddr(peer));
                        async move { Ok::<_, Infallible>(service.handle(request).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), handler)
                        .await;
                });
            }
        });
        Served {
            addr,
            runtime: Some(runtime),
        }
    }

    /// Serves `service` (no runtime needed to build it).
    pub fn service(service: AdminService) -> Served {
        Served::start(|| async move { service })
    }

    /// Serves the axum router that `build` makes, with `ConnectInfo<SocketAddr>`.
    pub fn axum<F, Fut>(build: F) -> Served
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = axum::Router>,
    {
        let runtime = runtime();
        let app = runtime.block_on(build());
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        runtime.spawn(async move {
            let _ = axum::serve(
                listener,
                app.into_make_service_with_connect_info::<SocketAddr>(),
            )
            .await;
        });
        Served {
            addr,
            runtime: Some(runtime),
        }
    }

    /// Runs `future` on the server's runtime.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.as_ref().unwrap().block_on(future)
    }

    /// `GET target`.
    pub fn get(&self, target: &str) -> Reply {
        request(self.addr, "GET", target, &[], b"")
    }

    /// `GET target` as JSON (asserting 200).
    pub fn json(&self, target: &str) -> serde_json::Value {
        let reply = self.get(target);
        assert_eq!(reply.status, 200, "GET {target}: {}", reply.body);
        reply.json()
    }

    /// An action as a script on this machine sends it: `POST target` with a JSON content
    /// type, `headers` and `body`.
    pub fn act(&self, target: &str, headers: &[(&str, &str)], body: &str) -> Reply {
        let mut all = vec![("content-type", "application/json")];
        all.extend_from_slice(headers);
        request(self.addr, "POST", target, &all, body.as_bytes())
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// A response as the client saw it.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

impl Reply {
    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.body))
    }

    /// A header (lower-case name).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

/// Sends one request (`Connection: close`, `Host: addr` unless given) and reads the whole
/// response (the service always sends a `Content-Length`).
pub fn request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut head = format!("{method} {target} HTTP/1.1\r\nconnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("host: {addr}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() {
        head.push_str(&format!("content-length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    // A server may answer (413) before it read all of a large body and close.
    let _ = stream.write_all(body);
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("{method} {target}: no response head in {text:?}"));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{method} {target}: bad status line in {head:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Reply {
        status,
        headers,
        body: body.to_string(),
    }
}

/// Polls `f` every 20 ms until it is true or `within` has passed.
pub fn eventually(within: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A fresh directory under cargo's per-target temp dir.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("breakerbox-admin")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Whether `program` is on PATH.
pub fn installed(program: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}
