//! Several OS processes share one breaker in front of a loopback HTTP server that counts
//! concurrent probe requests: during half-open the count never exceeds `max_probes`; and
//! the fleet rides out a paused, killed and restarted Redis.
//!
//! The workers are this test binary again, running the ignored `fleet_worker` test with
//! `BB_FLEET_*` settings (see `support/fleet.rs`).

#![allow(clippy::unwrap_used)] // tests unwrap
// Tests measure real elapsed time against real servers.
#![allow(clippy::disallowed_methods)]

#[path = "support/redis_server.rs"]
mod redis_server;

#[path = "support/fleet.rs"]
mod fleet;

use std::time::Duration;

use fleet::{reports, spawn, Dependency, TEST_WORKER_ARGS};
use redis_server::RedisServer;

const MAX_PROBES: u64 = 2;
const WORKERS: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a worker process, started by the other tests of this file"]
async fn fleet_worker() {
    fleet::worker_main().await;
}

/// The settings of both tests (`fleet::cap_settings`): 3 failures trip, 300 ms open, 2
/// probes, 6 successes close; then `extra`.
fn settings<'a>(extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    fleet::cap_settings(extra)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_processes_ride_out_a_paused_killed_and_restarted_redis() {
    let mut server = RedisServer::start();
    let dependency = Dependency::start(true).await;
    dependency.set_delay(Duration::from_millis(30));
    let timeout_ms = 100u64;
    let children = spawn(
        WORKERS,
        &TEST_WORKER_ARGS,
        &server.url(),
        &dependency.addr,
        &settings(&[
            ("BB_FLEET_STRICT", "1"),
            ("BB_FLEET_TIMEOUT_MS", "100"),
            ("BB_FLEET_MILLIS", "3000"),
        ]),
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    server.pause();
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.resume();
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.kill();
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.restart();
    let reports = reports(children).await;
    for r in &reports {
        eprintln!("{}", r.line);
        // The timeout, plus scheduling on a loaded 2-core machine.
        assert!(
            r.get("blocked_ms") <= timeout_ms + 250,
            "a call blocked too long: {}",
            r.line
        );
        assert!(r.get("fallback") > 0, "the fallback engaged: {}", r.line);
        assert!(r.get("outages") >= 1, "{}", r.line);
        assert_eq!(r.get("degraded"), 0, "resynchronised: {}", r.line);
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
    fleet::probes_stay_under_the_cap(&server.url(), WORKERS, MAX_PROBES, &settings(&[])).await;
}
