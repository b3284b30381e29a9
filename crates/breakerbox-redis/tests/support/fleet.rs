//! A fleet of worker processes sharing one breaker through a real redis-server, in front
//! of a loopback dependency that counts and timestamps the calls it gets.
//!
//! The parent (a test or a bench) starts a [`Dependency`] and spawns its own executable as
//! workers (a test binary runs its ignored `fleet_worker` test; a bench checks
//! [`is_worker`] in `main`). A worker reads its settings from `BB_FLEET_*` variables,
//! runs callers that acquire, call the dependency and record the verdict, and prints one
//! `FLEET key=value ...` report line when its time is up.

#![allow(dead_code)]
// Tests and benches measure real elapsed time against real servers.
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use breakerbox::{Config, JitterSource, SplitMix, Verdict};
use breakerbox_redis::{Backoff, Fallback, LocalView, Mode, RedisBreaker};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The loopback dependency: answers 200 while healthy and 500 otherwise, and logs the
/// arrival time of every request (and whether it was a probe).
pub struct Dependency {
    /// `127.0.0.1:port`.
    pub addr: String,
    state: Arc<DependencyState>,
}

#[derive(Default)]
struct DependencyState {
    healthy: AtomicBool,
    /// How long a healthy answer takes, in milliseconds.
    delay_ms: AtomicU64,
    log: Mutex<Vec<(Instant, bool)>>,
    probes_now: AtomicU64,
    probes_max: AtomicU64,
}

impl Dependency {
    /// Starts it on a free loopback port (on the current tokio runtime).
    pub async fn start(healthy: bool) -> Dependency {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let state = Arc::new(DependencyState::default());
        state.healthy.store(healthy, Ordering::SeqCst);
        tokio::spawn(serve(listener, state.clone()));
        Dependency { addr, state }
    }

    /// Makes it answer 200 (`true`) or 500.
    pub fn set_healthy(&self, healthy: bool) {
        self.state.healthy.store(healthy, Ordering::SeqCst);
    }

    /// Makes healthy answers take `delay` (so probes overlap).
    pub fn set_delay(&self, delay: Duration) {
        self.state
            .delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// Requests received so far.
    pub fn calls(&self) -> usize {
        self.state.log.lock().unwrap().len()
    }

    /// Requests received at or after `t`.
    pub fn calls_since(&self, t: Instant) -> usize {
        self.state
            .log
            .lock()
            .unwrap()
            .iter()
            .filter(|(at, _)| *at >= t)
            .count()
    }

    /// How long after `t` the last request came (None: none came).
    pub fn last_call_after(&self, t: Instant) -> Option<Duration> {
        self.state
            .log
            .lock()
            .unwrap()
            .iter()
            .filter(|(at, _)| *at >= t)
            .map(|(at, _)| *at - t)
            .max()
    }

    /// Probe requests received at or after `t`.
    pub fn probes_since(&self, t: Instant) -> usize {
        self.state
            .log
            .lock()
            .unwrap()
            .iter()
            .filter(|(at, probe)| *probe && *at >= t)
            .count()
    }

    /// The most probe requests ever in progress at once.
    pub fn probes_max(&self) -> u64 {
        self.state.probes_max.load(Ordering::SeqCst)
    }

    /// Waits (up to 20 s) until it has received `n` requests.
    pub async fn wait_for_calls(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.calls() < n {
            assert!(Instant::now() < deadline, "the fleet sent no traffic");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

async fn serve(listener: TcpListener, state: Arc<DependencyState>) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            return;
        };
        let state = state.clone();
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
            state.log.lock().unwrap().push((Instant::now(), probe));
            if probe {
                let now = state.probes_now.fetch_add(1, Ordering::SeqCst) + 1;
                state.probes_max.fetch_max(now, Ordering::SeqCst);
            }
            let healthy = state.healthy.load(Ordering::SeqCst);
            let delay = state.delay_ms.load(Ordering::SeqCst);
            if healthy && delay > 0 {
                tokio::time::sleep(Duration::from_millis(delay)).await;
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
                state.probes_now.fetch_sub(1, Ordering::SeqCst);
            }
        });
    }
}

async fn get(addr: &str, path: &str) -> std::io::Result<u16> {
    let call = async {
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
    };
    tokio::time::timeout(Duration::from_secs(1), call)
        .await
        .unwrap_or_else(|_| Err(std::io::Error::other("timeout")))
}

/// Whether this process was started as a worker.
pub fn is_worker() -> bool {
    std::env::var("BB_FLEET_REDIS").is_ok()
}

/// Spawns `n` workers: this executable with `args`, against `redis` and `dependency`,
/// with `env` (`BB_FLEET_*` settings) on top.
pub fn spawn(
    n: usize,
    args: &[&str],
    redis: &str,
    dependency: &str,
    env: &[(&str, &str)],
) -> Vec<Child> {
    let exe = std::env::current_exe().unwrap();
    (0..n)
        .map(|_| {
            Command::new(&exe)
                .args(args)
                .env("BB_FLEET_REDIS", redis)
                .env("BB_FLEET_DEP", dependency)
                .envs(env.iter().copied())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect()
}

/// The arguments that make a test binary run its `fleet_worker` test.
pub const TEST_WORKER_ARGS: [&str; 5] = [
    "fleet_worker",
    "--exact",
    "--ignored",
    "--nocapture",
    "--test-threads=1",
];

/// One worker's report.
#[derive(Debug)]
pub struct Report {
    /// Counters by name.
    pub counts: BTreeMap<String, u64>,
    /// Its view's phase at the end.
    pub phase: String,
    /// The whole line.
    pub line: String,
}

impl Report {
    /// A counter (0 if absent).
    pub fn get(&self, name: &str) -> u64 {
        self.counts.get(name).copied().unwrap_or(0)
    }
}

/// Waits for every worker and parses its report.
pub async fn reports(children: Vec<Child>) -> Vec<Report> {
    let mut out = Vec::new();
    for child in children {
        let output = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success(), "a worker failed: {stdout}");
        let line = stdout
            .lines()
            .find_map(|l| l.find("FLEET ").map(|at| l[at..].to_string()))
            .unwrap_or_else(|| panic!("no report from a worker: {stdout}"));
        let mut counts = BTreeMap::new();
        let mut phase = String::new();
        for kv in line.split(' ').skip(1) {
            if let Some((k, v)) = kv.split_once('=') {
                match v.parse() {
                    Ok(n) => {
                        counts.insert(k.to_string(), n);
                    }
                    Err(_) if k == "phase" => phase = v.to_string(),
                    Err(_) => {}
                }
            }
        }
        out.push(Report {
            counts,
            phase,
            line,
        });
    }
    out
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A `BB_FLEET_START_AT_MS` value `after` from now: workers spawned together wait for it
/// once their breaker is built, so a slow process start does not shift its window.
pub fn start_at(after: Duration) -> String {
    (unix_ms() + after.as_millis() as u64).to_string()
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn ms(name: &str, default: u64) -> Duration {
    Duration::from_millis(env_u64(name, default))
}

/// The worker: builds the shared breaker from `BB_FLEET_*` and calls the dependency
/// until its time is up, then prints its report. Returns at once in a process that is
/// not a worker.
pub async fn worker_main() {
    let (Ok(redis_url), Ok(mut dependency)) = (
        std::env::var("BB_FLEET_REDIS"),
        std::env::var("BB_FLEET_DEP"),
    ) else {
        return;
    };
    // A node with a broken network path: nothing listens on port 1 of the loopback.
    if env_u64("BB_FLEET_BROKEN", 0) == 1 {
        dependency = "127.0.0.1:1".to_string();
    }
    let name = std::env::var("BB_FLEET_NAME").unwrap_or_else(|_| "fleet".to_string());
    let mode = if env_u64("BB_FLEET_STRICT", 0) == 1 {
        Mode::Strict
    } else {
        Mode::LocalView(LocalView {
            refresh_interval: ms("BB_FLEET_REFRESH_MS", 200),
            flush_interval: ms("BB_FLEET_FLUSH_MS", 1_000),
            ..LocalView::default()
        })
    };
    let fallback = match std::env::var("BB_FLEET_FALLBACK").as_deref() {
        Ok("open") => Fallback::FailOpen,
        Ok("closed") => Fallback::FailClosed,
        _ => Fallback::LocalBreaker,
    };
    let mut config = Config::builder();
    // A failure rate (per cent, over a count window of `BB_FLEET_WINDOW` calls), beside
    // the streak rule.
    if let Some(rate) = std::env::var("BB_FLEET_RATE_PCT")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
    {
        let window = env_u64("BB_FLEET_WINDOW", 50) as u32;
        config = config
            .failure_rate(f64::from(rate) / 100.0)
            .count_window(window)
            .min_calls(window / 2);
    }
    let config = config
        .consecutive_failures(env_u64("BB_FLEET_CF", 5) as u32)
        .recovery_timeout(ms("BB_FLEET_RECOVERY_MS", 30_000))
        .half_open_timeout(ms("BB_FLEET_HALF_OPEN_MS", 30_000))
        .max_probes(env_u64("BB_FLEET_MAX_PROBES", 1) as u32)
        .required_successes(env_u64("BB_FLEET_REQUIRED", 1) as u32)
        .quorum(env_u64("BB_FLEET_QUORUM", 1) as u32)
        .build()
        .unwrap();
    // Rule 21: local open phases of this node (the default node id is the process's).
    let local_opens = Arc::new(AtomicU64::new(0));
    let seen = local_opens.clone();
    let breaker = RedisBreaker::builder(redis_url, name)
        .config(config)
        .mode(mode)
        .fallback(fallback)
        .timeout(ms("BB_FLEET_TIMEOUT_MS", 100))
        .probe_lease(ms("BB_FLEET_LEASE_MS", 2_000))
        .backoff(Backoff {
            min: Duration::from_millis(20),
            max: Duration::from_millis(200),
        })
        .listener(move |e: &breakerbox::Event<'_>| {
            if let breakerbox::EventKind::LocalOpened { .. } = e.kind {
                seen.fetch_add(1, Ordering::Relaxed);
            }
        })
        .build()
        .await
        .unwrap();
    // A common start (`BB_FLEET_START_AT_MS`, milliseconds since the Unix epoch, from
    // [`start_at`]): workers that took longer to start still run over the same window.
    if let Some(at) = std::env::var("BB_FLEET_START_AT_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        let now = unix_ms();
        if at > now {
            tokio::time::sleep(Duration::from_millis(at - now)).await;
        }
    }
    let run_for = ms("BB_FLEET_MILLIS", 3_000);
    let pace = ms("BB_FLEET_PACE_MS", 2);
    // Fixed rate: each caller starts a call every `pace` (at its own phase within the
    // first period), whatever the calls cost, as traffic that arrives from outside does.
    // Otherwise each caller waits `pace` after each call (a closed loop).
    let fixed_rate = env_u64("BB_FLEET_FIXED_RATE", 0) == 1;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for caller in 0..env_u64("BB_FLEET_CALLERS", 4) {
        let breaker = breaker.clone();
        let dependency = dependency.clone();
        let phase =
            pace.mul_f64(SplitMix::new(u64::from(std::process::id()) * 31 + caller).sample());
        tasks.push(tokio::spawn(async move {
            let mut c = [0u64; 5]; // admitted, probes, rejected, failed, fallback
            let mut blocked = Duration::ZERO;
            let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + phase, pace);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            while started.elapsed() < run_for {
                if fixed_rate {
                    ticks.tick().await;
                }
                let asked = Instant::now();
                let acquired = breaker.acquire().await;
                blocked = blocked.max(asked.elapsed());
                match acquired {
                    Ok(permit) => {
                        c[0] += 1;
                        c[4] += u64::from(permit.is_fallback());
                        let path = if permit.is_probe() {
                            c[1] += 1;
                            "/probe"
                        } else {
                            "/call"
                        };
                        let verdict = match get(&dependency, path).await {
                            Ok(200) => Verdict::Success,
                            _ => {
                                c[3] += 1;
                                Verdict::Failure
                            }
                        };
                        let recording = Instant::now();
                        permit.record(verdict).await;
                        blocked = blocked.max(recording.elapsed());
                    }
                    Err(_) => c[2] += 1,
                }
                if !fixed_rate {
                    tokio::time::sleep(pace).await;
                }
            }
            (c, blocked)
        }));
    }
    let mut totals = [0u64; 5];
    let mut blocked = Duration::ZERO;
    for task in tasks {
        let (c, b) = task.await.unwrap();
        for (t, n) in totals.iter_mut().zip(c) {
            *t += n;
        }
        blocked = blocked.max(b);
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    while breaker.is_degraded() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    breaker.flush().await;
    let stats = breaker.stats();
    println!(
        "FLEET admitted={} probes={} rejected={} failed={} fallback={} blocked_ms={} \
         outages={} repairs={} flushes={} redis_calls={} degraded={} local_opens={} phase={}",
        totals[0],
        totals[1],
        totals[2],
        totals[3],
        totals[4],
        blocked.as_millis(),
        stats.outages,
        stats.repairs,
        stats.flushes,
        stats.redis_calls,
        u8::from(breaker.is_degraded()),
        local_opens.load(Ordering::Relaxed),
        breaker.phase(),
    );
}

/// Polls the breaker's stored phase code (`HGET key phase`) until it is `phase`, and
/// returns when that was first seen (None after `within`).
pub async fn wait_for_stored_phase(
    server: &super::redis_server::RedisServer,
    key: &str,
    phase: &str,
    within: Duration,
) -> Option<Instant> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if server.command(&["HGET", key, "phase"]).as_deref() == Some(phase) {
            return Some(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    None
}

/// The settings of the multi-process tests: 3 failures trip, 300 ms open, 2 probes, 6
/// successes close, a 500 ms timeout, successes flushed every 20 ms, 6 callers; then
/// `extra`.
pub fn cap_settings<'a>(extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut env = vec![
        ("BB_FLEET_CF", "3"),
        ("BB_FLEET_RECOVERY_MS", "300"),
        ("BB_FLEET_HALF_OPEN_MS", "5000"),
        ("BB_FLEET_MAX_PROBES", "2"),
        ("BB_FLEET_REQUIRED", "6"),
        ("BB_FLEET_TIMEOUT_MS", "500"),
        ("BB_FLEET_FLUSH_MS", "20"),
        ("BB_FLEET_CALLERS", "6"),
    ];
    env.extend_from_slice(extra);
    env
}

/// The probe cap across processes, on the Redis at `redis` (one server, a cluster, a
/// primary behind Sentinels): `workers` processes (this test binary's `fleet_worker`)
/// share a breaker with `max_probes` (set in `settings`, with `BB_FLEET_MILLIS`) in front
/// of a dependency that fails, then recovers. The breaker trips and probes; at no time do
/// more than `max_probes` probe requests run at once, and every process ends closed.
pub async fn probes_stay_under_the_cap(
    redis: &str,
    workers: usize,
    max_probes: u64,
    settings: &[(&str, &str)],
) {
    let dependency = Dependency::start(false).await;
    dependency.set_delay(Duration::from_millis(30));
    let mut env = settings.to_vec();
    env.push(("BB_FLEET_MILLIS", "3000"));
    let children = spawn(workers, &TEST_WORKER_ARGS, redis, &dependency.addr, &env);
    // Failing first (the breaker trips and probes fail), then healthy (probes succeed).
    tokio::time::sleep(Duration::from_millis(900)).await;
    let healthy_from = Instant::now();
    dependency.set_healthy(true);
    let reports = reports(children).await;
    let probes: u64 = reports.iter().map(|r| r.get("probes")).sum();
    let max = dependency.probes_max();
    let lines: Vec<&str> = reports.iter().map(|r| r.line.as_str()).collect();
    eprintln!("probe requests {probes}, at most {max} at once; {lines:?}");
    assert!(
        probes >= 2,
        "half-open was reached and probed: {probes} probes, {lines:?}"
    );
    assert!(max >= 1);
    assert!(
        max <= max_probes,
        "{max} concurrent probes across {workers} processes (cap {max_probes})"
    );
    // Every process ends closed: the probes succeeded and the close reached them all.
    for r in &reports {
        assert_eq!(r.phase, breakerbox::Phase::Closed.as_str(), "{lines:?}");
        assert_eq!(r.get("degraded"), 0, "{lines:?}");
    }
    assert!(dependency.calls_since(healthy_from) > dependency.probes_since(healthy_from));
}
