//! `check()` answers what `try_acquire()` would answer now, in every phase, without taking
//! a permit: `Ok` exactly when an acquire would admit, and the same rejection otherwise.

use std::time::Duration;

use breakerbox::{CircuitBreaker, CircuitOpen, ManualClock, OwnedPermit, Phase, Verdict};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

use super::support::one_failure_trips;

#[test]
fn check_rejects_a_half_open_phase_past_its_deadline_as_acquire_does() {
    let (clock, builder) = one_failure_trips();
    let breaker = builder.build().unwrap();
    breaker.try_acquire().unwrap().failure();
    clock.advance(Duration::from_secs(10));
    // The probe never reports: the half-open phase stays until its deadline.
    let _lost = breaker.try_acquire().unwrap();
    assert_eq!(breaker.phase(), Phase::HalfOpen);
    clock.advance(Duration::from_secs(30));

    // Past the deadline, the next acquire re-opens (a second trip) and rejects: so must
    // a readiness check, with the same answer, and without re-opening itself.
    let checked = breaker.check();
    assert_eq!(breaker.phase(), Phase::HalfOpen, "check changes nothing");
    let acquired = breaker.try_acquire().map(drop);
    assert_eq!(breaker.phase(), Phase::Open);
    assert_eq!(checked, acquired);
    let open = checked.unwrap_err();
    assert_eq!(open.phase(), Phase::Open);
    assert_eq!(open.retry_after(), Some(Duration::from_secs(10)));
}

#[test]
fn check_admits_an_open_phase_past_its_end_as_acquire_does() {
    let (clock, builder) = one_failure_trips();
    let breaker = builder.build().unwrap();
    breaker.try_acquire().unwrap().failure();
    clock.advance(Duration::from_secs(10));
    assert_eq!(breaker.check(), Ok(()));
    assert_eq!(breaker.phase(), Phase::Open, "check changes nothing");
    assert!(breaker.try_acquire().unwrap().is_probe());
}

// ----- check and acquire agree after any history ---------------------------------------------

/// One step of a history.
#[derive(Clone, Debug)]
enum Step {
    /// Acquire and keep the permit, if admitted.
    Hold,
    /// Report the verdict of the held permit at this position (modulo how many are held).
    Finish(usize, Verdict),
    /// Drop a held permit without a verdict.
    Release(usize),
    /// Move the clock.
    Advance(Duration),
    ForceOpen(Option<Duration>),
    Disable(Option<Duration>),
    Reset,
}

fn step() -> impl Strategy<Value = Step> {
    let verdict = prop_oneof![
        Just(Verdict::Success),
        Just(Verdict::Failure),
        Just(Verdict::Ignore)
    ];
    // Durations around the config's: 5 s half-open timeout, 10 s (then 20 s) open.
    let duration = prop_oneof![
        Just(Duration::ZERO),
        Just(Duration::from_secs(1)),
        Just(Duration::from_secs(4)),
        Just(Duration::from_secs(5)),
        Just(Duration::from_secs(10)),
        Just(Duration::from_secs(30)),
    ];
    let override_for = prop_oneof![
        Just(None),
        Just(Some(Duration::from_secs(3))),
        Just(Some(Duration::from_secs(10))),
    ];
    prop_oneof![
        4 => Just(Step::Hold),
        4 => (any::<usize>(), verdict).prop_map(|(i, v)| Step::Finish(i, v)),
        1 => any::<usize>().prop_map(Step::Release),
        3 => duration.prop_map(Step::Advance),
        1 => override_for.clone().prop_map(Step::ForceOpen),
        1 => override_for.prop_map(Step::Disable),
        1 => Just(Step::Reset),
    ]
}

fn apply(
    breaker: &CircuitBreaker<ManualClock>,
    clock: &ManualClock,
    held: &mut Vec<OwnedPermit<ManualClock>>,
    step: &Step,
) {
    match step {
        Step::Hold => held.extend(breaker.try_acquire_owned().ok()),
        Step::Finish(i, verdict) if !held.is_empty() => {
            let permit = held.remove(i % held.len());
            permit.record(*verdict);
        }
        Step::Release(i) if !held.is_empty() => drop(held.remove(i % held.len())),
        Step::Finish(..) | Step::Release(_) => {}
        Step::Advance(by) => clock.advance(*by),
        Step::ForceOpen(None) => breaker.force_open(),
        Step::ForceOpen(Some(d)) => breaker.force_open_for(*d),
        Step::Disable(None) => breaker.disable(),
        Step::Disable(Some(d)) => breaker.disable_for(*d),
        Step::Reset => breaker.reset(),
    }
}

/// What `check` said and what the acquire right after it said.
fn check_then_acquire(
    breaker: &CircuitBreaker<ManualClock>,
) -> (Result<(), CircuitOpen>, Result<(), CircuitOpen>) {
    let checked = breaker.check();
    // The permit is dropped at once (a release): part of the history from here on.
    let acquired = breaker.try_acquire().map(drop);
    (checked, acquired)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/proptest-regressions/check_agrees_with_acquire.txt"
        )))),
        ..ProptestConfig::default()
    })]

    /// After every step of a random history (probes held, lost or reported, time moving
    /// past open ends and half-open deadlines, overrides), `check` gives exactly the answer
    /// of the acquire that follows it: the same `Ok`, or the same rejection (no jitter, so
    /// even `retry_after` agrees).
    #[test]
    fn check_agrees_with_try_acquire_in_every_phase(steps in proptest::collection::vec(step(), 1..40)) {
        let clock = ManualClock::new();
        let breaker = CircuitBreaker::builder()
            .clock(clock.clone())
            .consecutive_failures(2)
            .recovery_timeout(Duration::from_secs(10))
            .backoff(2.0, Duration::from_secs(60))
            .half_open_timeout(Duration::from_secs(5))
            .max_probes(2)
            .required_successes(2)
            .build()
            .unwrap();
        let mut held = Vec::new();
        for (i, step) in steps.iter().enumerate() {
            apply(&breaker, &clock, &mut held, step);
            let phase = breaker.phase();
            let (checked, acquired) = check_then_acquire(&breaker);
            prop_assert_eq!(
                checked, acquired,
                "after step {} ({:?}) in {:?} with {} held", i, step, phase, held.len()
            );
        }
    }
}
