//! Two or more OS processes sharing one Redis breaker through an HTTP integration (the
//! tower layer, the reqwest middleware), in front of a loopback upstream that logs when
//! each request arrived and when it was answered.
//!
//! The parent test starts a redis-server and the [`Upstream`], then spawns its own test
//! executable as workers ([`spawn_workers`]: the worker is the crate's ignored
//! `http_fleet_worker` test, which calls [`worker_settings`] and [`run_callers`] with its
//! own client). A worker prints one `HTTP_FLEET sent=.. rejected=.. errors=..` line.

#![allow(dead_code)]
// Tests measure real elapsed time against real servers.
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use breakerbox::Config;
use breakerbox_redis::{LocalView, Mode, RedisBreaker};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The shared breaker's settings: trips after 3 consecutive failures, open for 1.5 s,
/// one probe at a time across the fleet, closes after 2 probe successes.
pub fn config() -> Config {
    Config::builder()
        .consecutive_failures(3)
        .recovery_timeout(Duration::from_millis(1_500))
        .half_open_timeout(Duration::from_secs(10))
        .max_probes(1)
        .required_successes(2)
        .build()
        .unwrap()
}

/// A worker's shared breaker on the Redis at `url`.
pub async fn breaker(url: &str) -> RedisBreaker {
    RedisBreaker::builder(url, "http-fleet")
        .config(config())
        .mode(Mode::LocalView(LocalView {
            flush_interval: Duration::from_millis(500),
            refresh_interval: Duration::from_millis(200),
            ..LocalView::default()
        }))
        .timeout(Duration::from_millis(500))
        .build()
        .await
        .unwrap()
}

/// The loopback upstream: 500 while unhealthy, 200 after `delay` while healthy.
pub struct Upstream {
    /// `http://127.0.0.1:port/`.
    pub url: String,
    state: Arc<UpstreamState>,
}

#[derive(Default)]
struct UpstreamState {
    healthy: AtomicBool,
    delay_ms: AtomicU64,
    /// (arrived, answered) of every request.
    log: Mutex<Vec<(Instant, Option<Instant>)>>,
}

impl Upstream {
    /// Starts it on a free loopback port, unhealthy.
    pub async fn start() -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let state = Arc::new(UpstreamState::default());
        let serving = state.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let state = serving.clone();
                tokio::spawn(async move {
                    let mut buffer = Vec::new();
                    let mut chunk = [0u8; 1024];
                    while !buffer.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let index = {
                        let mut log = state.log.lock().unwrap();
                        log.push((Instant::now(), None));
                        log.len() - 1
                    };
                    let healthy = state.healthy.load(Ordering::SeqCst);
                    if healthy {
                        let delay = state.delay_ms.load(Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(delay)).await;
                    }
                    let status = if healthy {
                        "200 OK"
                    } else {
                        "500 Internal Server Error"
                    };
                    let response = format!(
                        "HTTP/1.1 {status}\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"
                    );
                    let _ = stream.write_all(response.as_bytes()).await;
                    state.log.lock().unwrap()[index].1 = Some(Instant::now());
                });
            }
        });
        Upstream { url, state }
    }

    /// Makes it answer 200 after `delay`, or 500 at once.
    pub fn set_healthy(&self, healthy: bool, delay: Duration) {
        self.state
            .delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
        self.state.healthy.store(healthy, Ordering::SeqCst);
    }

    /// Every request so far: (arrived, answered).
    pub fn log(&self) -> Vec<(Instant, Option<Instant>)> {
        self.state.log.lock().unwrap().clone()
    }

    /// Requests so far.
    pub fn calls(&self) -> usize {
        self.state.log.lock().unwrap().len()
    }
}

/// Spawns `n` workers running the ignored test `worker_test` of this executable.
pub fn spawn_workers(
    n: usize,
    worker_test: &str,
    redis: &str,
    upstream: &str,
    run_for: Duration,
) -> Vec<std::process::Child> {
    (0..n)
        .map(|_| {
            Command::new(std::env::current_exe().unwrap())
                .args([worker_test, "--exact", "--ignored", "--nocapture"])
                .env("BB_HTTP_FLEET_REDIS", redis)
                .env("BB_HTTP_FLEET_UPSTREAM", upstream)
                .env("BB_HTTP_FLEET_MILLIS", run_for.as_millis().to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap()
        })
        .collect()
}

/// What one worker did.
#[derive(Debug, Default, Clone, Copy)]
pub struct WorkerReport {
    /// Requests that reached the upstream and got a response.
    pub sent: u64,
    /// Requests the breaker refused (nothing sent).
    pub rejected: u64,
    /// Requests that failed otherwise.
    pub errors: u64,
}

/// Waits for the workers (bounded) and reads their reports.
pub async fn reports(children: Vec<std::process::Child>) -> Vec<WorkerReport> {
    tokio::task::spawn_blocking(move || {
        children
            .into_iter()
            .map(|child| {
                let output = child.wait_with_output().unwrap();
                assert!(output.status.success(), "a worker failed");
                let text = String::from_utf8_lossy(&output.stdout);
                let line = text
                    .lines()
                    .find(|l| l.starts_with("HTTP_FLEET "))
                    .unwrap_or_else(|| panic!("no report in {text}"));
                let mut report = WorkerReport::default();
                for field in line.split_whitespace().skip(1) {
                    let (key, value) = field.split_once('=').unwrap();
                    let value: u64 = value.parse().unwrap();
                    match key {
                        "sent" => report.sent = value,
                        "rejected" => report.rejected = value,
                        _ => report.errors = value,
                    }
                }
                report
            })
            .collect()
    })
    .await
    .unwrap()
}

/// A worker's settings, if this process is one: (redis url, upstream url, how long).
pub fn worker_settings() -> Option<(String, String, Duration)> {
    let redis = std::env::var("BB_HTTP_FLEET_REDIS").ok()?;
    let upstream = std::env::var("BB_HTTP_FLEET_UPSTREAM").ok()?;
    let millis: u64 = std::env::var("BB_HTTP_FLEET_MILLIS").ok()?.parse().ok()?;
    Some((redis, upstream, Duration::from_millis(millis)))
}

/// How one request through the protected client ended.
pub enum Sent {
    /// A response came back.
    Response,
    /// The breaker refused it.
    Rejected,
    /// Another error.
    Error,
}

/// Runs `callers` concurrent loops of `send` for `run_for`, then prints the report.
pub async fn run_callers<F, Fut>(callers: usize, run_for: Duration, send: F)
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Sent> + Send,
{
    let counts = Arc::new([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)]);
    let deadline = Instant::now() + run_for;
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let send = send.clone();
            let counts = counts.clone();
            tokio::spawn(async move {
                while Instant::now() < deadline {
                    let slot = match send().await {
                        Sent::Response => 0,
                        Sent::Rejected => 1,
                        Sent::Error => 2,
                    };
                    counts[slot].fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    println!(
        "HTTP_FLEET sent={} rejected={} errors={}",
        counts[0].load(Ordering::Relaxed),
        counts[1].load(Ordering::Relaxed),
        counts[2].load(Ordering::Relaxed)
    );
}

/// The scenario, from the parent's side: the upstream fails until the shared breaker
/// trips, then recovers (slowly). Checks that, once tripped, no process sends anything
/// until the open phase ends; that half-open probes never overlap across processes (one
/// probe at a time, two to close); and that every process refused calls itself.
pub async fn run_scenario(worker_test: &str) {
    let redis = crate::redis_server::RedisServer::start();
    let upstream = Upstream::start().await;
    let run_for = Duration::from_millis(4_500);
    let workers = spawn_workers(2, worker_test, &redis.url(), &upstream.url, run_for);
    // The trip: three failures in all.
    let deadline = Instant::now() + Duration::from_secs(10);
    while upstream.calls() < 3 {
        assert!(Instant::now() < deadline, "the workers never called");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // Healthy again (slowly, so probes would overlap if they could) well before the end
    // of the open phase.
    tokio::time::sleep(Duration::from_millis(500)).await;
    upstream.set_healthy(true, Duration::from_millis(150));
    let reports = reports(workers).await;
    let log = upstream.log();
    let third = log[2].0;
    let quiet_from = third + Duration::from_millis(300);
    let quiet_until = third + Duration::from_millis(1_400);
    let during_open = log
        .iter()
        .filter(|(at, _)| *at >= quiet_from && *at < quiet_until)
        .count();
    let before_trip = log.iter().filter(|(at, _)| *at < quiet_from).count();
    assert!(
        before_trip <= 12,
        "{before_trip} calls reached the failing upstream before the trip"
    );
    assert_eq!(during_open, 0, "calls reached the upstream while open");
    // Half-open: the first two calls after the open phase are the probes; they must not
    // overlap, and nothing may start before the second is answered.
    let after: Vec<(Instant, Instant)> = log
        .iter()
        .filter(|(at, _)| *at >= quiet_until)
        .map(|(at, done)| {
            (
                *at,
                done.unwrap_or(Instant::now() + Duration::from_secs(60)),
            )
        })
        .collect();
    assert!(
        after.len() >= 3,
        "the breaker never closed: {} calls",
        after.len()
    );
    let (first, second) = (after[0], after[1]);
    assert!(
        second.0 >= first.1,
        "two probes overlapped across processes"
    );
    assert!(
        after[2..].iter().all(|(at, _)| *at >= second.1),
        "a call started before the second probe closed the breaker"
    );
    // Once closed, calls overlap again: the probe cap, not the callers, kept them apart.
    let overlapping = after[2..].windows(2).any(|pair| pair[1].0 < pair[0].1);
    assert!(
        overlapping,
        "no concurrency after closing: the test proves nothing"
    );
    for (i, report) in reports.iter().enumerate() {
        assert!(
            report.rejected > 0,
            "worker {i} never refused a call: {report:?}"
        );
        assert!(report.sent > 0, "worker {i} never sent: {report:?}");
    }
}
