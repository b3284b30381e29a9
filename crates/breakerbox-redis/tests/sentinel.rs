//! Shared breakers on a primary found through Sentinels (a primary, a replica and three
//! Sentinels, started per test on free loopback ports): a failover under load (the
//! primary killed, the replica promoted), what wins after a failover to a replica that
//! lost the last writes, and the probe cap across four processes.

#![allow(clippy::unwrap_used)] // tests unwrap
// Tests measure real elapsed time against real servers.
#![allow(clippy::disallowed_methods)]

#[path = "support/redis_server.rs"]
mod redis_server;

#[path = "support/sentinel.rs"]
mod sentinel;

#[path = "support/fleet.rs"]
mod fleet;

#[path = "support/failover.rs"]
mod failover;

use std::time::{Duration, Instant};

use breakerbox::{Config, Phase};
use breakerbox_redis::{RedisBreaker, RedisNode, Topology};
use sentinel::SentinelSet;

/// The primary killed under load: no call blocks past the timeout (plus scheduling), the
/// fallback decides until the Sentinels promote the replica, every node then finds the
/// new primary through them and Redis's state wins (the replica was in sync: a breaker
/// tripped before the kill is still open, same generation).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_primary_under_load_blocks_no_call_and_the_promoted_replica_takes_over() {
    let mut set = SentinelSet::start();
    let node = RedisNode::connect(&set.url()).unwrap();
    assert_eq!(node.target().topology(), Topology::Sentinel);
    let tripped = node
        .breaker("sentinel-tripped")
        .config(
            Config::builder()
                .consecutive_failures(3)
                .recovery_timeout(Duration::from_secs(60))
                .build()
                .unwrap(),
        )
        .build()
        .await
        .unwrap();
    for _ in 0..3 {
        tripped.acquire().await.unwrap().failure().await;
    }
    let before = tripped.snapshot().await.unwrap();
    assert_eq!(before.phase, Phase::Open);
    let load = failover::Load::start(&set.url(), "sentinel-load").await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    // The trip reached the replica before the primary dies.
    let deadline = Instant::now() + Duration::from_secs(5);
    while set
        .replica
        .command(&["HGET", "bb:{sentinel-tripped}", "phase"])
        .as_deref()
        != Some("1")
    {
        assert!(Instant::now() < deadline, "the replica has the trip");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let baseline = load.outages();
    let killed_at = Instant::now();
    set.primary.kill();
    let promoted = set.wait_promoted(Duration::from_secs(30));
    let back = load.wait_back(&baseline, Duration::from_secs(20)).await;
    let report = load.stop().await;
    eprintln!(
        "sentinels promoted the replica {promoted:?} after the kill; every breaker back on \
         redis {:?} after it; {report}",
        back - killed_at
    );
    report.assert_bounded(failover::TIMEOUT + failover::MARGIN);
    assert!(
        report.fallback > 0,
        "the fallback decided while there was no primary"
    );
    let end = tripped.snapshot().await.unwrap();
    assert_eq!(
        (end.phase, end.generation),
        (before.phase, before.generation)
    );
    assert_eq!(set.primary_port(), Some(set.replica.port()));
}

/// Which state wins after a failover to a replica that lost the last writes (README,
/// "which state wins"): the replica is cut off, one breaker trips (open for 30 s) and
/// another trips and starts probing (half-open), the primary dies and the Sentinels
/// promote the replica, which never saw either. The open phase is given back with the
/// time it had left; the half-open phase as an open phase that ends at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_failover_to_a_replica_behind_the_open_phase_is_restored_and_half_open_probes_again(
) {
    let mut set = SentinelSet::start();
    let scenario = failover::LostWrites::build(&set.url(), "lost-open", "lost-half").await;
    // The replica has the closed states (so the promoted one holds lower versions).
    let deadline = Instant::now() + Duration::from_secs(5);
    while scenario
        .keys
        .iter()
        .any(|k| set.replica.command(&["HGET", k, "phase"]).as_deref() != Some("0"))
    {
        assert!(
            Instant::now() < deadline,
            "the replica has the closed states"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    set.cut_replica();
    let lost = scenario.write_what_the_replica_loses().await;
    set.kill_primary_and_resume_replica();
    let promoted = set.wait_promoted(Duration::from_secs(30));
    eprintln!(
        "replica cut off for {:?}, then promoted in {promoted:?}",
        set.cut_for()
    );
    let replica = &set.replica;
    scenario
        .check_restored(lost, |key| replica.command(&["HGET", key, "phase"]))
        .await;
}

/// `SENTINEL FAILOVER`: the primary stays up (until the Sentinels make it a replica, it
/// takes writes that will be lost). The breakers drop their connections when a Sentinel
/// announces the switch, ask the Sentinels again and write to the new primary; no call
/// blocks past the timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_of_a_live_primary_is_followed_to_the_promoted_replica() {
    let set = SentinelSet::start();
    let load = failover::Load::start(&set.url(), "sentinel-live").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let asked = set.sentinels[0]
        .query::<String>(&["SENTINEL", "FAILOVER", sentinel::SERVICE])
        .unwrap_or_default();
    assert_eq!(asked, "OK", "SENTINEL FAILOVER");
    let promoted = set.wait_promoted(Duration::from_secs(30));
    // The old primary stays up (the Sentinels make it a replica within about 10 s): the
    // breakers leave it on the Sentinels' `+switch-master`, not on its first READONLY.
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Every node writes to the new primary now: a trip lands there.
    let tripper = RedisBreaker::builder(set.url(), "sentinel-live-trip")
        .config(
            Config::builder()
                .consecutive_failures(3)
                .recovery_timeout(Duration::from_secs(60))
                .build()
                .unwrap(),
        )
        .timeout(failover::TIMEOUT)
        .build()
        .await
        .unwrap();
    for _ in 0..3 {
        tripper.acquire().await.unwrap().failure().await;
    }
    assert_eq!(
        set.replica
            .command(&["HGET", "bb:{sentinel-live-trip}", "phase"])
            .as_deref(),
        Some("1"),
        "written on the promoted replica"
    );
    // The load's breakers (connected to the old primary before) run their scripts on
    // the new one.
    let before = set.replica.command_calls("evalsha");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let during = set.replica.command_calls("evalsha") - before;
    let report = load.stop().await;
    eprintln!("live primary failed over in {promoted:?}; {during} scripts on the new primary in 300 ms; {report}");
    report.assert_bounded(failover::TIMEOUT + failover::MARGIN);
    assert!(
        during >= 20,
        "the load's scripts run on the new primary: {during}"
    );
    assert!(load_back(&report));
}

/// Every node of a load is back on Redis when it stops (no panic, calls made).
fn load_back(report: &failover::Report) -> bool {
    report.panics == 0 && report.calls > 0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a worker process, started by the other tests of this file"]
async fn fleet_worker() {
    fleet::worker_main().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_stay_under_the_cap_across_four_processes_behind_sentinels() {
    let set = SentinelSet::start();
    fleet::probes_stay_under_the_cap(&set.url(), 4, 2, &fleet::cap_settings(&[])).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_sentinels_are_an_outage_not_a_hang() {
    // Nothing listens on these ports: the breaker builds, starts on its fallback, and
    // every call is decided at once.
    let url = "redis+sentinel://127.0.0.1:1,127.0.0.1:2/main";
    let started = Instant::now();
    let b = RedisBreaker::builder(url, "nowhere")
        .timeout(failover::TIMEOUT)
        .build()
        .await
        .unwrap();
    assert!(b.is_degraded());
    for _ in 0..10 {
        let asked = Instant::now();
        let permit = b.acquire().await.unwrap();
        assert!(permit.is_fallback());
        permit.success().await;
        assert!(asked.elapsed() <= failover::TIMEOUT + failover::MARGIN);
    }
    assert!(started.elapsed() < Duration::from_secs(5));
}
