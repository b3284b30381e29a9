//! The core crate's scenarios (`crates/breakerbox/tests/scenarios`), ported to the Redis
//! engine: strict mode, the scripts' time driven by a `ManualClock` from zero, as in the
//! core suite. Same configs, same steps, same expectations.

#![allow(clippy::unwrap_used)] // tests unwrap

#[path = "support/redis_server.rs"]
mod redis_server;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use breakerbox::model::{PermitKind, TransitionReason, WindowCounts};
use breakerbox::{CallError, Config, ConfigBuilder, FnJudge, ManualClock, Nanos, Phase, Verdict};
use breakerbox_redis::{Mode, RedisBreaker, RedisEvent};
use redis_server::RedisServer;

type Breaker = RedisBreaker<ManualClock>;

fn counts(calls: u64, failures: u64, slow: u64) -> WindowCounts {
    WindowCounts {
        calls,
        failures,
        slow,
    }
}

struct Fixture {
    _server: RedisServer,
    clock: ManualClock,
    events: Arc<Mutex<Vec<RedisEvent>>>,
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
        .listener(move |_: &str, e: &RedisEvent| log.lock().unwrap().push(e.clone()));
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

async fn window(b: &Breaker) -> WindowCounts {
    b.snapshot().await.unwrap().window
}

async fn record(b: &Breaker, verdict: Verdict, n: usize) {
    for _ in 0..n {
        b.acquire().await.unwrap().record(verdict).await;
    }
}

// ----- closed.rs ----------------------------------------------------------------------

#[tokio::test]
async fn healthy_history_then_burst_trips_within_half_the_window() {
    let (_f, b) = build(
        Config::builder()
            .failure_rate(0.5)
            .count_window(100)
            .min_calls(100),
    )
    .await;
    record(&b, Verdict::Success, 1_000).await;
    assert_eq!(window(&b).await, counts(100, 0, 0));
    let mut failures = 0;
    while phase(&b).await == Phase::Closed {
        assert!(failures < 100, "the burst never tripped the breaker");
        record(&b, Verdict::Failure, 1).await;
        failures += 1;
    }
    assert_eq!(failures, 50, "50 % of a 100-call window is 50 failures");
}

#[tokio::test]
async fn fifty_percent_trips_at_exactly_half_not_one_before() {
    let (_f, b) = build(
        Config::builder()
            .failure_rate(0.5)
            .count_window(100)
            .min_calls(100),
    )
    .await;
    record(&b, Verdict::Success, 51).await;
    record(&b, Verdict::Failure, 49).await;
    let snap = b.snapshot().await.unwrap();
    assert_eq!(
        (snap.phase, snap.window),
        (Phase::Closed, counts(100, 49, 0))
    );
    assert_eq!(snap.failure_rate, Some(0.49));
    record(&b, Verdict::Failure, 1).await;
    assert_eq!(phase(&b).await, Phase::Open);
}

#[tokio::test]
async fn ignore_is_neither_a_call_nor_a_break_in_the_streak() {
    let config = Config::builder()
        .consecutive_failures(3)
        .failure_rate(0.9)
        .count_window(10)
        .min_calls(10);
    let (_f, b) = build(config).await;
    record(&b, Verdict::Failure, 2).await;
    record(&b, Verdict::Ignore, 20).await;
    let snap = b.snapshot().await.unwrap();
    assert_eq!(
        (snap.consecutive_failures, snap.window),
        (2, counts(2, 2, 0))
    );
    record(&b, Verdict::Failure, 1).await;
    assert_eq!(phase(&b).await, Phase::Open);
}

#[tokio::test]
async fn a_slow_failure_counts_in_both_rates_and_only_strictly_slower_is_slow() {
    let config = Config::builder()
        .slow_call_threshold(Duration::from_millis(100))
        .slow_call_rate(0.5)
        .failure_rate(1.0)
        .count_window(4)
        .min_calls(4);
    let (_f, b) = build(config).await;
    for (verdict, millis) in [
        (Verdict::Success, 100),
        (Verdict::Failure, 101),
        (Verdict::Success, 5),
    ] {
        let permit = b.acquire().await.unwrap();
        permit
            .record_with_latency(verdict, Duration::from_millis(millis))
            .await;
    }
    assert_eq!(window(&b).await, counts(3, 1, 1));
    let permit = b.acquire().await.unwrap();
    permit
        .record_with_latency(Verdict::Success, Duration::from_millis(200))
        .await;
    let snap = b.snapshot().await.unwrap();
    assert_eq!(
        snap.phase,
        Phase::Open,
        "2 slow of 4 reach the 50 % slow rate"
    );
    assert_eq!(snap.trips, 1);
}

#[tokio::test]
async fn latency_is_measured_through_the_breaker_clock() {
    let config = Config::builder()
        .slow_call_threshold(Duration::from_millis(100))
        .slow_call_rate(1.0)
        .count_window(2)
        .min_calls(2);
    let (f, b) = build(config).await;
    let permit = b.acquire().await.unwrap();
    f.clock.advance(Duration::from_millis(150));
    permit.success().await;
    assert_eq!(window(&b).await, counts(1, 0, 1));
    let clock = f.clock.clone();
    let _ = b
        .call(async move {
            clock.advance(Duration::from_millis(300));
            Ok::<_, ()>(())
        })
        .await;
    assert_eq!(phase(&b).await, Phase::Open, "two slow calls of two");
}

#[tokio::test]
async fn time_window_forgets_buckets_older_than_the_window() {
    let config = Config::builder()
        .failure_rate(0.5)
        .time_window(Duration::from_secs(10), 10)
        .min_calls(4);
    let (f, b) = build(config).await;
    f.clock.advance(Duration::from_millis(999));
    record(&b, Verdict::Failure, 1).await; // bucket 0
    f.clock.advance(Duration::from_millis(1));
    record(&b, Verdict::Failure, 1).await; // bucket 1
    record(&b, Verdict::Success, 1).await; // bucket 1
                                           // The Redis engine keeps microseconds: the last microsecond before 10 s.
    f.clock.set(Nanos(10_000_000_000 - 1_000));
    assert_eq!(window(&b).await, counts(3, 2, 0));
    f.clock.set(Nanos(10_000_000_000));
    assert_eq!(window(&b).await, counts(2, 1, 0), "bucket 0 left at 10 s");
    f.clock.advance(Duration::from_secs(1));
    assert_eq!(window(&b).await, counts(0, 0, 0), "bucket 1 left at 11 s");
}

#[tokio::test]
async fn ageing_buckets_never_trip_only_a_recorded_outcome_does() {
    let config = Config::builder()
        .failure_rate(0.5)
        .time_window(Duration::from_secs(10), 10)
        .min_calls(2);
    let (f, b) = build(config).await;
    record(&b, Verdict::Success, 4).await;
    f.clock.advance(Duration::from_secs(5));
    record(&b, Verdict::Failure, 2).await;
    f.clock.advance(Duration::from_millis(5_500));
    let snap = b.snapshot().await.unwrap();
    assert_eq!((snap.phase, snap.window), (Phase::Closed, counts(2, 2, 0)));
    let permit = b.acquire().await.expect("an acquire never trips");
    assert_eq!(phase(&b).await, Phase::Closed);
    permit.success().await;
    assert_eq!(phase(&b).await, Phase::Open, "2 of 3 failed");
}

#[tokio::test]
async fn a_new_closed_phase_starts_with_an_empty_window_and_streak() {
    let config = Config::builder()
        .consecutive_failures(3)
        .failure_rate(0.5)
        .count_window(10)
        .min_calls(10)
        .recovery_timeout(Duration::from_secs(1))
        .required_successes(1);
    let (f, b) = build(config).await;
    record(&b, Verdict::Failure, 3).await;
    f.clock.advance(Duration::from_secs(1));
    record(&b, Verdict::Success, 1).await;
    let snap = b.snapshot().await.unwrap();
    assert_eq!(snap.phase, Phase::Closed);
    assert_eq!(
        (snap.window, snap.consecutive_failures),
        (counts(0, 0, 0), 0)
    );
    record(&b, Verdict::Failure, 1).await;
    assert_eq!(window(&b).await, counts(1, 1, 0));
}

#[tokio::test]
async fn a_long_outage_does_not_blind_the_count_window() {
    let config = Config::builder()
        .failure_rate(0.5)
        .count_window(10)
        .min_calls(10)
        .recovery_timeout(Duration::from_secs(1))
        .required_successes(1);
    let (f, b) = build(config).await;
    record(&b, Verdict::Failure, 10).await;
    assert_eq!(phase(&b).await, Phase::Open);
    for _ in 0..2_000 {
        f.clock.advance(Duration::from_secs(1));
        b.acquire().await.expect("a probe").failure().await;
    }
    f.clock.advance(Duration::from_secs(1));
    record(&b, Verdict::Success, 1).await;
    assert_eq!(phase(&b).await, Phase::Closed, "recovered");
    record(&b, Verdict::Failure, 10).await;
    assert_eq!(
        phase(&b).await,
        Phase::Open,
        "the window still sees failures"
    );
}

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
        .filter(|e| matches!(e, RedisEvent::Transition(t) if t.to == Phase::Open))
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
async fn max_probes_caps_concurrent_probes_not_total_probes() {
    let (f, b) = build(one_failure_trips().max_probes(2).required_successes(5)).await;
    record(&b, Verdict::Failure, 1).await;
    f.clock.advance(Duration::from_secs(10));
    let p1 = b.acquire().await.unwrap();
    let p2 = b.acquire().await.unwrap();
    assert!(b.acquire().await.is_err(), "two in flight");
    p1.success().await;
    let p3 = b.acquire().await.unwrap();
    assert!(p3.is_probe());
    p2.success().await;
    p3.success().await;
    assert_eq!(b.snapshot().await.unwrap().probe_successes, 3);
}

#[tokio::test]
async fn probe_failure_reopens_and_resets_success_count() {
    let (f, b) = build(one_failure_trips().required_successes(2)).await;
    record(&b, Verdict::Failure, 1).await;
    f.clock.advance(Duration::from_secs(10));
    b.acquire().await.unwrap().success().await;
    assert_eq!(b.snapshot().await.unwrap().probe_successes, 1);
    b.acquire().await.unwrap().failure().await;
    assert_eq!(phase(&b).await, Phase::Open);
    f.clock.advance(Duration::from_secs(10));
    b.acquire().await.unwrap().success().await;
    let snap = b.snapshot().await.unwrap();
    assert_eq!((snap.phase, snap.probe_successes), (Phase::HalfOpen, 1));
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
        RedisEvent::Transition(t) if t.reason == TransitionReason::HalfOpenTimedOut
    )));
}

#[tokio::test]
async fn ignore_only_frees_the_probe_slot() {
    let (f, b) = build(one_failure_trips()).await;
    record(&b, Verdict::Failure, 1).await;
    f.clock.advance(Duration::from_secs(10));
    b.acquire().await.unwrap().ignore().await;
    let snap = b.snapshot().await.unwrap();
    assert_eq!(
        (snap.phase, snap.probes_in_flight, snap.probe_successes),
        (Phase::HalfOpen, 0, 0)
    );
    assert!(b.acquire().await.unwrap().is_probe());
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
async fn the_half_open_deadline_counts_as_a_trip_for_backoff() {
    let config = one_failure_trips().backoff(2.0, Duration::from_secs(100));
    let (f, b) = build(config).await;
    record(&b, Verdict::Failure, 1).await;
    f.clock.advance(Duration::from_secs(10));
    let lost = b.acquire().await.unwrap();
    std::mem::forget(lost);
    f.clock.advance(Duration::from_secs(30));
    let rejected = b.acquire().await.unwrap_err();
    assert_eq!(rejected.phase(), Phase::Open);
    assert_eq!(
        rejected.retry_after(),
        Some(Duration::from_secs(20)),
        "second trip: 2x"
    );
}

#[tokio::test]
async fn reset_clears_the_backoff() {
    let config = one_failure_trips().backoff(2.0, Duration::from_secs(100));
    let (f, b) = build(config).await;
    record(&b, Verdict::Failure, 1).await;
    f.clock.advance(Duration::from_secs(10));
    b.acquire().await.unwrap().failure().await;
    assert_eq!(b.snapshot().await.unwrap().trips, 2);
    b.reset().await.unwrap();
    record(&b, Verdict::Failure, 1).await;
    assert_eq!(
        b.acquire().await.unwrap_err().retry_after(),
        Some(Duration::from_secs(10))
    );
}

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
    b.force_open(None).await.unwrap();
    let generation = b.snapshot().await.unwrap().generation;
    b.force_open(Some(Duration::from_secs(5))).await.unwrap();
    let snap = b.snapshot().await.unwrap();
    assert_eq!(
        (snap.phase, snap.generation),
        (Phase::ForcedOpen, generation)
    );
    assert_eq!(snap.retry_after, Some(Duration::from_secs(5)));
}

#[tokio::test]
async fn force_open_from_open_keeps_the_trip_count() {
    let (_f, b) = build(one_failure_trips()).await;
    record(&b, Verdict::Failure, 1).await;
    b.force_open(None).await.unwrap();
    assert_eq!(b.snapshot().await.unwrap().trips, 1);
}

#[tokio::test]
async fn force_open_from_half_open_makes_its_probes_stale() {
    let (f, b) = build(one_failure_trips()).await;
    record(&b, Verdict::Failure, 1).await;
    f.clock.advance(Duration::from_secs(10));
    let probe = b.acquire().await.unwrap();
    b.force_open(None).await.unwrap();
    probe.success().await;
    let snap = b.snapshot().await.unwrap();
    assert_eq!((snap.phase, snap.probe_successes), (Phase::ForcedOpen, 0));
    assert!(f
        .events
        .lock()
        .unwrap()
        .iter()
        .any(|e| matches!(e, RedisEvent::StaleResult { .. })));
}

#[tokio::test]
async fn disable_with_expiry_closes_on_any_operation_after_it() {
    let (f, b) = build(one_failure_trips()).await;
    b.disable(Some(Duration::from_secs(5))).await.unwrap();
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

#[tokio::test]
async fn reset_always_starts_a_fresh_closed_generation() {
    let (_f, b) = build(one_failure_trips()).await;
    let before = b.snapshot().await.unwrap().generation;
    b.reset().await.unwrap();
    let snap = b.snapshot().await.unwrap();
    assert_eq!((snap.phase, snap.generation), (Phase::Closed, before + 1));
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
    b.force_open(None).await.unwrap();
    b.disable(None).await.unwrap();
    b.reset().await.unwrap();
    let seen: Vec<(Phase, Phase, &str)> = f
        .events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            RedisEvent::Transition(t) => Some((t.from, t.to, t.reason.as_str())),
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
