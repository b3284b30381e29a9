//! Thousands of shared breakers: 4 OS processes, each with one `RedisNode` and a registry
//! of breakers per host (10,000 hosts), uniform traffic over every host, against a real
//! redis-server spawned on a free loopback port.
//!
//! ```text
//! cargo bench -p breakerbox-redis --bench scale
//! ```
//!
//! Reports:
//! - memory per local view (resident bytes a view adds to its process);
//! - Redis memory per breaker (`MEMORY USAGE` of a breaker's hash, averaged over hosts);
//! - script calls (`EVALSHA`, `EVAL`, their `_RO` forms and `SCRIPT LOAD`, from `INFO
//!   commandstats`: flushes, reads, acquires, everything the nodes sent) per protected call in the steady
//!   closed state, every process at `BB_SCALE_RATE` calls/s (default 5,000) spread over
//!   every host (goal <= 0.01);
//! - connections and subscriptions on the server (`CLIENT LIST`, `PUBSUB NUMPAT`);
//! - trip propagation: the parent trips watched breakers one by one while the traffic
//!   runs; the time until each process's view turns open (goal p99 <= 100 ms).
//!
//! Settings: `BB_SCALE_BREAKERS` (10,000), `BB_SCALE_RATE`, `BB_SCALE_MILLIS` (the
//! traffic's length, default 24,000: the steady window, its middle third, holds two quiet flush periods), `BB_SCALE_WATCH` (trips, default 25).

// A benchmark measures wall-clock time.
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

#[path = "../tests/support/redis_server.rs"]
mod redis_server;

#[path = "../tests/support/scale.rs"]
mod scale;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use breakerbox_redis::RedisNode;
use redis_server::RedisServer;

const WORKERS: usize = 4;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    if scale::is_worker() {
        runtime.block_on(scale::worker_main());
        return;
    }
    runtime.block_on(bench());
}

/// A thread that sends `PING` every 10 ms on a connection of its own and keeps the round
/// trips: a round trip near the breakers' 100 ms timeout means the server (or the whole
/// machine) stalled, which no breaker can help; outages without one are the breakers'.
struct Stalls {
    rtts: Arc<Mutex<Vec<u64>>>,
    stop: Arc<AtomicBool>,
}

impl Stalls {
    fn watch(port: u16) -> Stalls {
        let rtts = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (out, done) = (rtts.clone(), stop.clone());
        std::thread::spawn(move || {
            let Ok(stream) = TcpStream::connect(("127.0.0.1", port)) else {
                return;
            };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut stream = stream;
            let mut line = String::new();
            while !done.load(Ordering::Relaxed) {
                let t = Instant::now();
                if stream.write_all(b"PING\r\n").is_err() {
                    return;
                }
                line.clear();
                if reader.read_line(&mut line).is_err() {
                    return;
                }
                out.lock().unwrap().push(t.elapsed().as_micros() as u64);
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        Stalls { rtts, stop }
    }

    fn report(&self) -> String {
        self.stop.store(true, Ordering::Relaxed);
        let mut v = self.rtts.lock().unwrap().clone();
        v.sort_unstable();
        let over = v.iter().filter(|&&t| t >= 50_000).count();
        format!(
            "{} pings: p99 {:.1} ms, max {:.1} ms, {over} at 50 ms or more",
            v.len(),
            scale::quantile(&v, 0.99) as f64 / 1000.0,
            v.last().copied().unwrap_or(0) as f64 / 1000.0
        )
    }
}

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn number(reply: Option<String>) -> u64 {
    reply
        .and_then(|r| r.trim().trim_start_matches(':').parse().ok())
        .unwrap_or(0)
}

async fn bench() {
    let server = RedisServer::start();
    let breakers = setting("BB_SCALE_BREAKERS", 10_000);
    let rate = setting("BB_SCALE_RATE", 5_000);
    let millis = setting("BB_SCALE_MILLIS", 24_000);
    let watch = setting("BB_SCALE_WATCH", 25);
    println!(
        "redis-server on port {}; {WORKERS} processes x {breakers} breakers, {rate} calls/s each",
        server.port()
    );
    let env = vec![
        ("BB_SCALE_BREAKERS", breakers.to_string()),
        ("BB_SCALE_RATE", rate.to_string()),
        ("BB_SCALE_MILLIS", millis.to_string()),
        ("BB_SCALE_WATCH", watch.to_string()),
    ];
    let stalls = Stalls::watch(server.port());
    let (mut children, rx) = scale::spawn(WORKERS, &[], &server.url(), &env);
    let mut other = Vec::new();
    let ready = scale::wait_all(&rx, WORKERS, "READY", Duration::from_secs(600), &mut other);
    children.go();
    let started = Instant::now();
    let view_bytes: Vec<u64> = ready
        .iter()
        .map(|(_, l)| scale::field(l, "rss_kb") * 1024 / scale::field(l, "views").max(1))
        .collect();
    // Steady state: skip the first seconds (every view's first refresh and flush), then
    // count script calls over a window without trips.
    let settle = Duration::from_millis(millis / 4);
    let window = Duration::from_millis(millis / 3);
    tokio::time::sleep(settle).await;
    let scripts0 = server.script_calls_patiently().unwrap();
    let t0 = Instant::now();
    tokio::time::sleep(window).await;
    let scripts1 = server.script_calls_patiently().unwrap();
    let measured = t0.elapsed();
    let list = server
        .command_patiently(&["CLIENT", "LIST"], 20)
        .unwrap_or_default();
    let clients = list.lines().filter(|l| !l.is_empty()).count() - 1;
    let subscribers = list.lines().filter(|l| l.contains("psub=1")).count();
    let patterns = number(server.command_patiently(&["PUBSUB", "NUMPAT"], 20));
    // Trips while the traffic runs.
    let node = RedisNode::connect(&server.url()).unwrap();
    let tripped = scale::trip_watched(&node, watch as usize, Duration::from_millis(100)).await;
    let done = scale::drain_until_done(&rx, WORKERS, Duration::from_secs(120), &mut other);
    children.wait();
    let delays = scale::propagation(&other, &tripped);
    let calls: u64 = done.iter().map(|(_, l)| scale::field(l, "calls")).sum();
    let elapsed_ms = done
        .iter()
        .map(|(_, l)| scale::field(l, "elapsed_ms"))
        .max()
        .unwrap_or(1);
    let fleet_rate = calls as f64 * 1000.0 / elapsed_ms as f64;
    let window_calls = fleet_rate * measured.as_secs_f64();
    let scripts = scripts1 - scripts0;
    let mut usage = Vec::new();
    for i in (0..breakers as usize).step_by((breakers as usize / 200).max(1)) {
        let key = format!("{}{{{}}}", scale::PREFIX, scale::host(i));
        usage.push(number(
            server.command_patiently(&["MEMORY", "USAGE", &key, "SAMPLES", "0"], 20),
        ));
    }
    let keys = number(server.command_patiently(&["DBSIZE"], 20));
    let avg = |v: &[u64]| v.iter().sum::<u64>() / (v.len() as u64).max(1);
    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| memory per local view (RSS added / views, per process) | {:?} bytes |",
        view_bytes
    );
    println!(
        "| Redis memory per breaker (MEMORY USAGE, avg of {}) | {} bytes ({} keys) |",
        usage.len(),
        avg(&usage),
        keys
    );
    println!(
        "| script calls per protected call, steady closed | {scripts} script calls / {window_calls:.0} calls = {:.5} over {:.1} s |",
        scripts as f64 / window_calls.max(1.0),
        measured.as_secs_f64()
    );
    println!("| fleet call rate | {fleet_rate:.0} calls/s |");
    println!(
        "| connections / pattern subscriptions on the server | {clients} / {patterns} ({subscribers} subscribed clients) |"
    );
    println!(
        "| trip propagation to every process ({} samples of {}) | p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms |",
        delays.len(),
        watch as usize * WORKERS,
        scale::quantile(&delays, 0.5) as f64 / 1000.0,
        scale::quantile(&delays, 0.99) as f64 / 1000.0,
        delays.last().copied().unwrap_or(0) as f64 / 1000.0
    );
    println!(
        "| redis PING every 10 ms from the parent, over the run | {} |",
        stalls.report()
    );
    for (w, l) in &done {
        println!("worker {w}: {l}");
    }
    for l in other.iter().filter(|l| !l.text.starts_with("SEEN ")) {
        println!("worker {}: {}", l.worker, l.text);
    }
    let _ = started;
}
