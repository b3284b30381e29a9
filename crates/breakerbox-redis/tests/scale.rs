//! 10,000 shared breakers across 4 OS processes (each process serving 5,000 of them, so
//! each breaker is shared by two; 5 watched ones by all four), each process one
//! `RedisNode`: one
//! connection and one subscription per process, script calls per protected call in the
//! steady closed state far below one per breaker, idle views evicted, abandoned keys
//! expiring, and a trip on one process seen by the others.
//!
//! The workers are this test binary again, running the ignored `scale_worker` test with
//! `BB_SCALE_*` settings (see `support/scale.rs`).

#![allow(clippy::unwrap_used)] // tests unwrap
// Tests measure real elapsed time against real servers.
#![allow(clippy::disallowed_methods)]

#[path = "support/redis_server.rs"]
mod redis_server;

#[path = "support/scale.rs"]
mod scale;

use std::time::{Duration, Instant};

use breakerbox_redis::RedisNode;
use redis_server::RedisServer;

const WORKERS: usize = 4;
/// Breakers in Redis, shared by the processes.
const HOSTS: usize = 10_000;
/// Each process serves half of them, from its own offset: every breaker is shared by
/// two processes (and the watched ones by all four).
const BREAKERS: usize = HOSTS / 2;
const WATCH: usize = 5;
const EXTRA: usize = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a worker process, started by the other tests of this file"]
async fn scale_worker() {
    scale::worker_main().await;
}

fn number(reply: Option<String>) -> i64 {
    reply
        .unwrap()
        .trim()
        .trim_start_matches(':')
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_breakers_across_four_processes() {
    let began = Instant::now();
    let server = RedisServer::start();
    let capacity = BREAKERS + WATCH + 64;
    let env = vec![
        ("BB_SCALE_BREAKERS", BREAKERS.to_string()),
        ("BB_SCALE_HOSTS", HOSTS.to_string()),
        ("BB_SCALE_STRIDE", (HOSTS / WORKERS).to_string()),
        ("BB_SCALE_CAPACITY", capacity.to_string()),
        ("BB_SCALE_RATE", "1000".to_string()),
        // A debug build on a shared machine: a slow answer is no outage here.
        ("BB_SCALE_TIMEOUT_MS", "2000".to_string()),
        ("BB_SCALE_MILLIS", "7000".to_string()),
        ("BB_SCALE_WATCH", WATCH.to_string()),
        ("BB_SCALE_EXTRA", EXTRA.to_string()),
    ];
    let (mut children, rx) = scale::spawn(WORKERS, &scale::TEST_WORKER_ARGS, &server.url(), &env);
    let mut other = Vec::new();
    let ready = scale::wait_all(&rx, WORKERS, "READY", Duration::from_secs(180), &mut other);
    children.go();
    eprintln!("every view made after {:?}", began.elapsed());
    for (_, line) in &ready {
        assert!(scale::field(line, "views") as usize >= BREAKERS, "{line}");
    }
    // Past every view's first read and first flush: the steady closed state.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let scripts0 = server.script_calls_patiently().unwrap();
    let t0 = Instant::now();
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let scripts = server.script_calls_patiently().unwrap() - scripts0;
    let window = t0.elapsed();
    let list = server.command_patiently(&["CLIENT", "LIST"], 20).unwrap();
    let clients = list.lines().filter(|l| !l.is_empty()).count() - 1;
    assert_eq!(
        clients,
        2 * WORKERS,
        "one connection and one subscription per process:\n{list}"
    );
    let subscribed = list.lines().filter(|l| l.contains(" psub=1 ")).count();
    assert_eq!(
        subscribed, WORKERS,
        "one pattern subscription each:\n{list}"
    );
    // Every process subscribes to the same pattern.
    assert_eq!(
        number(server.command_patiently(&["PUBSUB", "NUMPAT"], 20)),
        1
    );
    // Trips while the traffic runs, through a fifth node.
    let node = RedisNode::connect(&server.url()).unwrap();
    let tripped = scale::trip_watched(&node, WATCH, Duration::from_millis(50)).await;
    let done = scale::drain_until_done(&rx, WORKERS, Duration::from_secs(60), &mut other);
    children.wait();
    let mut calls = 0;
    let mut elapsed_ms = 1;
    for (_, line) in &done {
        eprintln!("{line}");
        calls += scale::field(line, "calls");
        elapsed_ms = elapsed_ms.max(scale::field(line, "elapsed_ms"));
        assert_eq!(scale::field(line, "errors"), 0, "{line}");
        assert_eq!(
            scale::field(line, "rejected"),
            0,
            "closed all along: {line}"
        );
        // The extra hosts evicted idle views: the registry stays at its capacity.
        assert_eq!(scale::field(line, "views") as usize, capacity, "{line}");
        assert!(scale::field(line, "node") as usize <= capacity, "{line}");
        assert!(
            line.ends_with("watched_all=true"),
            "every trip seen: {line}"
        );
    }
    let rate = calls as f64 * 1000.0 / elapsed_ms as f64;
    let per_call = scripts as f64 / (rate * window.as_secs_f64());
    eprintln!("{scripts} script calls in {window:?} at {rate:.0} calls/s: {per_call:.5} per call");
    // One script call per breaker per flush would be about 0.8 per call here.
    // The bench's goal is 0.01 (at 10,000 breakers per process); bounded loosely here.
    assert!(per_call <= 0.05, "{per_call:.5} script calls per call");
    let delays = scale::propagation(&other, &tripped);
    assert_eq!(delays.len(), WATCH * WORKERS, "{delays:?}");
    eprintln!("trip propagation (us): {delays:?}");
    // Goal 100 ms at p99; loose here, the machine is shared.
    assert!(scale::quantile(&delays, 1.0) < 1_000_000, "{delays:?}");
    // Abandoned keys expire.
    let ttl = number(server.command_patiently(&["PTTL", "scale:{host-0}"], 20));
    assert!(ttl > 0, "pttl {ttl}");
    assert!(began.elapsed() < Duration::from_secs(300));
}
