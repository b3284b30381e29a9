//! Core scenarios ported to the Redis engine by hand (strict mode, the scripts' time driven
//! by a `ManualClock` from zero), kept where the shared, engine-generic suite
//! (`shared_scenarios.rs`, the core's own files) does not cover them: async calls and
//! their cancellation, concurrent tasks, events and their reasons, the Redis variants of
//! jitter with a constant sample, disable expiry, and the
//! snapshot's `retry_after` of an expiring override.

#![allow(clippy::unwrap_used)] // tests unwrap

#[path = "support/redis_server.rs"]
mod redis_server;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use breakerbox::model::{PermitKind, TransitionReason};
use breakerbox::{
    CallError, Config, ConfigBuilder, Event, EventKind, FnJudge, ManualClock, Phase, Verdict,
};
use breakerbox_redis::{Mode, RedisBreaker};
use redis_server::RedisServer;

type Breaker = RedisBreaker<ManualClock>;

struct Fixture {
    _server: RedisServer,
    clock: ManualClock,
    events: Arc<Mutex<Vec<EventKind>>>,
}

async fn build(config: ConfigBuilder) -> (Fixture, Breaker) {
    build_with(config, |b| b).await
}

async fn build_with(
    config: ConfigBuilder,
    tweak: impl FnOnce(
        breakerbox_redis::RedisBreakerBuilder<ManualClock>,
    ) -> breakerbox_redis::RedisBreakerBuilder<ManualClock>,
) -> (Fixture, Breaker) {
    let server = RedisServer::start();
    let clock = ManualClock::new();
    let events = Arc::new(Mutex::new(Vec::new()));
    let log = events.clone();
    let builder = RedisBreaker::builder(server.url(), "scenario")
        .config(config.build().unwrap())
        .mode(Mode::Strict)
        .timeout(Duration::from_secs(2))
        .clock(clock.clone())
        .script_time_from_clock()
        // The model's scenarios: probe leases (a Redis rule of their own) never run out.
        .probe_lease(Duration::from_secs(24 * 3600))
        .listener(move |e: &Event<'_>| log.lock().unwrap().push(e.kind.clone()));
    let breaker = tweak(builder).build().await.unwrap();
    (
        Fixture {
            _server: server,
            clock,
            events,
        },
        breaker,
    )
}

async fn phase(b: &Breaker) -> Phase {
    b.snapshot().await.unwrap().phase
}

async fn record(b: &Breaker, verdict: Verdict, n: usize) {
    for _ in 0..n {
        b.acquire().await.unwrap().record(verdict).await;
    }
}

// ----- closed.rs ----------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_failures_trip_exactly_once_at_the_streak() {
    let (f, b) = build(
        Config::builder()
            .consecutive_failures(50)
            .recovery_timeout(Duration::from_secs(60)),
    )
    .await;
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let b = b.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..20 {
                if let Ok(permit) = b.acquire().await {
                    permit.failure().await;
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(phase(&b).await, Phase::Open);
    let trips = f
        .events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| matches!(e, EventKind::Transition(t) if t.to == Phase::Open))
        .count();
    assert_eq!(trips, 1);
    assert_eq!(b.snapshot().await.unwrap().trips, 1);
}

// ----- half_open.rs -------------------------------------------------------------------

fn one_failure_trips() -> ConfigBuilder {
    Config::builder()
        .consecutive_failures(1)
        .recovery_timeout(Duration::from_secs(10))
        .half_open_timeout(Duration::from_secs(30))
}

#[tokio::test]
async fn a_probe_result_after_the_deadline_reopens_even_if_no_acquire_noticed() {
    let (f, b) = build(one_failure_trips()).await;
    record(&b, Verdict::Failure, 1).await;
    f.clock.advance(Duration::from_secs(10));
    let probe = b.acquire().await.unwrap();
    let generation = probe.generation();
    f.clock.advance(Duration::from_secs(30));
    probe.success().await;
    let snap = b.snapshot().await.unwrap();
    assert_eq!(snap.phase, Phase::Open);
    assert_eq!(snap.generation, generation + 1);
    assert!(f.events.lock().unwrap().iter().any(|e| matches!(
        e,
        EventKind::Transition(t) if t.reason == TransitionReason::HalfOpenTimedOut
    )));
}

#[tokio::test]
async fn dropped_call_future_frees_its_probe_slot() {
    let (f, b) = build(one_failure_trips()).await;
    record(&b, Verdict::Failure, 1).await;
    f.clock.advance(Duration::from_secs(10));
    {
        let call = b.call(std::future::pending::<Result<(), ()>>());
        let _ = tokio::time::timeout(Duration::from_millis(50), call).await;
    }
    let mut freed = false;
    for _ in 0..200 {
        if b.snapshot().await.unwrap().probes_in_flight == 0 {
            freed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(freed, "the cancelled probe's slot came back");
}

// ----- backoff.rs ---------------------------------------------------------------------

#[tokio::test]
async fn jitter_only_shortens_with_injected_randomness() {
    let config = one_failure_trips().jitter(0.5);
    let (_f, b) = build_with(config, |builder| builder.jitter_source(|| 0.5)).await;
    record(&b, Verdict::Failure, 1).await;
    // 10 s * (1 - 0.5 * 0.5)
    assert_eq!(
        b.acquire().await.unwrap_err().retry_after(),
        Some(Duration::from_millis(7_500))
    );
}

// ----- manual.rs ----------------------------------------------------------------------

#[tokio::test]
async fn force_open_starts_a_new_generation_only_when_the_phase_changes() {
    let (_f, b) = build(one_failure_trips()).await;
    b.force_open().await.unwrap();
    let generation = b.snapshot().await.unwrap().generation;
    b.force_open_for(Duration::from_secs(5)).await.unwrap();
    let snap = b.snapshot().await.unwrap();
    assert_eq!(
        (snap.phase, snap.generation),
        (Phase::ForcedOpen, generation)
    );
    assert_eq!(snap.retry_after, Some(Duration::from_secs(5)));
}

#[tokio::test]
async fn disable_with_expiry_closes_on_any_operation_after_it() {
    let (f, b) = build(one_failure_trips()).await;
    b.disable_for(Duration::from_secs(5)).await.unwrap();
    let permit = b.acquire().await.unwrap();
    assert_eq!(permit.kind(), PermitKind::Passthrough);
    f.clock.advance(Duration::from_secs(5));
    b.acquire().await.unwrap().failure().await;
    assert_eq!(
        phase(&b).await,
        Phase::Open,
        "closed again, then one failure trips"
    );
}

// ----- calls.rs and events.rs ---------------------------------------------------------

#[tokio::test]
async fn call_with_a_judge_can_ignore_errors_that_are_the_callers_fault() {
    let (_f, b) = build(one_failure_trips()).await;
    let judge = FnJudge::new(
        |result: &Result<(), u16>, _latency: Duration| match result {
            Err(404) => Verdict::Ignore,
            Err(_) => Verdict::Failure,
            Ok(()) => Verdict::Success,
        },
    );
    let result = b.call_with(&judge, async { Err::<(), u16>(404) }).await;
    assert_eq!(result, Err(CallError::Inner(404)));
    assert_eq!(phase(&b).await, Phase::Closed);
    let _ = b.call_with(&judge, async { Err::<(), u16>(500) }).await;
    assert_eq!(phase(&b).await, Phase::Open);
}

#[tokio::test]
async fn every_transition_is_announced_once_with_its_reason() {
    let (f, b) = build(one_failure_trips().required_successes(1)).await;
    record(&b, Verdict::Failure, 1).await;
    f.clock.advance(Duration::from_secs(10));
    record(&b, Verdict::Success, 1).await;
    b.force_open().await.unwrap();
    b.disable().await.unwrap();
    b.reset().await.unwrap();
    let seen: Vec<(Phase, Phase, &str)> = f
        .events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            EventKind::Transition(t) => Some((t.from, t.to, t.reason.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        seen,
        [
            (Phase::Closed, Phase::Open, "consecutive_failures"),
            (Phase::Open, Phase::HalfOpen, "cooldown_elapsed"),
            (Phase::HalfOpen, Phase::Closed, "probes_succeeded"),
            (Phase::Closed, Phase::ForcedOpen, "forced_open"),
            (Phase::ForcedOpen, Phase::Disabled, "disabled"),
            (Phase::Disabled, Phase::Closed, "reset"),
        ]
    );
}
