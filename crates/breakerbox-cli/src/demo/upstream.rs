//! The flaky upstream: an HTTP server on 127.0.0.1 that follows the [`Stage`] script and
//! counts, per caller group, the requests that reached it while it was failing.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::script::Stage;

/// The header a caller names its group in.
pub const GROUP_HEADER: &str = "x-demo-group";

/// What the upstream saw.
#[derive(Debug)]
pub struct UpstreamCounts {
    /// Requests per group.
    pub received: Vec<AtomicU64>,
    /// Requests per group that arrived while the upstream was failing.
    pub while_failing: Vec<AtomicU64>,
    served: AtomicU64,
}

impl UpstreamCounts {
    fn new(groups: usize) -> UpstreamCounts {
        UpstreamCounts {
            received: (0..groups).map(|_| AtomicU64::new(0)).collect(),
            while_failing: (0..groups).map(|_| AtomicU64::new(0)).collect(),
            served: AtomicU64::new(0),
        }
    }
}

/// A running upstream; dropping it stops the server.
pub struct Upstream {
    /// Where it listens.
    pub addr: SocketAddr,
    /// What it saw.
    pub counts: Arc<UpstreamCounts>,
    tasks: JoinSet<()>,
}

impl Upstream {
    /// Starts the upstream on a free loopback port; its timeline starts at `start` and
    /// lasts `total`.
    pub async fn start(
        groups: usize,
        start: Instant,
        total: Duration,
    ) -> std::io::Result<Upstream> {
        Upstream::start_with(groups, Some((start, total))).await
    }

    /// Starts an upstream that stays healthy (answers 200 at once) on a free loopback
    /// port.
    pub async fn start_healthy(groups: usize) -> std::io::Result<Upstream> {
        Upstream::start_with(groups, None).await
    }

    /// `script`: the timeline's start and length, or `None` for always healthy.
    async fn start_with(
        groups: usize,
        script: Option<(Instant, Duration)>,
    ) -> std::io::Result<Upstream> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let counts = Arc::new(UpstreamCounts::new(groups));
        let mut tasks = JoinSet::new();
        let shared = counts.clone();
        tasks.spawn(async move {
            let mut connections = JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let counts = shared.clone();
                connections.spawn(async move {
                    let service = service_fn(move |request: Request<hyper::body::Incoming>| {
                        let counts = counts.clone();
                        async move { Ok::<_, Infallible>(serve(request, &counts, script).await) }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
                while connections.try_join_next().is_some() {}
            }
        });
        Ok(Upstream {
            addr,
            counts,
            tasks,
        })
    }

    /// Stops the server and every connection.
    pub fn stop(&mut self) {
        self.tasks.abort_all();
    }
}

async fn serve(
    request: Request<hyper::body::Incoming>,
    counts: &UpstreamCounts,
    script: Option<(Instant, Duration)>,
) -> Response<Full<Bytes>> {
    let stage = match script {
        Some((start, total)) => Stage::at(start.elapsed(), total),
        None => Stage::Healthy,
    };
    let group = request
        .headers()
        .get(GROUP_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if let Some(counter) = group.and_then(|g| counts.received.get(g)) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
    if stage.failing() {
        if let Some(counter) = group.and_then(|g| counts.while_failing.get(g)) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }
    let n = counts.served.fetch_add(1, Ordering::Relaxed);
    let (status, delay) = stage.response(n);
    tokio::time::sleep(delay).await;
    let body = if status == 200 {
        r#"{"ok":true}"#
    } else {
        r#"{"error":"unavailable"}"#
    };
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or_default();
    response
}
