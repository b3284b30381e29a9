//! Gradual recovery (rule 23): after half-open closes, a fraction of calls growing from
//! the ramp's start to all of them is admitted; the n-th acquire of the ramp passes iff
//! `(n * 618031) mod 10^6` is below the fraction in parts per million, so which calls
//! pass is stated here exactly. Engine-generic (also run against Redis).

use std::time::Duration;

use breakerbox::model::PermitKind;
use breakerbox::{Config, ConfigBuilder, EventKind, Phase, Rate, RejectReason};

use crate::scenarios::engine::{one_failure_trips, start, trip, ScenarioEngine, ScenarioPermit};

/// Trips, waits out the 10 s open phase and closes with one probe success: the ramp
/// begins at 10 s.
fn recover<E: ScenarioEngine>(breaker: &E, clock: &breakerbox::ManualClock) {
    trip(breaker);
    clock.advance(Duration::from_secs(10));
    breaker
        .try_acquire()
        .expect("the cool-down ends in a probe")
        .success();
    assert_eq!(breaker.phase(), Phase::Closed, "one probe success closes");
}

fn ramped(start: f64, duration: Duration) -> ConfigBuilder {
    one_failure_trips()
        .required_successes(1)
        .ramp(start, duration)
}

/// Which of `count` acquires are admitted (numbered from 0 in this batch); admitted
/// calls succeed, and every rejection must be a ramp rejection.
fn admitted<E: ScenarioEngine>(breaker: &E, count: usize) -> Vec<usize> {
    let mut passed = Vec::new();
    for i in 0..count {
        match breaker.try_acquire() {
            Ok(permit) => {
                assert_eq!(permit.kind(), PermitKind::Normal);
                permit.success();
                passed.push(i);
            }
            Err(open) => {
                assert_eq!(
                    (open.phase(), open.reason(), open.retry_after()),
                    (Phase::Closed, RejectReason::Ramp, None),
                    "a ramp rejection is closed, with no retry_after"
                );
            }
        }
    }
    passed
}

fn ramp_ppm<E: ScenarioEngine>(breaker: &E) -> Option<u32> {
    breaker.snapshot().ramp.map(Rate::ppm)
}

pub(crate) fn ramp_admits_the_stated_fraction_at_stated_times<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(ramped(0.1, Duration::from_secs(10)));
    recover(&breaker, &clock);
    breaker.take_events();
    assert_eq!(
        ramp_ppm(&breaker),
        Some(100_000),
        "10% right after the close"
    );
    // At 10%: acquires 0, 5 and 13 of the first 20.
    assert_eq!(admitted(&breaker, 20), [0, 5, 13]);
    let rejected = breaker
        .take_events()
        .into_iter()
        .filter(|e| matches!(e, EventKind::Rejected(open) if open.reason() == RejectReason::Ramp))
        .count();
    assert_eq!(rejected, 17, "each ramp rejection is announced");
    // Half-way: 10% + 90% / 2 = 55%; acquires 20..40 of the ramp admit 12.
    clock.advance(Duration::from_secs(5));
    assert_eq!(ramp_ppm(&breaker), Some(550_000));
    assert_eq!(
        admitted(&breaker, 20),
        [0, 3, 5, 6, 8, 10, 11, 13, 14, 16, 18, 19]
    );
    let snap = breaker.snapshot();
    assert_eq!(
        (snap.phase, snap.generation),
        (Phase::Closed, 3),
        "no transition"
    );
}

pub(crate) fn the_ramp_ends_at_all_calls<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(ramped(0.1, Duration::from_secs(10)));
    recover(&breaker, &clock);
    clock.advance(Duration::from_millis(9_999));
    assert_eq!(
        ramp_ppm(&breaker),
        Some(999_910),
        "still ramping 1 ms before the end"
    );
    clock.advance(Duration::from_millis(1));
    assert_eq!(ramp_ppm(&breaker), None, "over at its duration");
    assert_eq!(
        admitted(&breaker, 50).len(),
        50,
        "then every call is admitted"
    );
    let snap = breaker.snapshot();
    assert_eq!(
        (snap.phase, snap.generation, snap.trips),
        (Phase::Closed, 3, 0)
    );
}

pub(crate) fn only_a_close_from_half_open_ramps<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(ramped(0.1, Duration::from_secs(10)));
    assert_eq!(ramp_ppm(&breaker), None, "a fresh breaker does not ramp");
    assert_eq!(admitted(&breaker, 10).len(), 10);
    recover(&breaker, &clock);
    assert_eq!(ramp_ppm(&breaker), Some(100_000));
    breaker.reset();
    assert_eq!(
        ramp_ppm(&breaker),
        None,
        "a reset ends the ramp and starts none"
    );
    assert_eq!(admitted(&breaker, 10).len(), 10);
    recover(&breaker, &clock);
    breaker.disable_for(Duration::from_secs(1));
    clock.advance(Duration::from_secs(1));
    assert_eq!(
        admitted(&breaker, 10).len(),
        10,
        "nor does a disable's expiry"
    );
    assert_eq!(breaker.phase(), Phase::Closed);
    assert_eq!(ramp_ppm(&breaker), None);
}

pub(crate) fn a_trip_during_the_ramp_reopens_and_keeps_backing_off<E: ScenarioEngine>() {
    let config = Config::builder()
        .consecutive_failures(1)
        .recovery_timeout(Duration::from_secs(10))
        .backoff(2.0, Duration::from_secs(60))
        .half_open_timeout(Duration::from_secs(30))
        .required_successes(1)
        .ramp(0.5, Duration::from_secs(10));
    let (clock, breaker) = start::<E>(config);
    recover(&breaker, &clock);
    assert_eq!(
        breaker.snapshot().trips,
        1,
        "the close keeps the trips while ramping"
    );
    // The first call of a ramp is always admitted; it fails: the second trip.
    breaker.try_acquire().expect("acquire 0 passes").failure();
    let snap = breaker.snapshot();
    assert_eq!((snap.phase, snap.trips, snap.ramp), (Phase::Open, 2, None));
    assert_eq!(
        snap.retry_after,
        Some(Duration::from_secs(20)),
        "backed off"
    );
    // Recover again; this time the ramp runs out before the next failure arrives.
    clock.advance(Duration::from_secs(20));
    breaker.try_acquire().expect("a probe").success();
    clock.advance(Duration::from_secs(9));
    let late = breaker.try_acquire().expect("acquire 0 passes");
    clock.advance(Duration::from_secs(1));
    late.failure();
    let snap = breaker.snapshot();
    assert_eq!(
        (snap.phase, snap.trips, snap.retry_after),
        (Phase::Open, 1, Some(Duration::from_secs(10))),
        "a trip after the ramp's end is a first trip"
    );
}

pub(crate) fn shadow_admits_what_the_ramp_would_reject<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(ramped(0.1, Duration::from_secs(10)).shadow(true));
    recover(&breaker, &clock);
    let before = breaker.snapshot().shadow_rejections;
    breaker.take_events();
    let kinds: Vec<PermitKind> = (0..6)
        .map(|_| {
            let permit = breaker.try_acquire().expect("shadow admits");
            let kind = permit.kind();
            permit.success();
            kind
        })
        .collect();
    use PermitKind::{Normal, Passthrough};
    assert_eq!(
        kinds,
        [
            Normal,
            Passthrough,
            Passthrough,
            Passthrough,
            Passthrough,
            Normal
        ]
    );
    assert_eq!(breaker.snapshot().shadow_rejections - before, 4);
    let shadowed: Vec<_> = breaker
        .take_events()
        .into_iter()
        .filter_map(|e| match e {
            EventKind::ShadowRejected(open) => Some(open.reason()),
            _ => None,
        })
        .collect();
    assert_eq!(shadowed, vec![RejectReason::Ramp; 4]);
}
