//! Several OS processes share one breaker in front of a loopback HTTP server that counts
//! concurrent probe requests: during half-open the count never exceeds `max_probes`.
//!
//! The parent test spawns this test binary again, running the ignored
//! `worker_process_calls_the_shared_breaker` with environment variables that point it at
//! the Redis and HTTP servers.

#![allow(clippy::unwrap_used)] // tests unwrap
// Tests measure real elapsed time against real servers.
#![allow(clippy::disallowed_methods)]

#[path = "support/redis_server.rs"]
mod redis_server;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use breakerbox::{Config, Phase, Verdict};
use breakerbox_redis::{Backoff, LocalView, Mode, RedisBreaker};
use redis_server::RedisServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const MAX_PROBES: u32 = 2;
const WORKERS: usize = 4;

#[derive(Default)]
struct Counts {
    healthy: AtomicBool,
    requests: AtomicU64,
    probes: AtomicU64,
    probes_now: AtomicU64,
    probes_max: AtomicU64,
}

async fn serve(listener: TcpListener, counts: Arc<Counts>) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            return;
        };
        let counts = counts.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 1024];
            let mut read = 0;
            while !buf[..read].windows(4).any(|w| w == b"\r\n\r\n") && read < buf.len() {
                match stream.read(&mut buf[read..]).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => read += n,
                }
            }
            let probe = buf[..read].starts_with(b"GET /probe");
            counts.requests.fetch_add(1, Ordering::Relaxed);
            if probe {
                counts.probes.fetch_add(1, Ordering::Relaxed);
                let now = counts.probes_now.fetch_add(1, Ordering::SeqCst) + 1;
                counts.probes_max.fetch_max(now, Ordering::SeqCst);
            }
            let healthy = counts.healthy.load(Ordering::Relaxed);
            if healthy {
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
            let status = if healthy {
                "200 OK"
            } else {
                "500 Internal Server Error"
            };
            let response =
                format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            let _ = stream.write_all(response.as_bytes()).await;
            if probe {
                counts.probes_now.fetch_sub(1, Ordering::SeqCst);
            }
        });
    }
}

async fn get(addr: &str, path: &str) -> std::io::Result<u16> {
    let mut stream = TcpStream::connect(addr).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    let text = String::from_utf8_lossy(&response);
    text.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other("bad response"))
}

fn config() -> Config {
    Config::builder()
        .consecutive_failures(3)
        .recovery_timeout(Duration::from_millis(300))
        .max_probes(MAX_PROBES)
        .required_successes(6)
        .half_open_timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a worker process, started by the other tests of this file"]
async fn worker_process_calls_the_shared_breaker() {
    let (Ok(redis_url), Ok(http)) = (
        std::env::var("BB_WORKER_REDIS"),
        std::env::var("BB_WORKER_HTTP"),
    ) else {
        return;
    };
    let env = |name: &str, default: u64| -> u64 {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let run_for = Duration::from_millis(env("BB_WORKER_MILLIS", 3_000));
    let timeout = Duration::from_millis(env("BB_WORKER_TIMEOUT_MS", 500));
    let mode = if env("BB_WORKER_STRICT", 0) == 1 {
        Mode::Strict
    } else {
        Mode::LocalView(LocalView {
            flush_interval: Duration::from_millis(20),
            batch_size: 50,
            refresh_interval: Duration::from_millis(200),
            ..LocalView::default()
        })
    };
    let breaker = RedisBreaker::builder(redis_url, "fleet")
        .config(config())
        .mode(mode)
        .timeout(timeout)
        .backoff(Backoff {
            min: Duration::from_millis(20),
            max: Duration::from_millis(200),
        })
        .build()
        .await
        .unwrap();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let breaker = breaker.clone();
        let http = http.clone();
        tasks.push(tokio::spawn(async move {
            let (mut admitted, mut probes, mut rejected) = (0u64, 0u64, 0u64);
            let (mut blocked, mut fallback) = (Duration::ZERO, 0u64);
            while started.elapsed() < run_for {
                let asked = Instant::now();
                let acquired = breaker.acquire().await;
                blocked = blocked.max(asked.elapsed());
                match acquired {
                    Ok(permit) => {
                        admitted += 1;
                        fallback += u64::from(permit.is_fallback());
                        let path = if permit.is_probe() {
                            probes += 1;
                            "/probe"
                        } else {
                            "/call"
                        };
                        let verdict = match get(&http, path).await {
                            Ok(200) => Verdict::Success,
                            _ => Verdict::Failure,
                        };
                        let recording = Instant::now();
                        permit.record(verdict).await;
                        blocked = blocked.max(recording.elapsed());
                    }
                    Err(_) => {
                        rejected += 1;
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                }
            }
            (admitted, probes, rejected, blocked, fallback)
        }));
    }
    let mut totals = (0, 0, 0, Duration::ZERO, 0);
    for t in tasks {
        let (a, p, r, b, f) = t.await.unwrap();
        totals = (
            totals.0 + a,
            totals.1 + p,
            totals.2 + r,
            totals.3.max(b),
            totals.4 + f,
        );
    }
    // Give a resynchronisation in progress a moment to finish.
    let deadline = Instant::now() + Duration::from_secs(3);
    while breaker.is_degraded() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    breaker.flush().await;
    println!(
        "WORKER admitted={} probes={} rejected={} blocked_ms={} fallback={} outages={} phase={} degraded={}",
        totals.0,
        totals.1,
        totals.2,
        totals.3.as_millis(),
        totals.4,
        breaker.stats().outages,
        breaker.local_phase(),
        breaker.is_degraded()
    );
}

/// Starts the worker processes against `server` and the HTTP server at `http`.
fn spawn_workers(
    server: &RedisServer,
    http: &str,
    env: &[(&str, &str)],
) -> Vec<std::process::Child> {
    let exe = std::env::current_exe().unwrap();
    (0..WORKERS)
        .map(|_| {
            Command::new(&exe)
                .args([
                    "worker_process_calls_the_shared_breaker",
                    "--exact",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("BB_WORKER_REDIS", server.url())
                .env("BB_WORKER_HTTP", http)
                .envs(env.iter().copied())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect()
}

/// Waits for every worker and returns its report line.
async fn reports(children: Vec<std::process::Child>) -> Vec<String> {
    let mut lines = Vec::new();
    for child in children {
        let output = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        assert!(output.status.success(), "a worker failed: {output:?}");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let line = stdout
            .lines()
            .find_map(|l| l.find("WORKER").map(|at| l[at..].to_string()))
            .unwrap_or_else(|| panic!("no report from a worker: {stdout}"));
        lines.push(line);
    }
    lines
}

fn field(line: &str, name: &str) -> u64 {
    line.split(' ')
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {line}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_processes_ride_out_a_paused_killed_and_restarted_redis() {
    let mut server = RedisServer::start();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http = listener.local_addr().unwrap().to_string();
    let counts = Arc::new(Counts::default());
    counts.healthy.store(true, Ordering::Relaxed);
    tokio::spawn(serve(listener, counts.clone()));
    let timeout_ms = 100u64;
    let children = spawn_workers(
        &server,
        &http,
        &[
            ("BB_WORKER_STRICT", "1"),
            ("BB_WORKER_TIMEOUT_MS", "100"),
            ("BB_WORKER_MILLIS", "3000"),
        ],
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    server.pause();
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.resume();
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.kill();
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.restart();
    let lines = reports(children).await;
    eprintln!("{lines:?}");
    for line in &lines {
        assert!(
            field(line, "blocked_ms") <= timeout_ms + 250,
            "a call blocked too long: {line}"
        );
        assert!(field(line, "fallback") > 0, "the fallback engaged: {line}");
        assert!(field(line, "outages") >= 1, "{line}");
        assert!(line.contains("degraded=false"), "resynchronised: {line}");
    }
    // The restarted Redis holds the shared state again.
    assert_eq!(
        server.command(&["HGET", "bb:{fleet}", "phase"]).unwrap(),
        "0"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_stay_under_the_cap_across_four_processes() {
    let server = RedisServer::start();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http = listener.local_addr().unwrap().to_string();
    let counts = Arc::new(Counts::default());
    tokio::spawn(serve(listener, counts.clone()));

    let children = spawn_workers(&server, &http, &[]);
    // Failing first (the breaker trips and probes fail), then healthy (probes succeed).
    tokio::time::sleep(Duration::from_millis(900)).await;
    counts.healthy.store(true, Ordering::Relaxed);
    let lines = reports(children).await;
    let probes = counts.probes.load(Ordering::Relaxed);
    let max = counts.probes_max.load(Ordering::Relaxed);
    eprintln!("probe requests {probes}, at most {max} at once; {lines:?}");
    assert!(
        probes >= 2,
        "half-open was reached and probed: {probes} probes, {lines:?}"
    );
    assert!(max >= 1);
    assert!(
        max <= u64::from(MAX_PROBES),
        "{max} concurrent probes across {WORKERS} processes (cap {MAX_PROBES})"
    );
    // Every process ends closed: the probes succeeded and the close reached them all.
    for line in &lines {
        assert!(
            line.contains(&format!("phase={}", Phase::Closed)),
            "{lines:?}"
        );
        assert!(line.contains("degraded=false"), "{lines:?}");
    }
    assert!(counts.requests.load(Ordering::Relaxed) > probes);
}
