//! Rule 21 against a real redis-server: two `RedisBreaker`s with their own node ids share
//! one breaker. With a quorum of two, one bad node's failures open only its own view (a
//! local open, reported) while the other keeps serving; a second node's failures in the
//! streak trip the fleet. Without a quorum one node's failures trip the fleet.

#![allow(clippy::unwrap_used)] // tests unwrap
// Tests measure real elapsed time against real servers.
#![allow(clippy::disallowed_methods)]

#[path = "support/redis_server.rs"]
mod redis_server;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use breakerbox::model::TripReason;
use breakerbox::{Config, ConfigBuilder, Event, EventKind, Phase};
use breakerbox_redis::{LocalView, Mode, RedisBreaker};
use redis_server::RedisServer;

type Seen = Arc<Mutex<Vec<EventKind>>>;

async fn node(server: &RedisServer, id: u64, config: Config, mode: Mode) -> (RedisBreaker, Seen) {
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let breaker = RedisBreaker::builder(server.url(), "quorum")
        .config(config)
        .node_id(id)
        .mode(mode)
        .timeout(Duration::from_millis(500))
        .listener(move |e: &Event<'_>| log.lock().unwrap().push(e.kind.clone()))
        .build()
        .await
        .unwrap();
    (breaker, seen)
}

fn local_view() -> Mode {
    Mode::LocalView(LocalView {
        flush_interval: Duration::from_millis(20),
        refresh_interval: Duration::from_millis(200),
        ..LocalView::default()
    })
}

fn config(quorum: Option<u32>, recovery: Duration) -> Config {
    let mut b: ConfigBuilder = Config::builder()
        .consecutive_failures(3)
        .recovery_timeout(recovery);
    if let Some(k) = quorum {
        b = b.quorum(k);
    }
    b.build().unwrap()
}

async fn fail(b: &RedisBreaker, times: usize) {
    for _ in 0..times {
        b.acquire().await.unwrap().failure().await;
    }
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn local_opens(seen: &Seen) -> usize {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|k| {
            matches!(
                k,
                EventKind::LocalOpened {
                    reason: TripReason::ConsecutiveFailures,
                    ..
                }
            )
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_quorum_of_two_one_bad_nodes_failures_open_only_its_own_view() {
    for mode in [local_view(), Mode::Strict] {
        let server = RedisServer::start();
        let config = config(Some(2), Duration::from_secs(30));
        let (bad, bad_seen) = node(&server, 1, config.clone(), mode).await;
        let (good, _) = node(&server, 2, config, mode).await;
        fail(&bad, 3).await;
        assert_eq!(local_opens(&bad_seen), 1, "{mode:?}");
        // The bad node rejects on its own, without asking Redis.
        let rejected = bad.acquire().await.unwrap_err();
        assert_eq!(rejected.phase(), Phase::Open);
        assert!(rejected.retry_after().unwrap() > Duration::from_secs(29));
        assert!(bad.check().is_err());
        let snapshot = bad.snapshot().await.unwrap();
        assert_eq!(snapshot.phase, Phase::Closed, "the shared phase");
        assert!(snapshot.local_open.is_some());
        // The good node keeps serving, and shows no local open.
        for _ in 0..5 {
            good.acquire().await.unwrap().success().await;
        }
        let snapshot = good.snapshot().await.unwrap();
        assert_eq!((snapshot.phase, snapshot.local_open), (Phase::Closed, None));
        assert_eq!(snapshot.trips, 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_nodes_failure_within_the_streak_trips_the_fleet() {
    let server = RedisServer::start();
    let config = config(Some(2), Duration::from_secs(30));
    let (bad, _) = node(&server, 1, config.clone(), local_view()).await;
    let (other, other_seen) = node(&server, 2, config, local_view()).await;
    fail(&bad, 3).await;
    fail(&other, 1).await;
    assert_eq!(local_opens(&other_seen), 0);
    wait_for("the trip", || other.phase() == Phase::Open).await;
    assert_eq!(other.snapshot().await.unwrap().trips, 1);
    wait_for("the bad node's view", || bad.phase() == Phase::Open).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_quorum_one_nodes_failures_trip_the_fleet() {
    let server = RedisServer::start();
    let config = config(None, Duration::from_secs(30));
    let (bad, bad_seen) = node(&server, 1, config.clone(), local_view()).await;
    let (good, _) = node(&server, 2, config, local_view()).await;
    fail(&bad, 3).await;
    assert_eq!(local_opens(&bad_seen), 0);
    wait_for("the fleet to trip", || good.phase() == Phase::Open).await;
    assert_eq!(good.acquire().await.unwrap_err().phase(), Phase::Open);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_open_ends_by_itself_and_opens_again_on_the_next_failure() {
    let server = RedisServer::start();
    let config = config(Some(2), Duration::from_millis(300));
    let (bad, bad_seen) = node(&server, 1, config, Mode::Strict).await;
    fail(&bad, 3).await;
    assert!(bad.check().is_err());
    tokio::time::sleep(Duration::from_millis(350)).await;
    // No local half-open: the node admits as the shared phase says.
    assert!(bad.check().is_ok());
    let permit = bad.acquire().await.unwrap();
    permit.failure().await;
    assert_eq!(local_opens(&bad_seen), 2);
    assert!(bad.check().is_err());
    assert_eq!(bad.snapshot().await.unwrap().phase, Phase::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_failing_nodes_are_stored_bounded_under_the_breakers_hash_tag() {
    let server = RedisServer::start();
    let config = Config::builder()
        .consecutive_failures(1_000)
        .quorum(3)
        .build()
        .unwrap();
    let mut nodes = Vec::new();
    for id in 1..=8 {
        nodes.push(node(&server, id, config.clone(), Mode::Strict).await.0);
    }
    for b in &nodes {
        fail(b, 2).await;
    }
    let stored = server.command(&["HGET", "bb:{quorum}", "quorum"]).unwrap();
    let entries: Vec<&str> = stored.split(',').skip(1).collect();
    assert_eq!(entries.len(), 3, "{stored}");
    let ids: Vec<&str> = entries
        .iter()
        .map(|e| e.split(':').next().unwrap())
        .collect();
    assert_eq!(ids, ["6", "7", "8"], "{stored}");
    // Then the outcomes of the phase and the streak's first: 16 failures in a row.
    assert!(
        stored.split(',').next().unwrap().ends_with(":16:1"),
        "{stored}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_record_of_failing_nodes_is_repaired_once() {
    let server = RedisServer::start();
    let config = config(Some(2), Duration::from_secs(30));
    let (b, seen) = node(&server, 1, config, Mode::Strict).await;
    fail(&b, 1).await;
    server
        .command(&["HSET", "bb:{quorum}", "quorum", "1:x:2,nonsense"])
        .unwrap();
    fail(&b, 1).await;
    let repairs = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|k| matches!(k, EventKind::CorruptStateRepaired { reason } if reason.contains("quorum")))
        .count();
    assert_eq!(repairs, 1, "{:?}", seen.lock().unwrap());
    // A fresh closed state (its permit was of the state replaced, so stale); the next
    // failures count, and are tracked again.
    assert_eq!(b.snapshot().await.unwrap().consecutive_failures, 0);
    fail(&b, 1).await;
    assert_eq!(b.snapshot().await.unwrap().consecutive_failures, 1);
    let stored = server.command(&["HGET", "bb:{quorum}", "quorum"]).unwrap();
    assert!(
        stored.ends_with(":1:1,1:1:") || stored.contains(":1:1,1:1:"),
        "{stored}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_keeps_a_breaker_while_it_is_open_locally() {
    let server = RedisServer::start();
    let config = config(Some(2), Duration::from_millis(300));
    let (b, _) = node(&server, 1, config, Mode::Strict).await;
    fail(&b, 3).await;
    assert!(b.check().is_err());
    assert!(!b.is_idle(), "open locally");
    tokio::time::sleep(Duration::from_millis(350)).await;
    wait_for("idle once the local open phase ended", || b.is_idle()).await;
}
