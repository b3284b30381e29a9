//! Shared breakers on a real Redis Cluster (3 primaries, 3 replicas, started per test on
//! free loopback ports): the core's shared scenarios; a breaker's key and channel on one
//! slot with its news on sharded pub/sub; a slot moved under a breaker (`ASK`, then
//! `MOVED`); failovers under load (a graceful `CLUSTER FAILOVER`, then a killed primary);
//! what wins after a failover to a replica that lost the last writes; and the probe cap
//! across four processes.

#![allow(clippy::unwrap_used)] // tests unwrap
// Tests measure real elapsed time against real servers.
#![allow(clippy::disallowed_methods)]

#[path = "support/redis_server.rs"]
mod redis_server;

#[path = "support/cluster.rs"]
mod cluster;

#[path = "support/fleet.rs"]
mod fleet;

#[path = "../../breakerbox/tests/scenarios"]
mod scenarios {
    pub(crate) mod engine;

    /// The scenarios every engine must pass.
    #[allow(dead_code)] // the scenarios the list excludes (engine differences)
    pub(crate) mod shared {
        pub(crate) mod backoff;
        pub(crate) mod closed;
        pub(crate) mod deadlines;
        pub(crate) mod half_open;
        pub(crate) mod manual;
        pub(crate) mod ramp;
        pub(crate) mod shadow;
    }
}

#[path = "support/redis_engine.rs"]
mod redis_engine;

#[macro_use]
#[path = "support/scenario_list.rs"]
mod scenario_list;

#[path = "support/failover.rs"]
mod failover;

use std::time::{Duration, Instant};

use breakerbox::{Config, Phase};
use breakerbox_redis::{BuildError, LocalView, Mode, RedisBreaker, RedisNode};
use cluster::RedisCluster;

/// Every shared scenario, by name.
macro_rules! scenario_table {
    ($($module:ident: [$($name:ident),+ $(,)?])+) => {
        fn all_scenarios() -> Vec<(&'static str, fn())> {
            vec![$($(
                (
                    concat!(stringify!($module), "::", stringify!($name)),
                    scenarios::shared::$module::$name::<redis_engine::RedisEngine> as fn(),
                ),
            )+)+]
        }
    };
}

with_shared_scenarios!(scenario_table);

/// Scenarios left to the single-server suite: 20,000 rejections each (a script call each
/// in strict mode, about 3 ms through the cluster client on a busy 2-core machine: a
/// minute apiece), testing windows, nothing a cluster changes.
const LEFT_TO_THE_SINGLE_SERVER: [&str; 2] = [
    "closed::a_long_outage_does_not_blind_the_count_window",
    "closed::a_long_outage_does_not_blind_the_time_window",
];

/// The scenarios run one after the other on one cluster (nextest runs each test in a
/// process of its own, so a cluster per test binary run is a cluster per test), each a
/// breaker of its own name.
#[test]
fn shared_scenarios_pass_on_a_cluster() {
    let cluster = RedisCluster::start();
    redis_engine::share(Some(cluster.url()));
    let started = Instant::now();
    let mut failed = Vec::new();
    let scenarios: Vec<_> = all_scenarios()
        .into_iter()
        .filter(|(name, _)| !LEFT_TO_THE_SINGLE_SERVER.contains(name))
        .collect();
    assert_eq!(
        scenarios.len() + LEFT_TO_THE_SINGLE_SERVER.len(),
        all_scenarios().len()
    );
    for (name, scenario) in &scenarios {
        if std::panic::catch_unwind(scenario).is_err() {
            failed.push(*name);
        }
    }
    redis_engine::share(None);
    eprintln!(
        "{} scenarios on the cluster in {:?}",
        scenarios.len(),
        started.elapsed()
    );
    assert!(failed.is_empty(), "failed on the cluster: {failed:?}");
}

fn config(recovery: Duration) -> Config {
    Config::builder()
        .consecutive_failures(3)
        .recovery_timeout(recovery)
        .build()
        .unwrap()
}

/// Local view whose periodic refresh is too slow to matter: only the channel can carry a
/// trip to another node within the test.
fn deaf_to_refreshes() -> Mode {
    Mode::LocalView(LocalView {
        flush_interval: Duration::from_millis(20),
        refresh_interval: Duration::from_secs(60),
        ..LocalView::default()
    })
}

async fn wait_until(what: &str, within: Duration, mut done: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < within, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    started.elapsed()
}

async fn trip(b: &RedisBreaker) {
    for _ in 0..3 {
        if let Ok(permit) = b.acquire().await {
            permit.failure().await;
        }
    }
    b.flush().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_breakers_key_and_channel_share_a_slot_and_its_news_stays_on_its_shard() {
    let cluster = RedisCluster::start();
    let (key, channel) = ("bb:{sharded}", "bb:{sharded}:events");
    assert_eq!(cluster.slot(key), cluster.slot(channel));
    let nodes: Vec<RedisNode> = (0..2)
        .map(|_| RedisNode::connect(&cluster.url()).unwrap())
        .collect();
    let mut breakers = Vec::new();
    for node in &nodes {
        let b = node
            .breaker("sharded")
            .config(config(Duration::from_secs(30)))
            .mode(deaf_to_refreshes())
            .build()
            .await
            .unwrap();
        assert!(!b.is_degraded());
        breakers.push(b);
    }
    let owner = cluster.primary_of(key);
    // Both nodes listen on the breaker's shard, with SSUBSCRIBE; no other primary has them.
    wait_until("both sharded subscriptions", Duration::from_secs(5), || {
        let counts: Vec<(String, u64)> =
            cluster::query(&cluster.nodes[owner], &["PUBSUB", "SHARDNUMSUB", channel])
                .unwrap_or_default();
        counts.first().map(|(_, n)| *n) == Some(2)
    })
    .await;
    for (i, node) in cluster.nodes.iter().enumerate() {
        let counts: Vec<(String, u64)> =
            cluster::query(node, &["PUBSUB", "SHARDNUMSUB", channel]).unwrap_or_default();
        if i != owner {
            assert_eq!(counts.first().map(|(_, n)| *n), Some(0), "node {i}");
        }
        let patterns: u64 = cluster::query(node, &["PUBSUB", "NUMPAT"]).unwrap_or_default();
        assert_eq!(patterns, 0, "no pattern subscription on node {i}");
    }
    // A trip on one node reaches the other through the shard channel, long before a
    // refresh could.
    trip(&breakers[0]).await;
    assert_eq!(breakers[0].phase(), Phase::Open);
    let heard = wait_until(
        "the other node hears the trip",
        Duration::from_secs(5),
        || breakers[1].phase() == Phase::Open,
    )
    .await;
    eprintln!("trip heard by the other node after {heard:?}");
    let spublish = cluster.nodes[owner].command_calls("spublish");
    assert!(spublish >= 1, "the scripts published with SPUBLISH");
    for node in &cluster.nodes {
        assert_eq!(node.command_calls("publish"), 0, "no plain PUBLISH");
    }
    // A name whose key and channel would land on different slots is refused.
    let refused = nodes[0].breaker("").build().await.unwrap_err();
    assert!(matches!(refused, BuildError::Name(_)), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_breaker_follows_its_slot_through_a_migration() {
    let cluster = RedisCluster::start();
    let key = "bb:{moving}";
    let node = RedisNode::connect(&cluster.url()).unwrap();
    let strict = node
        .breaker("moving")
        .config(config(Duration::from_secs(30)))
        .mode(Mode::Strict)
        .build()
        .await
        .unwrap();
    let other = RedisNode::connect(&cluster.url()).unwrap();
    let listener = other
        .breaker("moving")
        .config(config(Duration::from_secs(30)))
        .mode(deaf_to_refreshes())
        .build()
        .await
        .unwrap();
    trip(&strict).await;
    wait_until("the trip heard", Duration::from_secs(5), || {
        listener.phase() == Phase::Open
    })
    .await;
    let generation = strict.snapshot().await.unwrap().generation;
    let from = cluster.primary_of(key);
    let to = (0..6)
        .find(|&i| i != from && cluster.is_primary(i))
        .unwrap();
    // Mid-migration the hash is on the target while the slot is still the source's:
    // the source answers ASK, and the state is read where it went.
    let moving = cluster.start_move(key, to);
    let during = strict.snapshot().await.unwrap();
    assert_eq!((during.phase, during.generation), (Phase::Open, generation));
    assert_eq!(strict.acquire().await.unwrap_err().phase(), Phase::Open);
    cluster.finish_move(moving);
    // After it, MOVED: the client follows the slot to its new primary.
    let after = strict.snapshot().await.unwrap();
    assert_eq!((after.phase, after.generation), (Phase::Open, generation));
    assert_eq!(cluster.primary_of(key), to);
    // The sharded subscriptions moved with the slot: a reset on one node reaches the
    // other through the channel.
    strict.reset().await.unwrap();
    let heard = wait_until(
        "the reset heard after the move",
        Duration::from_secs(10),
        || listener.phase() == Phase::Closed,
    )
    .await;
    eprintln!("news after the slot moved heard in {heard:?}");
    let counts: Vec<(String, u64)> = cluster::query(
        &cluster.nodes[to],
        &["PUBSUB", "SHARDNUMSUB", "bb:{moving}:events"],
    )
    .unwrap_or_default();
    assert_eq!(
        counts.first().map(|(_, n)| *n),
        Some(2),
        "subscribed on the new primary"
    );
    assert!(!strict.is_degraded() && !listener.is_degraded());
}

/// A graceful `CLUSTER FAILOVER` under load, then the new primary killed so the old one
/// takes over again: no call blocks past the timeout (plus scheduling), the fallback
/// decides while the slot has no primary, and the breakers come back to Redis, whose
/// state wins (the replica was in sync).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failovers_under_load_block_no_call_and_fall_back_meanwhile() {
    let mut cluster = RedisCluster::start();
    let key = "bb:{load}";
    let load = failover::Load::start(&cluster.url(), "load").await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    // A breaker tripped before the failovers keeps its open phase through them.
    let tripped = RedisBreaker::builder(cluster.url(), "load-tripped")
        .config(config(Duration::from_secs(60)))
        .build()
        .await
        .unwrap();
    trip(&tripped).await;
    let before = tripped.snapshot().await.unwrap();
    assert_eq!(before.phase, Phase::Open);

    // 1. Graceful: the replica catches up, then takes over.
    let replica = cluster.replica_of(key);
    let graceful = cluster.failover(replica, Duration::from_secs(10));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = tripped.snapshot().await.unwrap();
    assert_eq!(
        (after.phase, after.generation),
        (before.phase, before.generation)
    );

    // 2. Killed: the new primary dies, its replica (the old primary) takes over.
    let primary = cluster.primary_of(key);
    assert_eq!(primary, replica);
    let standby = cluster.replica_of(key);
    let baseline = load.outages();
    let killed_at = Instant::now();
    cluster.nodes[primary].kill();
    let promoted = cluster.wait_primary(standby, Duration::from_secs(15));
    let back = load.wait_back(&baseline, Duration::from_secs(15)).await;
    let report = load.stop().await;
    eprintln!(
        "graceful failover {graceful:?}; killed primary replaced in {promoted:?}, \
         every breaker back on redis {:?} after the kill; {report}",
        back - killed_at
    );
    report.assert_bounded(failover::TIMEOUT + failover::MARGIN);
    assert!(
        report.fallback > 0,
        "the fallback decided while the slot had no primary"
    );
    // Redis's state won: the tripped breaker is still open, same phase.
    let end = tripped.snapshot().await.unwrap();
    assert_eq!(
        (end.phase, end.generation),
        (before.phase, before.generation)
    );
}

/// Which state wins after a failover to a replica that lost the last writes (README,
/// "which state wins"): the replica is cut off, a breaker trips (open for 30 s) and
/// another one trips and starts probing (half-open), the primary dies and the replica
/// (which never saw either) is promoted. The node that knew gives back the open phase
/// with the time it had left, and the half-open phase as an open phase that ends at once:
/// the next acquire probes; the lost phase's probe is stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_failover_to_a_replica_behind_the_open_phase_is_restored_and_half_open_probes_again(
) {
    let mut cluster = RedisCluster::start();
    // Two names whose slots one primary serves.
    let open_name = "lost-open".to_string();
    let owner = cluster.primary_of(&format!("bb:{{{open_name}}}"));
    let half_name = (0..1000)
        .map(|i| format!("lost-half-{i}"))
        .find(|n| cluster.primary_of(&format!("bb:{{{n}}}")) == owner)
        .unwrap();
    let replica = cluster.replica_of(&format!("bb:{{{open_name}}}"));
    let scenario = failover::LostWrites::build(&cluster.url(), &open_name, &half_name).await;
    // The replica has the closed states (so the promoted one holds lower versions).
    let acked = cluster.nodes[owner].command(&["WAIT", "1", "2000"]);
    assert_eq!(acked.as_deref(), Some(":1"), "the replica acknowledged");
    // The replica stops hearing the primary.
    cluster.nodes[replica].pause();
    let killed = cluster.nodes[owner]
        .command(&["CLIENT", "KILL", "TYPE", "replica"])
        .unwrap_or_default();
    assert!(
        killed.starts_with(":1"),
        "the replica's link closed: {killed}"
    );
    let lost = scenario.write_what_the_replica_loses().await;
    cluster.nodes[owner].kill();
    cluster.nodes[replica].resume();
    let promoted = cluster.wait_primary(replica, Duration::from_secs(15));
    eprintln!("replica behind promoted in {promoted:?}");
    scenario
        .check_restored(lost, |key| {
            cluster::query(&cluster.nodes[replica], &["HGET", key, "phase"])
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a worker process, started by the other tests of this file"]
async fn fleet_worker() {
    fleet::worker_main().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_stay_under_the_cap_across_four_processes_on_a_cluster() {
    let cluster = RedisCluster::start();
    fleet::probes_stay_under_the_cap(&cluster.url(), 4, 2, &fleet::cap_settings(&[])).await;
}

/// Seeds nobody answers, or a server that is not a cluster: the breaker builds, starts on
/// its fallback and decides every call at once; never a panic or a hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_seeds_or_a_server_without_cluster_mode_are_an_outage_not_a_hang() {
    let standalone = redis_server::RedisServer::start();
    let urls = [
        "redis+cluster://127.0.0.1:1,127.0.0.1:2".to_string(),
        format!("redis+cluster://127.0.0.1:{}", standalone.port()),
    ];
    for url in urls {
        let started = Instant::now();
        let b = RedisBreaker::builder(url.clone(), "nowhere")
            .timeout(failover::TIMEOUT)
            .build()
            .await
            .unwrap();
        assert!(b.is_degraded(), "{url}");
        for _ in 0..10 {
            let asked = Instant::now();
            let permit = b.acquire().await.unwrap();
            assert!(permit.is_fallback());
            permit.success().await;
            assert!(
                asked.elapsed() <= failover::TIMEOUT + failover::MARGIN,
                "{url}"
            );
        }
        assert!(started.elapsed() < Duration::from_secs(5), "{url}");
    }
}
