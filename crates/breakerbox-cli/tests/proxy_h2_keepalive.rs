//! HTTP/2 keep-alive to upstreams: the proxy pings its upstream connections and replaces
//! one that died silently (a relay between them stops passing its bytes, as a NAT or
//! firewall that forgot the connection does, with no FIN or RST), so the next request
//! goes out on a new connection instead of waiting out `request_timeout` on the dead one
//! and counting as a failure of a healthy upstream. Without the pings it does.

#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

#[path = "support/proxy_harness.rs"]
mod harness;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use harness::{check, get, temp_dir, ProxyProcess};
use http_body_util::Full;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// An HTTP/2 (h2c) upstream answering 200 `ok` to everything.
async fn h2_upstream() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let service = hyper::service::service_fn(|_req| async {
                Ok::<_, Infallible>(http::Response::new(Full::new(Bytes::from_static(b"ok"))))
            });
            tokio::spawn(
                hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tcp), service),
            );
        }
    });
    addr
}

/// A TCP relay in front of `target` whose connections can be silenced: every connection
/// opened before [`Relay::silence`] stops passing bytes either way (it reads and drops
/// them), with its sockets left open; later connections pass as usual.
struct Relay {
    addr: SocketAddr,
    /// Connections numbered up to this are silent.
    silent_up_to: Arc<AtomicU64>,
    opened: Arc<AtomicUsize>,
}

impl Relay {
    async fn start(target: SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let silent_up_to = Arc::new(AtomicU64::new(0));
        let opened = Arc::new(AtomicUsize::new(0));
        let (silent, count) = (silent_up_to.clone(), opened.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let id = count.fetch_add(1, Ordering::SeqCst) as u64 + 1;
                let Ok(server) = TcpStream::connect(target).await else {
                    continue;
                };
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                tokio::spawn(pass(cr, sw, id, silent.clone()));
                tokio::spawn(pass(sr, cw, id, silent.clone()));
            }
        });
        Relay {
            addr,
            silent_up_to,
            opened,
        }
    }

    /// Silences every connection opened so far.
    fn silence(&self) {
        let opened = self.opened.load(Ordering::SeqCst) as u64;
        self.silent_up_to.store(opened, Ordering::SeqCst);
    }

    fn opened(&self) -> usize {
        self.opened.load(Ordering::SeqCst)
    }
}

/// Copies `from` to `to` while connection `id` is not silenced; then drops what comes.
async fn pass(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    id: u64,
    silent_up_to: Arc<AtomicU64>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if id <= silent_up_to.load(Ordering::SeqCst) {
            continue;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

fn config(relay: SocketAddr, keepalive: &str) -> String {
    format!(
        "listen = \"127.0.0.1:0\"\nworkers = 1\n[limits]\nrequest_timeout = \"2s\"\n\
         [admin]\nlisten = \"127.0.0.1:0\"\n\
         [[upstream]]\nname = \"h2\"\nroute = \"/\"\nurl = \"http://{relay}\"\n\
         protocol = \"http2\"\n{keepalive}\
         [upstream.breaker]\nconsecutive_failures = 1\nrecovery_timeout = \"30s\"\n"
    )
}

fn failures(proxy: &ProxyProcess) -> u64 {
    proxy.status()["breakers"]["h2"]["calls"]["failure"]
        .as_u64()
        .unwrap_or(0)
}

/// One request through the proxy to a relay whose first connection was silenced after the
/// first request: the second request's status and how long it took.
fn second_request_after_a_silent_death(keepalive: &str) -> (u16, Duration, u64, usize) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let upstream = rt.block_on(h2_upstream());
    let relay = rt.block_on(Relay::start(upstream));
    let dir = temp_dir("h2-keepalive");
    let proxy = ProxyProcess::start(&dir, &config(relay.addr, keepalive));
    assert_eq!(get(proxy.addr, "/first").status, 200);
    assert_eq!(relay.opened(), 1);
    relay.silence();
    // Idle for a while, as between a service's bursts of calls.
    std::thread::sleep(Duration::from_millis(800));
    let started = Instant::now();
    let status = get(proxy.addr, "/second").status;
    (status, started.elapsed(), failures(&proxy), relay.opened())
}

#[test]
fn a_connection_that_died_silently_is_replaced_before_a_request_is_lost_on_it() {
    let (status, took, failures, opened) = second_request_after_a_silent_death(
        "keepalive_interval = \"100ms\"\nkeepalive_timeout = \"200ms\"\n",
    );
    assert_eq!(status, 200, "answered on a new connection");
    assert!(
        took < Duration::from_secs(1),
        "not after the timeout: {took:?}"
    );
    assert_eq!(failures, 0, "nothing counted against the upstream");
    assert_eq!(opened, 2, "the dead connection was replaced");
}

/// What the pings prevent: with a keep-alive slower than the idle time, the request goes
/// out on the dead connection and times out, a failure of a healthy upstream.
#[test]
fn without_a_ping_in_time_the_request_is_lost_on_the_dead_connection() {
    let (status, took, failures, _) = second_request_after_a_silent_death(
        "keepalive_interval = \"1h\"\nkeepalive_timeout = \"1h\"\n",
    );
    assert_eq!(status, 504, "timed out on the dead connection");
    assert!(took >= Duration::from_secs(2), "{took:?}");
    assert_eq!(failures, 1);
}

#[test]
fn keepalive_keys_are_checked() {
    let dir = temp_dir("h2-keepalive-check");
    let upstream = "127.0.0.1:1";
    let (ok, _) = check(
        &dir,
        "ok.toml",
        &config(upstream.parse().unwrap(), "keepalive_interval = \"5s\"\n"),
    );
    assert!(ok);
    let (ok, out) = check(
        &dir,
        "zero.toml",
        &config(upstream.parse().unwrap(), "keepalive_timeout = \"0s\"\n"),
    );
    assert!(!ok);
    assert!(out.contains("upstream[0].keepalive_timeout"), "{out}");
    let http1 = config(upstream.parse().unwrap(), "keepalive_interval = \"5s\"\n")
        .replace("protocol = \"http2\"\n", "");
    let (ok, out) = check(&dir, "http1.toml", &http1);
    assert!(!ok);
    assert!(
        out.contains("upstream[0].keepalive_interval: needs protocol = \"http2\""),
        "{out}"
    );
}
