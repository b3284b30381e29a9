//! The core's scenario behaviours against the Redis engine: strict mode, with the scripts'
//! time driven by a `ManualClock` so every run is deterministic.

#![allow(clippy::unwrap_used)] // tests unwrap

#[path = "support/redis_server.rs"]
mod redis_server;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use breakerbox::model::{PermitKind, TransitionReason, TripReason};
use breakerbox::{Config, ConfigBuilder, Event, EventKind, ManualClock, Nanos, Phase, Verdict};
use breakerbox_redis::{Mode, RedisBreaker};
use redis_server::RedisServer;

const START: Nanos = Nanos(1_000_000_000_000);

async fn breaker(
    server: &RedisServer,
    name: &str,
    config: ConfigBuilder,
    clock: &ManualClock,
) -> (RedisBreaker<ManualClock>, Arc<Mutex<Vec<EventKind>>>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let log = events.clone();
    let breaker = RedisBreaker::builder(server.url(), name)
        .config(config.build().unwrap())
        .mode(Mode::Strict)
        .timeout(Duration::from_secs(2))
        .clock(clock.clone())
        .script_time_from_clock()
        // The model's scenarios: probe leases (a Redis rule of their own) never run out.
        .probe_lease(Duration::from_secs(24 * 3600))
        .listener(move |e: &Event<'_>| log.lock().unwrap().push(e.kind.clone()))
        .build()
        .await
        .unwrap();
    (breaker, events)
}

fn base() -> ConfigBuilder {
    Config::builder()
        .consecutive_failures(3)
        .recovery_timeout(Duration::from_secs(10))
        .half_open_timeout(Duration::from_secs(30))
}

async fn fail(b: &RedisBreaker<ManualClock>, n: usize) {
    for _ in 0..n {
        b.acquire().await.unwrap().failure().await;
    }
}

#[tokio::test]
async fn consecutive_failures_trip_and_reject_until_the_recovery_timeout() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(START);
    let (b, events) = breaker(&server, "trip", base(), &clock).await;
    fail(&b, 2).await;
    assert_eq!(b.snapshot().await.unwrap().phase, Phase::Closed);
    fail(&b, 1).await;
    let rejected = b.acquire().await.unwrap_err();
    assert_eq!(rejected.phase(), Phase::Open);
    assert_eq!(rejected.retry_after(), Some(Duration::from_secs(10)));
    clock.advance(Duration::from_secs(4));
    let rejected = b.acquire().await.unwrap_err();
    assert_eq!(rejected.retry_after(), Some(Duration::from_secs(6)));
    clock.advance(Duration::from_secs(6));
    let probe = b.acquire().await.unwrap();
    assert!(probe.is_probe());
    drop(probe);
    let trips: Vec<_> = events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            EventKind::Transition(t) => Some(t.reason),
            _ => None,
        })
        .collect();
    assert_eq!(
        trips,
        [
            TransitionReason::Tripped(TripReason::ConsecutiveFailures),
            TransitionReason::CooldownElapsed
        ]
    );
}

#[tokio::test]
async fn a_success_breaks_the_failure_streak() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(START);
    let (b, _) = breaker(&server, "streak", base(), &clock).await;
    fail(&b, 2).await;
    b.acquire().await.unwrap().success().await;
    fail(&b, 2).await;
    assert_eq!(b.snapshot().await.unwrap().phase, Phase::Closed);
    assert_eq!(b.snapshot().await.unwrap().consecutive_failures, 2);
}

#[tokio::test]
async fn probe_failure_reopens_and_restarts_cooldown_with_backoff() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(START);
    let config = base().backoff(2.0, Duration::from_secs(60));
    let (b, _) = breaker(&server, "backoff", config, &clock).await;
    fail(&b, 3).await;
    clock.advance(Duration::from_secs(10));
    let probe = b.acquire().await.unwrap();
    probe.failure().await;
    let rejected = b.acquire().await.unwrap_err();
    assert_eq!(rejected.phase(), Phase::Open);
    assert_eq!(rejected.retry_after(), Some(Duration::from_secs(20)));
    assert_eq!(b.snapshot().await.unwrap().trips, 2);
}

#[tokio::test]
async fn required_successes_close_the_breaker_and_reset_trips() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(START);
    let config = base().max_probes(2).required_successes(2);
    let (b, _) = breaker(&server, "close", config, &clock).await;
    fail(&b, 3).await;
    clock.advance(Duration::from_secs(10));
    let p1 = b.acquire().await.unwrap();
    let p2 = b.acquire().await.unwrap();
    assert!(p1.is_probe() && p2.is_probe());
    p1.success().await;
    assert_eq!(b.snapshot().await.unwrap().phase, Phase::HalfOpen);
    p2.success().await;
    let snapshot = b.snapshot().await.unwrap();
    assert_eq!(snapshot.phase, Phase::Closed);
    assert_eq!(snapshot.trips, 0);
}

#[tokio::test]
async fn at_most_max_probes_are_admitted_and_the_rest_learn_the_deadline() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(START);
    let config = base().max_probes(2).required_successes(3);
    let (b, _) = breaker(&server, "cap", config, &clock).await;
    fail(&b, 3).await;
    clock.advance(Duration::from_secs(10));
    let _p1 = b.acquire().await.unwrap();
    clock.advance(Duration::from_secs(1));
    let _p2 = b.acquire().await.unwrap();
    let rejected = b.acquire().await.unwrap_err();
    assert_eq!(rejected.phase(), Phase::HalfOpen);
    assert_eq!(rejected.retry_after(), Some(Duration::from_secs(29)));
    assert_eq!(b.snapshot().await.unwrap().probes_in_flight, 2);
}

#[tokio::test]
async fn a_dropped_probe_frees_its_slot_in_redis() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(START);
    let (b, _) = breaker(&server, "dropped", base(), &clock).await;
    fail(&b, 3).await;
    clock.advance(Duration::from_secs(10));
    let probe = b.acquire().await.unwrap();
    assert!(b.acquire().await.is_err());
    drop(probe);
    let mut freed = false;
    for _ in 0..200 {
        if b.snapshot().await.unwrap().probes_in_flight == 0 {
            freed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(freed, "the release task freed the slot");
    assert!(b.acquire().await.unwrap().is_probe());
}

#[tokio::test]
async fn the_half_open_deadline_reclaims_a_crashed_nodes_probe() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(START);
    let (b, _) = breaker(&server, "crashed", base(), &clock).await;
    fail(&b, 3).await;
    clock.advance(Duration::from_secs(10));
    // Another node takes the only slot and crashes: no outcome, no release.
    let crashed = b.acquire().await.unwrap();
    std::mem::forget(crashed);
    clock.advance(Duration::from_secs(29));
    assert_eq!(b.acquire().await.unwrap_err().phase(), Phase::HalfOpen);
    clock.advance(Duration::from_secs(1));
    let rejected = b.acquire().await.unwrap_err();
    assert_eq!(
        rejected.phase(),
        Phase::Open,
        "the timed-out half-open re-opens"
    );
    clock.advance(rejected.retry_after().unwrap());
    assert!(b.acquire().await.unwrap().is_probe());
}

#[tokio::test]
async fn a_late_result_from_the_closed_era_changes_nothing() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(START);
    let (b, events) = breaker(&server, "late", base(), &clock).await;
    let slow_call = b.acquire().await.unwrap();
    fail(&b, 3).await;
    let before = b.snapshot().await.unwrap();
    slow_call.success().await;
    let after = b.snapshot().await.unwrap();
    assert_eq!(after.phase, Phase::Open);
    assert_eq!(after.generation, before.generation);
    assert!(events
        .lock()
        .unwrap()
        .iter()
        .any(|e| matches!(e, EventKind::StaleResult { generation: 0 })));
}

#[tokio::test]
async fn a_slow_probe_success_is_a_probe_failure() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(START);
    let config = base().slow_call_threshold(Duration::from_millis(500));
    let (b, _) = breaker(&server, "slowprobe", config, &clock).await;
    fail(&b, 3).await;
    clock.advance(Duration::from_secs(10));
    let probe = b.acquire().await.unwrap();
    probe
        .record_with_latency(Verdict::Success, Duration::from_millis(501))
        .await;
    assert_eq!(b.snapshot().await.unwrap().phase, Phase::Open);
}

#[tokio::test]
async fn the_failure_rate_trips_once_min_calls_are_in_the_window() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(START);
    let config = Config::builder()
        .failure_rate(0.5)
        .count_window(10)
        .min_calls(4);
    let (b, events) = breaker(&server, "rate", config, &clock).await;
    for verdict in [Verdict::Failure, Verdict::Success, Verdict::Failure] {
        b.acquire().await.unwrap().record(verdict).await;
    }
    assert_eq!(b.snapshot().await.unwrap().phase, Phase::Closed);
    b.acquire().await.unwrap().success().await;
    let snapshot = b.snapshot().await.unwrap();
    assert_eq!(snapshot.phase, Phase::Open);
    assert!(events.lock().unwrap().iter().any(|e| matches!(
        e,
        EventKind::Transition(t) if t.reason == TransitionReason::Tripped(TripReason::FailureRate)
    )));
}

#[tokio::test]
async fn ignored_calls_are_neutral() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(START);
    let (b, _) = breaker(&server, "ignore", base(), &clock).await;
    fail(&b, 2).await;
    b.acquire().await.unwrap().record(Verdict::Ignore).await;
    fail(&b, 1).await;
    assert_eq!(b.snapshot().await.unwrap().phase, Phase::Open);
}

#[tokio::test]
async fn force_open_rejects_without_retry_after_until_reset() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(START);
    let (b, _) = breaker(&server, "forced", base(), &clock).await;
    b.force_open().await.unwrap();
    let rejected = b.acquire().await.unwrap_err();
    assert_eq!(rejected.phase(), Phase::ForcedOpen);
    assert_eq!(rejected.retry_after(), None);
    b.reset().await.unwrap();
    assert_eq!(b.acquire().await.unwrap().kind(), PermitKind::Normal);
}

#[tokio::test]
async fn an_expiring_force_open_then_probes() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(START);
    let (b, _) = breaker(&server, "forced-for", base(), &clock).await;
    b.force_open_for(Duration::from_secs(5)).await.unwrap();
    assert_eq!(
        b.acquire().await.unwrap_err().retry_after(),
        Some(Duration::from_secs(5))
    );
    clock.advance(Duration::from_secs(5));
    assert!(b.acquire().await.unwrap().is_probe());
}

#[tokio::test]
async fn disable_admits_everything_records_nothing_and_expires_to_closed() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(START);
    let (b, _) = breaker(&server, "disabled", base(), &clock).await;
    b.disable_for(Duration::from_secs(5)).await.unwrap();
    for _ in 0..5 {
        let permit = b.acquire().await.unwrap();
        assert_eq!(permit.kind(), PermitKind::Passthrough);
        permit.failure().await;
    }
    clock.advance(Duration::from_secs(5));
    assert_eq!(b.acquire().await.unwrap().kind(), PermitKind::Normal);
    assert_eq!(b.snapshot().await.unwrap().phase, Phase::Closed);
}

#[tokio::test]
async fn two_nodes_share_one_breaker() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(START);
    let (a, _) = breaker(&server, "shared", base(), &clock).await;
    let (b, _) = breaker(&server, "shared", base(), &clock).await;
    fail(&a, 2).await;
    fail(&b, 1).await;
    assert_eq!(a.acquire().await.unwrap_err().phase(), Phase::Open);
}
