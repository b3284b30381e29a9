//! Open durations: backoff, its cap, injected jitter, and what a rejection says about when
//! to retry.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use breakerbox::{CallError, Config, EventKind, ManualClock, Phase};

use crate::scenarios::engine::{one_failure_trips, start, trip, ScenarioEngine, ScenarioPermit};

/// Fails the probe of each successive open phase and returns how long each one lasted.
fn open_durations<E: ScenarioEngine>(
    breaker: &E,
    clock: &ManualClock,
    reopens: usize,
) -> Vec<Duration> {
    let mut seen = Vec::new();
    for i in 0..=reopens {
        let retry = breaker
            .try_acquire()
            .expect_err("open rejects")
            .retry_after()
            .expect("open says when");
        seen.push(retry);
        clock.advance(retry);
        if i < reopens {
            breaker.try_acquire().expect("a probe").failure();
        }
    }
    seen
}

pub(crate) fn backoff_grows_open_duration_and_caps<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(
        Config::builder()
            .consecutive_failures(1)
            .recovery_timeout(Duration::from_secs(1))
            .backoff(2.0, Duration::from_secs(5))
            .required_successes(1),
    );
    trip(&breaker);
    let secs = Duration::from_secs;
    assert_eq!(
        open_durations(&breaker, &clock, 5),
        [secs(1), secs(2), secs(4), secs(5), secs(5), secs(5)]
    );
    assert_eq!(breaker.snapshot().trips, 6);
    // A close resets the backoff.
    breaker.try_acquire().unwrap().success();
    assert_eq!(breaker.snapshot().trips, 0);
    trip(&breaker);
    assert_eq!(
        breaker.try_acquire().unwrap_err().retry_after(),
        Some(secs(1))
    );
}

pub(crate) fn the_half_open_deadline_counts_as_a_trip_for_backoff<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(
        Config::builder()
            .consecutive_failures(1)
            .recovery_timeout(Duration::from_secs(1))
            .backoff(3.0, Duration::from_secs(60))
            .half_open_timeout(Duration::from_secs(2)),
    );
    trip(&breaker);
    clock.advance(Duration::from_secs(1));
    let _hung = breaker.try_acquire().unwrap();
    clock.advance(Duration::from_secs(2));
    let rejected = breaker.try_acquire().unwrap_err();
    assert_eq!(rejected.phase(), Phase::Open);
    assert_eq!(rejected.retry_after(), Some(Duration::from_secs(3)));
    assert_eq!(breaker.snapshot().trips, 2);
}

pub(crate) fn reset_clears_the_backoff<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(
        Config::builder()
            .consecutive_failures(1)
            .recovery_timeout(Duration::from_secs(1))
            .backoff(2.0, Duration::from_secs(60)),
    );
    trip(&breaker);
    clock.advance(Duration::from_secs(1));
    breaker.try_acquire().unwrap().failure();
    assert_eq!(breaker.snapshot().trips, 2);
    breaker.reset();
    assert_eq!(breaker.snapshot().trips, 0);
    trip(&breaker);
    assert_eq!(
        breaker.try_acquire().unwrap_err().retry_after(),
        Some(Duration::from_secs(1))
    );
}

pub(crate) fn jitter_only_shortens_with_injected_randomness<E: ScenarioEngine>() {
    let samples = [0.0, 0.5, 0.75, 0.25];
    let next = Arc::new(AtomicUsize::new(0));
    let drawn = next.clone();
    let clock = ManualClock::new();
    let breaker = E::build(
        Config::builder()
            .consecutive_failures(1)
            .recovery_timeout(Duration::from_secs(1))
            .backoff(2.0, Duration::from_secs(6))
            .jitter(0.5),
        &clock,
        Some(Arc::new(move || {
            samples[drawn.fetch_add(1, Ordering::SeqCst) % samples.len()]
        })),
    );
    trip(&breaker);
    let seen = open_durations(&breaker, &clock, 3);
    let ms = Duration::from_millis;
    // d * (1 - 0.5 * r) for d = 1, 2, 4, 6 (capped) s and r = 0, 0.5, 0.75, 0.25.
    assert_eq!(seen, [ms(1_000), ms(1_500), ms(2_500), ms(5_250)]);
    let drawn = next.load(Ordering::SeqCst);
    assert!(
        (4..=4 + E::SAMPLES_DRAWN_AHEAD).contains(&drawn),
        "one sample per re-open: {drawn} drawn"
    );
    for (d, got) in [1, 2, 4, 6].into_iter().map(Duration::from_secs).zip(seen) {
        assert!(
            got <= d && got >= d / 2,
            "{got:?} outside [{:?}, {d:?}]",
            d / 2
        );
    }
}

pub(crate) fn retry_after_on_every_rejection<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(one_failure_trips());
    trip(&breaker);
    breaker.take_events();
    let mut rejections = Vec::new();
    let mut reject = || {
        let open = breaker.try_acquire().unwrap_err();
        rejections.push(open);
        (open.phase(), open.retry_after())
    };

    // Open: the rest of the open phase, shrinking as time passes.
    assert_eq!(reject(), (Phase::Open, Some(Duration::from_secs(10))));
    clock.advance(Duration::from_millis(2_500));
    assert_eq!(reject(), (Phase::Open, Some(Duration::from_millis(7_500))));
    clock.advance(Duration::from_millis(7_500));

    // Half-open with every slot taken: the time left to the half-open deadline.
    let _probe = breaker.try_acquire().unwrap();
    clock.advance(Duration::from_secs(12));
    assert_eq!(reject(), (Phase::HalfOpen, Some(Duration::from_secs(18))));

    // Forced open: the rest of an expiring override, or nothing to say.
    breaker.force_open_for(Duration::from_secs(60));
    clock.advance(Duration::from_secs(15));
    assert_eq!(reject(), (Phase::ForcedOpen, Some(Duration::from_secs(45))));
    breaker.force_open();
    assert_eq!(reject(), (Phase::ForcedOpen, None));

    // The same answer comes through `call` and the rejection events.
    match breaker.call(|| Ok::<_, ()>(())) {
        Err(CallError::Open(open)) => rejections.push(open),
        other => panic!("expected a rejection, got {other:?}"),
    }
    let events: Vec<_> = breaker
        .take_events()
        .into_iter()
        .filter_map(|kind| match kind {
            EventKind::Rejected(open) => Some(open),
            _ => None,
        })
        .collect();
    assert_eq!(events, rejections);
    let snap = breaker.snapshot();
    assert_eq!((snap.phase, snap.retry_after), (Phase::ForcedOpen, None));
}
