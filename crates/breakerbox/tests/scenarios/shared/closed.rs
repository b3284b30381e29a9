//! Closed: streaks, windows that slide, exact rates, slow calls, and when a trip is judged.
//! Engine-generic (also run against Redis).

use std::time::Duration;

use breakerbox::{Config, Phase, Verdict};

use crate::scenarios::engine::{counts, start, ScenarioEngine, ScenarioPermit};

pub(crate) fn consecutive_failures_trip_and_a_success_ends_the_streak<E: ScenarioEngine>() {
    let (_clock, breaker) = start::<E>(Config::builder().consecutive_failures(3));
    for _ in 0..2 {
        breaker.try_acquire().unwrap().failure();
    }
    breaker.try_acquire().unwrap().success();
    assert_eq!(breaker.snapshot().consecutive_failures, 0);
    for _ in 0..2 {
        breaker.try_acquire().unwrap().failure();
    }
    assert_eq!(breaker.phase(), Phase::Closed);
    breaker.try_acquire().unwrap().failure();
    assert_eq!(breaker.phase(), Phase::Open);
}

pub(crate) fn healthy_history_then_burst_trips_within_half_the_window<E: ScenarioEngine>() {
    let (_clock, breaker) = start::<E>(
        Config::builder()
            .failure_rate(0.5)
            .count_window(100)
            .min_calls(100),
    );
    for _ in 0..1_000 {
        breaker.try_acquire().unwrap().success();
    }
    assert_eq!(breaker.snapshot().window, counts(100, 0, 0));
    let mut failures = 0;
    while breaker.phase() == Phase::Closed {
        assert!(failures < 100, "the burst never tripped the breaker");
        breaker.try_acquire().unwrap().failure();
        failures += 1;
    }
    assert_eq!(failures, 50, "50 % of a 100-call window is 50 failures");
}

pub(crate) fn fifty_percent_trips_at_exactly_half_not_one_before<E: ScenarioEngine>() {
    let (_clock, breaker) = start::<E>(
        Config::builder()
            .failure_rate(0.5)
            .count_window(100)
            .min_calls(100),
    );
    for _ in 0..51 {
        breaker.try_acquire().unwrap().success();
    }
    for _ in 0..49 {
        breaker.try_acquire().unwrap().failure();
    }
    let snap = breaker.snapshot();
    assert_eq!(
        (snap.phase, snap.window),
        (Phase::Closed, counts(100, 49, 0))
    );
    assert_eq!(snap.failure_rate, Some(0.49));
    breaker.try_acquire().unwrap().failure();
    assert_eq!(breaker.phase(), Phase::Open);
}

pub(crate) fn a_success_that_brings_the_window_to_min_calls_trips<E: ScenarioEngine>() {
    let (_clock, breaker) = start::<E>(
        Config::builder()
            .failure_rate(0.5)
            .count_window(10)
            .min_calls(4),
    );
    for _ in 0..3 {
        breaker.try_acquire().unwrap().failure();
    }
    assert_eq!(breaker.phase(), Phase::Closed, "below min_calls");
    breaker.try_acquire().unwrap().success();
    assert_eq!(breaker.phase(), Phase::Open, "3 of 4 failed");
}

pub(crate) fn ignore_is_neither_a_call_nor_a_break_in_the_streak<E: ScenarioEngine>() {
    let (_clock, breaker) = start::<E>(
        Config::builder()
            .consecutive_failures(3)
            .failure_rate(0.9)
            .count_window(10)
            .min_calls(10),
    );
    breaker.try_acquire().unwrap().failure();
    breaker.try_acquire().unwrap().failure();
    for _ in 0..20 {
        breaker.try_acquire().unwrap().ignore();
    }
    let snap = breaker.snapshot();
    assert_eq!(
        (snap.consecutive_failures, snap.window),
        (2, counts(2, 2, 0))
    );
    breaker.try_acquire().unwrap().failure();
    assert_eq!(breaker.phase(), Phase::Open);
}

pub(crate) fn a_slow_failure_counts_in_both_rates_and_only_strictly_slower_is_slow<
    E: ScenarioEngine,
>() {
    let (_clock, breaker) = start::<E>(
        Config::builder()
            .slow_call_threshold(Duration::from_millis(100))
            .slow_call_rate(0.5)
            .failure_rate(1.0)
            .count_window(4)
            .min_calls(4),
    );
    let record = |verdict, millis| {
        breaker
            .try_acquire()
            .unwrap()
            .record_with_latency(verdict, Duration::from_millis(millis))
    };
    record(Verdict::Success, 100);
    record(Verdict::Failure, 101);
    record(Verdict::Success, 5);
    assert_eq!(breaker.snapshot().window, counts(3, 1, 1));
    record(Verdict::Success, 200);
    let snap = breaker.snapshot();
    assert_eq!(
        snap.phase,
        Phase::Open,
        "2 slow of 4 reach the 50 % slow rate"
    );
    assert_eq!(snap.trips, 1);
}

pub(crate) fn latency_is_measured_through_the_breaker_clock<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(
        Config::builder()
            .slow_call_threshold(Duration::from_millis(100))
            .slow_call_rate(1.0)
            .count_window(2)
            .min_calls(2),
    );
    let permit = breaker.try_acquire().unwrap();
    clock.advance(Duration::from_millis(150));
    permit.success();
    assert_eq!(breaker.snapshot().window, counts(1, 0, 1));
    let _ = breaker.call(|| {
        clock.advance(Duration::from_millis(300));
        Ok::<_, ()>(())
    });
    assert_eq!(breaker.phase(), Phase::Open, "two slow calls of two");
}

pub(crate) fn time_window_forgets_buckets_older_than_the_window<E: ScenarioEngine>() {
    // 10 s in 10 buckets of 1 s, aligned to the clock's zero.
    let (clock, breaker) = start::<E>(
        Config::builder()
            .failure_rate(0.5)
            .time_window(Duration::from_secs(10), 10)
            .min_calls(4),
    );
    clock.advance(Duration::from_millis(999));
    breaker.try_acquire().unwrap().failure(); // bucket 0
    clock.advance(Duration::from_millis(1));
    breaker.try_acquire().unwrap().failure(); // bucket 1
    breaker.try_acquire().unwrap().success(); // bucket 1
    clock.set(breakerbox::Nanos(10_000_000_000 - 1));
    assert_eq!(breaker.snapshot().window, counts(3, 2, 0));
    clock.advance(Duration::from_nanos(1));
    assert_eq!(
        breaker.snapshot().window,
        counts(2, 1, 0),
        "bucket 0 left at 10 s"
    );
    clock.advance(Duration::from_secs(1));
    assert_eq!(
        breaker.snapshot().window,
        counts(0, 0, 0),
        "bucket 1 left at 11 s"
    );
}

pub(crate) fn ageing_buckets_never_trip_only_a_recorded_outcome_does<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(
        Config::builder()
            .failure_rate(0.5)
            .time_window(Duration::from_secs(10), 10)
            .min_calls(2),
    );
    for _ in 0..4 {
        breaker.try_acquire().unwrap().success();
    }
    clock.advance(Duration::from_secs(5));
    for _ in 0..2 {
        breaker.try_acquire().unwrap().failure();
    }
    clock.advance(Duration::from_millis(5_500));
    // The successes aged out: the window alone says 100 %, yet nothing was recorded.
    let snap = breaker.snapshot();
    assert_eq!((snap.phase, snap.window), (Phase::Closed, counts(2, 2, 0)));
    let permit = breaker.try_acquire().expect("an acquire never trips");
    assert_eq!(breaker.phase(), Phase::Closed);
    permit.success();
    assert_eq!(breaker.phase(), Phase::Open, "2 of 3 failed");
}

pub(crate) fn a_new_closed_phase_starts_with_an_empty_window_and_streak<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(
        Config::builder()
            .consecutive_failures(3)
            .failure_rate(0.5)
            .count_window(10)
            .min_calls(10)
            .recovery_timeout(Duration::from_secs(1))
            .required_successes(1),
    );
    for _ in 0..3 {
        breaker.try_acquire().unwrap().failure();
    }
    clock.advance(Duration::from_secs(1));
    breaker.try_acquire().unwrap().success();
    let snap = breaker.snapshot();
    assert_eq!(snap.phase, Phase::Closed);
    assert_eq!(
        (snap.window, snap.consecutive_failures),
        (counts(0, 0, 0), 0)
    );
    breaker.try_acquire().unwrap().failure();
    assert_eq!(breaker.snapshot().window, counts(1, 1, 0));
}

/// Cycles open -> half-open -> open (a failed probe each time) `cycles` times: two
/// generations per cycle and not one closed-phase outcome, like a long outage.
fn long_outage<E: ScenarioEngine>(breaker: &E, clock: &breakerbox::ManualClock, cycles: usize) {
    for _ in 0..cycles {
        clock.advance(Duration::from_secs(1));
        breaker.try_acquire().expect("a probe").failure();
    }
}

pub(crate) fn a_long_outage_does_not_blind_the_count_window<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(
        Config::builder()
            .failure_rate(0.5)
            .count_window(10)
            .min_calls(10)
            .recovery_timeout(Duration::from_secs(1))
            .required_successes(1),
    );
    for _ in 0..10 {
        breaker.try_acquire().unwrap().failure();
    }
    assert_eq!(breaker.phase(), Phase::Open);
    long_outage(&breaker, &clock, 20_000);
    clock.advance(Duration::from_secs(1));
    breaker.try_acquire().unwrap().success();
    assert_eq!(breaker.phase(), Phase::Closed, "recovered");
    for _ in 0..10 {
        breaker.try_acquire().unwrap().failure();
    }
    let snap = breaker.snapshot();
    assert_eq!(
        snap.phase,
        Phase::Open,
        "10 failures of 10 must trip; window: {:?}",
        snap.window
    );
}

pub(crate) fn a_long_outage_does_not_blind_the_time_window<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(
        Config::builder()
            .failure_rate(0.5)
            .time_window(Duration::from_secs(10), 10)
            .min_calls(10)
            .recovery_timeout(Duration::from_secs(1))
            .required_successes(1),
    );
    for _ in 0..10 {
        clock.advance(Duration::from_secs(1));
        breaker.try_acquire().unwrap().failure();
    }
    assert_eq!(breaker.phase(), Phase::Open);
    long_outage(&breaker, &clock, 20_000);
    clock.advance(Duration::from_secs(1));
    breaker.try_acquire().unwrap().success();
    assert_eq!(breaker.phase(), Phase::Closed, "recovered");
    for _ in 0..10 {
        clock.advance(Duration::from_secs(1));
        breaker.try_acquire().unwrap().failure();
    }
    let snap = breaker.snapshot();
    assert_eq!(
        snap.phase,
        Phase::Open,
        "10 failures of 10 must trip; window: {:?}",
        snap.window
    );
}
