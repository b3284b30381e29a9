//! Redis commands per protected call, and trip propagation time, against a real
//! redis-server spawned on a free loopback port.
//!
//! ```text
//! cargo bench -p breakerbox-redis --bench redis_commands
//! ```
//!
//! Reports (read from `INFO commandstats`, the INFO calls themselves excluded):
//! - commands per call in the steady closed state, 4 nodes at >= 1,000 calls/s each, in
//!   local-view mode (target <= 0.01) and in strict mode (one script call per acquire and
//!   per outcome);
//! - commands per rejected call while open (target 0);
//! - time for a trip on one node to reach every node's view (target p99 <= 100 ms);
//! - fleet overshoot: OS processes (4 and 8, 4 callers each) share a breaker
//!   (`consecutive_failures(5)`) in front of a loopback dependency that dies; the calls
//!   that still reach it before every node rejects, local view against strict mode
//!   (goal: local view within 1.5 x strict), the modes taking turns run by run
//!   (`BB_OVERSHOOT_RUNS`, default 7), with the fleet's call rate before the death. Two
//!   kinds of traffic: each caller calls again 2 ms after its last call ends (a closed
//!   loop: strict mode's round trips slow its own callers, so it offers less traffic),
//!   and each caller starts a call every 2 ms whatever the calls cost (the same offered
//!   traffic in both modes, as requests arriving from outside).

// A benchmark measures wall-clock time.
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

#[path = "../tests/support/redis_server.rs"]
mod redis_server;

#[path = "../tests/support/fleet.rs"]
mod fleet;

use std::time::{Duration, Instant};

use breakerbox::{Config, Phase};
use breakerbox_redis::{Mode, RedisBreaker};
use redis_server::RedisServer;

const NODES: usize = 4;

/// (script calls, every command including those the scripts run), INFO excluded.
fn commands(server: &RedisServer) -> (u64, u64) {
    (
        server.command_calls("evalsha"),
        server
            .total_command_calls()
            .saturating_sub(server.command_calls("info")),
    )
}

fn per(used: (u64, u64), before: (u64, u64), calls: u64) -> String {
    let calls = calls.max(1) as f64;
    let (scripts, all) = (used.0 - before.0, used.1 - before.1);
    format!(
        "{scripts} EVALSHA = {:.5}/call; {all} commands incl. inside scripts = {:.5}/call",
        scripts as f64 / calls,
        all as f64 / calls
    )
}

async fn nodes(server: &RedisServer, name: &str, mode: Mode, config: &Config) -> Vec<RedisBreaker> {
    let mut nodes = Vec::new();
    for _ in 0..NODES {
        nodes.push(
            RedisBreaker::builder(server.url(), name)
                .config(config.clone())
                .mode(mode)
                .build()
                .await
                .unwrap(),
        );
    }
    nodes
}

/// Every node makes `per_ms` calls each millisecond for `run`, every `fail_every`-th of
/// each node failing (0: none); returns the number of calls and the Redis commands they
/// caused.
async fn steady(
    server: &RedisServer,
    nodes: &[RedisBreaker],
    per_ms: usize,
    run: Duration,
    fail_every: u64,
) -> (u64, String, f64) {
    let before = commands(server);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for node in nodes {
        let node = node.clone();
        tasks.push(tokio::spawn(async move {
            let mut calls = 0u64;
            let mut tick = tokio::time::interval(Duration::from_millis(1));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            while started.elapsed() < run {
                tick.tick().await;
                for _ in 0..per_ms {
                    if let Ok(permit) = node.acquire().await {
                        calls += 1;
                        if fail_every > 0 && calls.is_multiple_of(fail_every) {
                            permit.failure().await;
                        } else {
                            permit.success().await;
                        }
                    }
                }
            }
            calls
        }));
    }
    let mut calls = 0;
    for t in tasks {
        calls += t.await.unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    for node in nodes {
        node.flush().await;
    }
    let used = per(commands(server), before, calls);
    (calls, used, calls as f64 / elapsed / nodes.len() as f64)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Calls that reach the dependency after it dies, in one run of `processes` workers, and
/// the fleet's call rate (calls per millisecond) just before it died.
async fn overshoot(
    server: &RedisServer,
    processes: usize,
    strict: bool,
    fixed_rate: bool,
    run: usize,
) -> (usize, f64) {
    let dependency = fleet::Dependency::start(true).await;
    let name = format!("overshoot-{processes}-{strict}-{fixed_rate}-{run}");
    let children = fleet::spawn(
        processes,
        &[],
        &server.url(),
        &dependency.addr,
        &[
            ("BB_FLEET_NAME", name.as_str()),
            ("BB_FLEET_STRICT", if strict { "1" } else { "0" }),
            ("BB_FLEET_MILLIS", "3000"),
            ("BB_FLEET_REFRESH_MS", "1000"),
            ("BB_FLEET_FIXED_RATE", if fixed_rate { "1" } else { "0" }),
        ],
    );
    dependency.wait_for_calls(100 * processes).await;
    let before = dependency.calls();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rate = (dependency.calls() - before) as f64 / 300.0;
    let died = Instant::now();
    dependency.set_healthy(false);
    let reports = fleet::reports(children).await;
    assert!(reports.iter().all(|r| r.phase == "open"), "{reports:?}");
    (dependency.calls_since(died), rate)
}

fn median(mut v: Vec<usize>) -> usize {
    v.sort_unstable();
    v[v.len() / 2]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    if fleet::is_worker() {
        runtime.block_on(fleet::worker_main());
        return;
    }
    runtime.block_on(bench());
}

async fn bench() {
    let server = RedisServer::start();
    if std::env::var("BB_BENCH_ONLY").as_deref() == Ok("overshoot") {
        return fleet_overshoot(&server).await;
    }
    let config = Config::builder()
        .consecutive_failures(3)
        .recovery_timeout(Duration::from_secs(600))
        .build()
        .unwrap();
    println!("redis-server on port {}; {NODES} nodes", server.port());

    // Steady closed state, local view (the default mode).
    let local = nodes(&server, "steady-local", Mode::default(), &config).await;
    steady(&server, &local, 2, Duration::from_millis(500), 0).await; // warm up
    let flushes: u64 = local.iter().map(|n| n.stats().flushes).sum();
    let (calls, used, rate) = steady(&server, &local, 2, Duration::from_secs(5), 0).await;
    let flushes = local.iter().map(|n| n.stats().flushes).sum::<u64>() - flushes;
    let refreshes: u64 = local.iter().map(|n| n.stats().redis_calls).sum();
    println!(
        "  ({flushes} batches sent by 4 nodes in 5 s; {refreshes} script calls in all since start)"
    );
    println!("closed, local view : {calls} calls ({rate:.0}/s per node): {used} (target <= 0.01)");
    let (calls, used, rate) = steady(&server, &local, 2, Duration::from_secs(3), 100).await;
    println!("  with 1 % failures: {calls} calls ({rate:.0}/s per node): {used}");

    // The local hot path: one task, back to back.
    let n = 1_000_000u32;
    let started = Instant::now();
    for _ in 0..n {
        local[0].acquire().await.unwrap().success().await;
    }
    println!(
        "hot path, closed   : {:.0} ns per acquire + success (local view, one task)",
        started.elapsed().as_nanos() as f64 / f64::from(n)
    );

    // Steady closed state, strict mode (one script call per acquire and per outcome).
    let strict = nodes(&server, "steady-strict", Mode::Strict, &config).await;
    let (calls, used, rate) = steady(&server, &strict, 2, Duration::from_secs(3), 0).await;
    println!("closed, strict     : {calls} calls ({rate:.0}/s per node): {used}");

    // Open: rejections decided locally.
    for _ in 0..3 {
        local[0].acquire().await.unwrap().failure().await;
    }
    local[0].flush().await;
    for node in &local {
        let deadline = Instant::now() + Duration::from_secs(5);
        while node.phase() != Phase::Open && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    let before = commands(&server);
    let mut rejected = 0u64;
    for node in &local {
        for _ in 0..25_000 {
            if node.acquire().await.is_err() {
                rejected += 1;
            }
        }
    }
    let used = per(commands(&server), before, rejected);
    println!("open               : {rejected} rejected calls: {used} (target 0)");
    let started = Instant::now();
    for _ in 0..n {
        let _ = local[0].acquire().await;
    }
    println!(
        "hot path, open     : {:.0} ns per rejected acquire (local view, one task)",
        started.elapsed().as_nanos() as f64 / f64::from(n)
    );

    // Trip propagation: a trip on node 0 reaching every node's view.
    let prop = nodes(&server, "propagation", Mode::default(), &config).await;
    let mut samples = Vec::new();
    for _ in 0..100 {
        prop[0].reset().await.unwrap();
        for node in &prop {
            let deadline = Instant::now() + Duration::from_secs(5);
            while node.phase() != Phase::Closed && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        for _ in 0..2 {
            prop[0].acquire().await.unwrap().failure().await;
        }
        // The third failure trips the breaker: measure from the moment it is recorded.
        let permit = prop[0].acquire().await.unwrap();
        let t0 = Instant::now();
        permit.failure().await;
        let watchers: Vec<_> = prop
            .iter()
            .map(|node| {
                let node = node.clone();
                std::thread::spawn(move || {
                    let deadline = t0 + Duration::from_secs(5);
                    while node.phase() != Phase::Open && Instant::now() < deadline {
                        std::thread::sleep(Duration::from_micros(50));
                    }
                    t0.elapsed()
                })
            })
            .collect();
        for w in watchers {
            samples.push(w.join().unwrap());
        }
    }
    samples.sort();
    println!(
        "trip propagation   : {} samples, p50 {:?}, p99 {:?}, max {:?} (target p99 <= 100 ms)",
        samples.len(),
        percentile(&samples, 0.5),
        percentile(&samples, 0.99),
        samples[samples.len() - 1]
    );

    fleet_overshoot(&server).await;
}

/// Fleet overshoot: calls that reach a dead dependency before every node rejects. The two
/// modes take turns, run by run, so a change in the machine's load falls on both.
async fn fleet_overshoot(server: &RedisServer) {
    let runs: usize = std::env::var("BB_OVERSHOOT_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    for (fixed_rate, arrivals) in [
        (false, "each caller 2 ms after its last call"),
        (true, "each caller every 2 ms"),
    ] {
        for processes in [4usize, 8] {
            let (mut local, mut strict) = (Vec::new(), Vec::new());
            let (mut local_rate, mut strict_rate) = (0.0, 0.0);
            for run in 0..runs {
                let (calls, rate) = overshoot(server, processes, false, fixed_rate, run).await;
                local.push(calls);
                local_rate += rate / runs as f64;
                let (calls, rate) = overshoot(server, processes, true, fixed_rate, run).await;
                strict.push(calls);
                strict_rate += rate / runs as f64;
            }
            let (l, s) = (median(local.clone()), median(strict.clone()));
            println!(
                "overshoot, {processes} processes x 4 callers, {arrivals}: local view median \
                 {l} (runs {local:?}, {local_rate:.1} calls/ms before); strict median {s} \
                 (runs {strict:?}, {strict_rate:.1} calls/ms before); ratio {:.2}",
                l as f64 / s.max(1) as f64
            );
        }
    }
}
