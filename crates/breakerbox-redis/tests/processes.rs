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
    const PAUSED_MS: u64 = 1_500;
    const SCHEDULING_SLACK_MS: u64 = 350;
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
            ("BB_FLEET_MILLIS", "4500"),
        ]),
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    // Paused and dead for far longer than the timeout plus the machine's scheduling
    // slack, so a call that waits for Redis is told apart from one that was merely
    // scheduled late on a loaded machine.
    server.pause();
    tokio::time::sleep(Duration::from_millis(PAUSED_MS)).await;
    server.resume();
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.kill();
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    server.restart();
    let reports = reports(children).await;
    for r in &reports {
        eprintln!("{}", r.line);
        // The timeout, plus scheduling on a loaded 2-core machine; a call that waited
        // out the pause would have blocked PAUSED_MS.
        assert!(
            r.get("blocked_ms") <= timeout_ms + SCHEDULING_SLACK_MS,
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

/// Rule 21 across OS processes: one process whose path to the (healthy) dependency is
/// broken, two healthy ones, sharing a breaker (3 failures in a row, or 10 % failures over
/// the last 50 calls, trip; 1 s open). With a quorum of 2 only the broken process opens
/// (locally) and the healthy ones never see a rejection; without one the broken process
/// trips them all.
///
/// The rate rule is what makes the broken node's failures fire a rule whatever the
/// interleaving: the healthy nodes' successes end every streak they land in (rule 19),
/// so on a loaded machine three failures in a row may never reach Redis together, while a
/// third of the calls failing always fires the rate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_broken_process_opens_only_itself_with_a_quorum_and_trips_all_without() {
    let server = RedisServer::start();
    let dependency = Dependency::start(true).await;
    for quorum in ["2", "1"] {
        let name = format!("quorum-{quorum}");
        // All three run over the same 1.5 s, however long each took to start.
        let start = fleet::start_at(Duration::from_millis(1500));
        let env = fleet::cap_settings(&[
            ("BB_FLEET_START_AT_MS", &start),
            ("BB_FLEET_RATE_PCT", "10"),
            ("BB_FLEET_WINDOW", "50"),
            ("BB_FLEET_QUORUM", quorum),
            ("BB_FLEET_NAME", &name),
            ("BB_FLEET_RECOVERY_MS", "1000"),
            ("BB_FLEET_MILLIS", "1500"),
            ("BB_FLEET_CALLERS", "2"),
            ("BB_FLEET_PACE_MS", "10"),
        ]);
        let mut broken_env = env.clone();
        broken_env.push(("BB_FLEET_BROKEN", "1"));
        let url = server.url();
        let mut children = spawn(1, &TEST_WORKER_ARGS, &url, &dependency.addr, &broken_env);
        children.extend(spawn(2, &TEST_WORKER_ARGS, &url, &dependency.addr, &env));
        let reports = reports(children).await;
        let lines: Vec<&str> = reports.iter().map(|r| r.line.as_str()).collect();
        let (broken, healthy) = reports.split_at(1);
        assert!(broken[0].get("failed") >= 3, "{lines:?}");
        assert!(broken[0].get("rejected") > 0, "{lines:?}");
        if quorum == "2" {
            assert!(broken[0].get("local_opens") >= 1, "{lines:?}");
            for r in healthy {
                assert_eq!(r.get("rejected"), 0, "{lines:?}");
                assert_eq!(r.get("local_opens"), 0, "{lines:?}");
                assert_eq!(r.phase, "closed", "{lines:?}");
            }
        } else {
            assert_eq!(broken[0].get("local_opens"), 0, "{lines:?}");
            assert!(healthy.iter().all(|r| r.get("rejected") > 0), "{lines:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_stay_under_the_cap_across_four_processes() {
    let server = RedisServer::start();
    fleet::probes_stay_under_the_cap(&server.url(), WORKERS, MAX_PROBES, &settings(&[])).await;
}
