//! Thousands of shared breakers across OS processes: each worker process makes one
//! [`RedisNode`] and a registry of breakers per host, sends uniform traffic over every
//! host, watches a few breakers the parent trips, and reports on its stdout.
//!
//! The parent (a test or a bench) spawns its own executable as workers with `BB_SCALE_*`
//! settings (a test binary runs its ignored `scale_worker` test; a bench checks
//! [`is_worker`] in `main`). A worker prints, one line each:
//! - `READY views=N rss_kb=K`: every host's view made (`K`: the resident memory they
//!   added); it then waits for a line on its stdin ([`Workers::go`]);
//! - `SEEN i unix_us`: the watched breaker `watch-i` turned open in this process's view;
//! - `CREATED at_ms=T took_ms=D`, `STARTED at_ms=T`: when the views were made (and how long
//!   that took) and when the traffic began, in ms since the worker's outage log was made;
//! - `OUTAGES n=N first_ms=F last_ms=L error=E`: outage episodes its breakers began, by
//!   their first error (none on a healthy Redis);
//! - `DONE calls=N elapsed_ms=M views=V node=B rejected=R errors=E`: at the end, after the
//!   traffic and after touching `BB_SCALE_EXTRA` new hosts (which evict idle views).

#![allow(dead_code)]
// Tests and benches measure real elapsed time against real servers.
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use breakerbox::contract::Breaker;
use breakerbox::{Config, Event, EventKind, Listener, Phase};
use breakerbox_redis::{RedisBreaker, RedisNode};

/// The prefix of every key the scale workers use.
pub const PREFIX: &str = "scale:";

/// The arguments that make a test binary run its `scale_worker` test.
pub const TEST_WORKER_ARGS: [&str; 5] = [
    "scale_worker",
    "--exact",
    "--ignored",
    "--nocapture",
    "--test-threads=1",
];

/// Microseconds since the Unix epoch (the same clock in every process of the machine).
pub fn unix_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// Whether this process is a scale worker (a bench's `main` asks).
pub fn is_worker() -> bool {
    std::env::var_os("BB_SCALE_REDIS").is_some()
}

/// The breakers' template: 3 failures in a row trip, and a trip stays open a minute.
pub fn template() -> Config {
    Config::builder()
        .consecutive_failures(3)
        .recovery_timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// The host names: `host-0` ...
pub fn host(i: usize) -> String {
    format!("host-{i}")
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn say(line: String) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// A worker's whole run (see the module docs), settings from `BB_SCALE_*`:
/// `REDIS` (url), `BREAKERS` (hosts it serves; see `HOSTS` below), `CAPACITY` (the registry's), `RATE` (calls per
/// second, over every host in turn), `MILLIS` (how long), `WATCH` (breakers `watch-i`
/// watched), `EXTRA` (new hosts touched at the end), `TIMEOUT_MS` (the breakers' Redis
/// timeout, default 100), `HOSTS` and `STRIDE` (worker `INDEX` serves `BREAKERS` hosts
/// from `INDEX * STRIDE` on, modulo `HOSTS`; by default every worker serves them all).
pub async fn worker_main() {
    let url = std::env::var("BB_SCALE_REDIS").unwrap();
    let n = env_u64("BB_SCALE_BREAKERS", 10_000) as usize;
    let watch = env_u64("BB_SCALE_WATCH", 20) as usize;
    let capacity = env_u64("BB_SCALE_CAPACITY", (n + watch + 64) as u64) as usize;
    let rate = env_u64("BB_SCALE_RATE", 5_000);
    let millis = env_u64("BB_SCALE_MILLIS", 5_000);
    let extra = env_u64("BB_SCALE_EXTRA", 0) as usize;
    let timeout = Duration::from_millis(env_u64("BB_SCALE_TIMEOUT_MS", 100));
    let node = RedisNode::connect(&url).unwrap();
    let log = Arc::new(OutageLog::default());
    let registry = node
        .registry_with(template(), capacity, move |b| {
            b.prefix(PREFIX).timeout(timeout)
        })
        .unwrap()
        .with_listener(log.clone());
    let watched: Vec<RedisBreaker> = (0..watch)
        .map(|i| registry.get(&format!("watch-{i}")).unwrap())
        .collect();
    // Worker i serves hosts from i * STRIDE on, `n` of them, of `HOSTS` in all (by
    // default every worker serves every host).
    let total = env_u64("BB_SCALE_HOSTS", n as u64) as usize;
    let first = env_u64("BB_SCALE_INDEX", 0) as usize * env_u64("BB_SCALE_STRIDE", 0) as usize;
    let hosts: Vec<String> = (0..n).map(|i| host((first + i) % total.max(1))).collect();
    let before = rss_kb();
    let made = Instant::now();
    for h in &hosts {
        registry.get(h).unwrap();
    }
    say(format!(
        "CREATED at_ms={} took_ms={}",
        log.made.elapsed().as_millis(),
        made.elapsed().as_millis()
    ));
    let rss = rss_kb().saturating_sub(before);
    // Every view's first read answered (thousands of them queue up at first).
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline
        && registry
            .breakers()
            .iter()
            .any(|(_, b)| b.stats().redis_calls == 0)
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    say(format!("READY views={} rss_kb={}", registry.len(), rss));
    // Every worker starts its traffic together, when the parent says so.
    let _ = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line)
    })
    .await;
    let watcher = tokio::spawn(async move {
        let mut seen = vec![false; watched.len()];
        while seen.iter().any(|s| !s) {
            for (i, b) in watched.iter().enumerate() {
                if !seen[i] && b.phase() == Phase::Open {
                    seen[i] = true;
                    say(format!("SEEN {i} {}", unix_us()));
                }
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        watched
    });
    let started = Instant::now();
    say(format!("STARTED at_ms={}", log.made.elapsed().as_millis()));
    let (mut calls, mut rejected, mut errors) = (0u64, 0u64, 0u64);
    let mut next = 0usize;
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    while started.elapsed() < Duration::from_millis(millis) {
        tick.tick().await;
        // Calls due by now at `rate`: bursts catch up after a slow tick.
        let due = rate * started.elapsed().as_micros() as u64 / 1_000_000;
        while calls + rejected + errors < due {
            let Ok(breaker) = registry.get(&hosts[next % n]) else {
                errors += 1;
                continue;
            };
            next += 1;
            match breaker.acquire_now_or_later().await {
                Ok(permit) => {
                    permit.success().await;
                    calls += 1;
                }
                Err(_) => rejected += 1,
            }
        }
    }
    let elapsed = started.elapsed();
    for i in 0..extra {
        let _ = registry.get(&format!("extra-{i}"));
    }
    // Evicted views' tasks end once they notice.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let watched = tokio::time::timeout(Duration::from_secs(2), watcher)
        .await
        .ok()
        .and_then(Result::ok);
    let (mut outages, mut flushes, mut dropped, mut fallback) = (0, 0, 0, 0);
    for (_, b) in registry.breakers() {
        let s = b.stats();
        outages += s.outages;
        flushes += s.flushes;
        dropped += s.dropped_outcomes;
        fallback += s.fallback_calls;
    }
    for line in log.lines() {
        say(line);
    }
    say(format!(
        "DONE calls={calls} elapsed_ms={} views={} node={} rejected={rejected} errors={errors} outages={outages} flushes={flushes} dropped={dropped} fallback={fallback} watched_all={}",
        elapsed.as_millis(),
        registry.len(),
        node.breakers(),
        watched.is_some()
    ));
}

/// The outage episodes a worker's breakers started, by their first error: how many, and
/// when the first and the last began (ms since the log was made). A healthy Redis must
/// cause none; when some happen, these lines say why.
pub struct OutageLog {
    made: Instant,
    by_error: Mutex<BTreeMap<String, (u64, u128, u128)>>,
}

impl Default for OutageLog {
    fn default() -> Self {
        OutageLog {
            made: Instant::now(),
            by_error: Mutex::new(BTreeMap::new()),
        }
    }
}

impl OutageLog {
    /// `OUTAGES n=N first_ms=F last_ms=L error=...`, one line per distinct error.
    pub fn lines(&self) -> Vec<String> {
        self.by_error
            .lock()
            .unwrap()
            .iter()
            .map(|(error, (n, first, last))| {
                format!("OUTAGES n={n} first_ms={first} last_ms={last} error={error}")
            })
            .collect()
    }
}

impl Listener for OutageLog {
    fn on_event(&self, event: &Event<'_>) {
        if let EventKind::OutageStarted { error } = &event.kind {
            let at = self.made.elapsed().as_millis();
            let mut map = self.by_error.lock().unwrap();
            let entry = map.entry(error.clone()).or_insert((0, at, at));
            entry.0 += 1;
            entry.2 = at;
        }
    }
}

/// A worker's stdout line, with the worker's index and when the parent read it.
pub struct Line {
    /// Which worker.
    pub worker: usize,
    /// The line.
    pub text: String,
}

/// The workers, killed when dropped (a test that fails leaves none behind).
pub struct Workers(pub Vec<Child>);

impl Workers {
    /// Tells every worker to start its traffic (each waits for this after `READY`).
    pub fn go(&mut self) {
        for child in &mut self.0 {
            if let Some(stdin) = child.stdin.as_mut() {
                let _ = stdin.write_all(b"GO\n");
                let _ = stdin.flush();
            }
        }
    }

    /// Waits for every worker to exit.
    pub fn wait(mut self) {
        for child in &mut self.0 {
            let _ = child.wait();
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Spawns `n` workers (this executable with `args` and `env`), their stdout lines
/// arriving on the returned channel.
pub fn spawn(
    n: usize,
    args: &[&str],
    redis: &str,
    env: &[(&str, String)],
) -> (Workers, mpsc::Receiver<Line>) {
    let exe = std::env::current_exe().unwrap();
    let (tx, rx) = mpsc::channel();
    let children = (0..n)
        .map(|worker| {
            let mut child = Command::new(&exe)
                .args(args)
                .env("BB_SCALE_REDIS", redis)
                .env("BB_SCALE_INDEX", worker.to_string())
                .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let stdout: ChildStdout = child.stdout.take().unwrap();
            let tx = tx.clone();
            std::thread::spawn(move || {
                for text in BufReader::new(stdout).lines().map_while(Result::ok) {
                    // A test binary's worker prints `test scale_worker ... ` first.
                    let text = match text.split_once(" ... ") {
                        Some((_, rest)) if text.starts_with("test ") => rest.to_string(),
                        _ => text,
                    };
                    if tx.send(Line { worker, text }).is_err() {
                        return;
                    }
                }
            });
            child
        })
        .collect();
    (Workers(children), rx)
}

/// Waits (at most `within`) for a line starting with `prefix` from each of `n` workers;
/// other lines go to `other`.
pub fn wait_all(
    rx: &mpsc::Receiver<Line>,
    n: usize,
    prefix: &str,
    within: Duration,
    other: &mut Vec<Line>,
) -> Vec<(usize, String)> {
    let deadline = Instant::now() + within;
    let mut got: Vec<(usize, String)> = Vec::new();
    while got.len() < n {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = rx.recv_timeout(left) else {
            panic!("timed out waiting for {prefix} from every worker: got {got:?}");
        };
        if line.text.starts_with(prefix) {
            got.push((line.worker, line.text));
        } else {
            other.push(line);
        }
    }
    got
}

/// The value of `key=` in a report line.
pub fn field(line: &str, key: &str) -> u64 {
    let prefix = format!("{key}=");
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&prefix))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {line}"))
}

/// Trips the watched breakers one by one (`every` apart) through `node`, returning when
/// each trip's tripping failure was recorded (Unix microseconds, just before the call).
pub async fn trip_watched(node: &RedisNode, watch: usize, every: Duration) -> Vec<u64> {
    let mut at = Vec::new();
    for i in 0..watch {
        let b = node
            .breaker(format!("watch-{i}"))
            .config(template())
            .prefix(PREFIX)
            .build()
            .await
            .unwrap();
        for _ in 0..2 {
            b.acquire_now_or_later().await.unwrap().failure().await;
        }
        b.flush().await;
        let permit = b.acquire_now_or_later().await.unwrap();
        at.push(unix_us());
        permit.failure().await;
        b.flush().await;
        tokio::time::sleep(every).await;
    }
    at
}

/// Trip propagation delays (microseconds): per `SEEN i t` line, `t - tripped[i]`.
pub fn propagation(lines: &[Line], tripped: &[u64]) -> Vec<u64> {
    let mut out: Vec<u64> = lines
        .iter()
        .filter_map(|l| {
            let mut w = l.text.strip_prefix("SEEN ")?.split_whitespace();
            let i: usize = w.next()?.parse().ok()?;
            let t: u64 = w.next()?.parse().ok()?;
            Some(t.saturating_sub(*tripped.get(i)?))
        })
        .collect();
    out.sort_unstable();
    out
}

/// The `q` quantile of sorted `v`.
pub fn quantile(v: &[u64], q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    let i = ((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

/// Collects lines until every worker said `DONE` (at most `within`).
pub fn drain_until_done(
    rx: &mpsc::Receiver<Line>,
    n: usize,
    within: Duration,
    other: &mut Vec<Line>,
) -> Vec<(usize, String)> {
    wait_all(rx, n, "DONE", within, other)
}
