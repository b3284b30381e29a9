//! Faults injected under load into a fleet of worker processes that share one breaker
//! through a real redis-server, in front of a loopback dependency that counts its calls:
//! Redis's clock stepping back, a forged channel message, a stall longer than the client
//! timeout in the half-open phase, a restart that loses everything, corrupt values while
//! nodes run. Each test asserts the bound the engine promises (issue 8 of the tracker).

#![allow(clippy::unwrap_used)] // tests unwrap
// Tests measure real elapsed time against real servers.
#![allow(clippy::disallowed_methods)]

#[path = "support/redis_server.rs"]
mod redis_server;

#[path = "support/fleet.rs"]
mod fleet;

#[path = "support/time_shift.rs"]
mod time_shift;

use std::time::{Duration, Instant};

use fleet::{reports, spawn, wait_for_stored_phase, Dependency, Report, TEST_WORKER_ARGS};
use redis_server::RedisServer;
use time_shift::TimeShift;

const KEY: &str = "bb:{fleet}";
const WORKERS: usize = 4;
/// The workers' refresh interval (local-view mode).
const REFRESH: Duration = Duration::from_millis(200);
/// Calls admitted just before a node's view changed may still be on their way; and this
/// is a loaded 2-core machine.
const IN_FLIGHT: Duration = Duration::from_millis(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a worker process, started by the other tests of this file"]
async fn fleet_worker() {
    fleet::worker_main().await;
}

fn start(
    server: &RedisServer,
    dependency: &Dependency,
    env: &[(&str, &str)],
) -> Vec<std::process::Child> {
    spawn(
        WORKERS,
        &TEST_WORKER_ARGS,
        &server.url(),
        &dependency.addr,
        env,
    )
}

fn summary(reports: &[Report]) -> String {
    reports
        .iter()
        .map(|r| r.line.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Asserts that no call reached the dependency from `bound` after `tripped` on.
fn assert_every_node_rejects(
    dependency: &Dependency,
    tripped: Instant,
    bound: Duration,
    what: &str,
) {
    eprintln!(
        "{what}: {} calls after the trip, the last {:?} after it",
        dependency.calls_since(tripped),
        dependency.last_call_after(tripped)
    );
    let late = dependency.calls_since(tripped + bound);
    assert_eq!(
        late, 0,
        "{what}: {late} calls reached the dead dependency later than {bound:?} after the trip"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_node_rejects_after_a_trip_though_redis_time_stepped_back() {
    let shift = TimeShift::build();
    let env = shift.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let server = RedisServer::start_with_env(&[], None, &env);
    let dependency = Dependency::start(true).await;
    // The default refresh interval (1 s): flushes come as often, so nothing but the
    // refresh itself can keep a view in step once Redis time goes back.
    let refresh = Duration::from_secs(1);
    let children = start(
        &server,
        &dependency,
        &[("BB_FLEET_MILLIS", "7000"), ("BB_FLEET_REFRESH_MS", "1000")],
    );
    dependency.wait_for_calls(300).await;
    // An NTP correction, or a failover to a replica whose clock is behind.
    let before = server.time_us().unwrap();
    shift.step_back(Duration::from_secs(30));
    let after = server.time_us().unwrap();
    assert!(before - after > 29_000_000, "the server's clock moved back");
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    dependency.set_healthy(false);
    let tripped = wait_for_stored_phase(&server, KEY, "1", Duration::from_secs(5))
        .await
        .expect("the shared breaker trips");
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    let calls_after_trip = dependency.calls_since(tripped);
    let reports = reports(children).await;
    eprintln!(
        "{calls_after_trip} calls after the trip\n{}",
        summary(&reports)
    );
    assert_every_node_rejects(
        &dependency,
        tripped,
        refresh * 2 + IN_FLIGHT,
        "clock stepped back",
    );
    for r in &reports {
        assert_eq!(r.phase, "open", "{}", r.line);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_message_neither_opens_the_views_nor_freezes_them() {
    let server = RedisServer::start();
    let dependency = Dependency::start(true).await;
    let children = start(&server, &dependency, &[("BB_FLEET_MILLIS", "5000")]);
    dependency.wait_for_calls(300).await;
    let channel = format!("{KEY}:events");
    let incarnation = server.command(&["HGET", KEY, "inc"]).unwrap_or_default();
    // "Open for a minute", stamped far in the future with a huge version.
    let forged_open = format!("1,999999,60000000,9999999999999999,999999999,{incarnation}");
    server
        .command(&["PUBLISH", &channel, &forged_open])
        .unwrap();
    let forged = Instant::now();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let admitted = dependency.calls_since(forged + REFRESH * 2 + IN_FLIGHT);
    assert!(
        admitted > 50,
        "a forged message closed the fleet to a healthy dependency: {admitted} calls"
    );
    // "Closed", from the future: it must not hide the real trip that follows.
    let forged_closed = format!("0,999999,-1,9999999999999999,999999999,{incarnation}");
    server
        .command(&["PUBLISH", &channel, &forged_closed])
        .unwrap();
    dependency.set_healthy(false);
    let tripped = wait_for_stored_phase(&server, KEY, "1", Duration::from_secs(5))
        .await
        .expect("the shared breaker trips");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let reports = reports(children).await;
    eprintln!("{}", summary(&reports));
    assert_every_node_rejects(
        &dependency,
        tripped,
        REFRESH * 2 + IN_FLIGHT,
        "forged message",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stall_longer_than_the_timeout_does_not_wedge_the_half_open_phase() {
    let server = RedisServer::start();
    let dependency = Dependency::start(false).await;
    let lease = Duration::from_millis(1_000);
    let children = start(
        &server,
        &dependency,
        &[
            ("BB_FLEET_MILLIS", "7000"),
            ("BB_FLEET_STRICT", "1"),
            ("BB_FLEET_FALLBACK", "closed"),
            ("BB_FLEET_CF", "3"),
            ("BB_FLEET_RECOVERY_MS", "1000"),
            ("BB_FLEET_LEASE_MS", "1000"),
        ],
    );
    let tripped = wait_for_stored_phase(&server, KEY, "1", Duration::from_secs(10))
        .await
        .expect("the shared breaker trips");
    // Stall Redis across the end of the open phase: the acquires that ask for a probe
    // time out on the clients, but Redis runs them when it resumes, and the first one
    // takes the only probe slot for nobody.
    tokio::time::sleep(
        (tripped + Duration::from_millis(700)).saturating_duration_since(Instant::now()),
    )
    .await;
    server.pause();
    tokio::time::sleep(Duration::from_millis(900)).await;
    dependency.set_healthy(true);
    server.resume();
    let resumed = Instant::now();
    let closed =
        wait_for_stored_phase(&server, KEY, "0", lease + Duration::from_millis(2_500)).await;
    let reports = reports(children).await;
    eprintln!("{}", summary(&reports));
    let closed = closed.unwrap_or_else(|| {
        panic!(
            "the fleet did not recover within one lease after the stall: phase {:?}, in flight {:?}",
            server.command(&["HGET", KEY, "phase"]),
            server.command(&["HGET", KEY, "inflight"]),
        )
    });
    eprintln!("closed {:?} after Redis resumed", closed - resumed);
    for r in &reports {
        // The timeout (100 ms), plus scheduling on a loaded 2-core machine that runs
        // four worker processes and Redis.
        assert!(
            r.get("blocked_ms") <= 100 + 500,
            "a call blocked too long: {}",
            r.line
        );
        assert_eq!(r.phase, "closed", "{}", r.line);
    }
}

/// Redis is killed while the shared breaker is open, stays away, and comes back empty:
/// under every fallback policy no call reaches the dead dependency, and the open phase is
/// restored in Redis.
async fn an_open_phase_survives_an_outage_and_an_empty_restart(fallback: &str) {
    let mut server = RedisServer::start();
    let dependency = Dependency::start(false).await;
    let children = start(
        &server,
        &dependency,
        &[
            ("BB_FLEET_MILLIS", "6000"),
            ("BB_FLEET_RECOVERY_MS", "15000"),
            ("BB_FLEET_FALLBACK", fallback),
        ],
    );
    let tripped = wait_for_stored_phase(&server, KEY, "1", Duration::from_secs(10))
        .await
        .expect("the shared breaker trips");
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.kill();
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    server.restart();
    let restored = wait_for_stored_phase(&server, KEY, "1", Duration::from_secs(3)).await;
    let left_us = server
        .command(&["HGET", KEY, "until"])
        .and_then(|u| u.parse::<u64>().ok())
        .zip(server.time_us())
        .map(|(until, now)| until.saturating_sub(now));
    let expected = Duration::from_secs(15).saturating_sub(tripped.elapsed());
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let reports = reports(children).await;
    eprintln!("{fallback}: {}", summary(&reports));
    assert_every_node_rejects(&dependency, tripped, REFRESH * 2 + IN_FLIGHT, fallback);
    assert!(
        restored.is_some(),
        "{fallback}: the open phase was not restored in Redis"
    );
    let left = Duration::from_micros(left_us.unwrap());
    assert!(
        left + Duration::from_millis(1_000) >= expected
            && left <= expected + Duration::from_millis(200),
        "{fallback}: restored with the time it had left ({expected:?}), not {left:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_phase_survives_an_outage_and_an_empty_restart_under_the_local_fallback() {
    an_open_phase_survives_an_outage_and_an_empty_restart("local").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_phase_survives_an_outage_and_an_empty_restart_under_fail_open() {
    an_open_phase_survives_an_outage_and_an_empty_restart("open").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_phase_survives_an_outage_and_an_empty_restart_under_fail_closed() {
    an_open_phase_survives_an_outage_and_an_empty_restart("closed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corruption_is_repaired_once_while_nodes_run() {
    let server = RedisServer::start();
    let dependency = Dependency::start(true).await;
    // Strict mode: every call is a script call, so many see each corruption at once.
    let children = start(
        &server,
        &dependency,
        &[("BB_FLEET_MILLIS", "4000"), ("BB_FLEET_STRICT", "1")],
    );
    dependency.wait_for_calls(300).await;
    server.command(&["HSET", KEY, "gen", "banana"]).unwrap();
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    server.command(&["HSET", KEY, "phase", "9"]).unwrap();
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let healthy_after = dependency.calls();
    let reports = reports(children).await;
    eprintln!("{}", summary(&reports));
    let repairs: u64 = reports.iter().map(|r| r.get("repairs")).sum();
    assert_eq!(
        repairs, 2,
        "each corruption is repaired (and reported) exactly once"
    );
    assert!(dependency.calls() > healthy_after, "the fleet kept calling");
    assert_eq!(server.command(&["HGET", KEY, "phase"]).unwrap(), "0");
}
