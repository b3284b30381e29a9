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

// ----- check at every boundary ----------------------------------------------------------------

const NS: Duration = Duration::from_nanos(1);

/// `check`, then the acquire it predicts (whose permit is kept, when admitted).
fn check_and_acquire(
    breaker: &CircuitBreaker<ManualClock>,
    held: &mut Vec<OwnedPermit<ManualClock>>,
) -> Result<(), CircuitOpen> {
    let checked = breaker.check();
    let acquired = breaker.try_acquire_owned().map(|permit| held.push(permit));
    assert_eq!(checked, acquired, "check predicts the acquire");
    checked
}

fn open(phase: Phase, retry_after: Option<Duration>) -> Result<(), CircuitOpen> {
    Err(CircuitOpen::new(phase, retry_after))
}

#[test]
fn check_rejects_an_open_phase_until_its_last_nanosecond_and_admits_at_its_end() {
    let (clock, builder) = one_failure_trips();
    let breaker = builder.build().unwrap();
    let mut held = Vec::new();
    breaker.try_acquire().unwrap().failure();
    clock.advance(Duration::from_secs(10) - NS);
    assert_eq!(breaker.check(), open(Phase::Open, Some(NS)));
    assert_eq!(
        check_and_acquire(&breaker, &mut held),
        open(Phase::Open, Some(NS))
    );
    clock.advance(NS);
    assert_eq!(check_and_acquire(&breaker, &mut held), Ok(()));
}

#[test]
fn check_rejects_a_forced_open_phase_with_no_end_without_a_retry_time() {
    let (clock, builder) = one_failure_trips();
    let breaker = builder.build().unwrap();
    let mut held = Vec::new();
    breaker.force_open();
    assert_eq!(
        check_and_acquire(&breaker, &mut held),
        open(Phase::ForcedOpen, None)
    );
    clock.advance(Duration::from_secs(3600));
    assert_eq!(
        check_and_acquire(&breaker, &mut held),
        open(Phase::ForcedOpen, None)
    );
}

#[test]
fn check_rejects_a_timed_forced_open_phase_until_its_last_nanosecond_and_admits_at_its_end() {
    let (clock, builder) = one_failure_trips();
    let breaker = builder.build().unwrap();
    let mut held = Vec::new();
    breaker.force_open_for(Duration::from_secs(3));
    assert_eq!(
        check_and_acquire(&breaker, &mut held),
        open(Phase::ForcedOpen, Some(Duration::from_secs(3)))
    );
    clock.advance(Duration::from_secs(3) - NS);
    assert_eq!(
        check_and_acquire(&breaker, &mut held),
        open(Phase::ForcedOpen, Some(NS))
    );
    clock.advance(NS);
    assert_eq!(check_and_acquire(&breaker, &mut held), Ok(()));
    assert!(held[0].is_probe(), "an expired forced open probes");
}

#[test]
fn check_admits_half_open_while_a_slot_is_free_and_rejects_until_the_deadline_when_full() {
    let (clock, builder) = one_failure_trips();
    let breaker = builder.max_probes(2).build().unwrap();
    let mut held = Vec::new();
    breaker.try_acquire().unwrap().failure();
    clock.advance(Duration::from_secs(10));
    // Open ran out: the acquire enters half-open and takes the first of two slots.
    assert_eq!(check_and_acquire(&breaker, &mut held), Ok(()));
    assert_eq!(breaker.phase(), Phase::HalfOpen);
    assert_eq!(check_and_acquire(&breaker, &mut held), Ok(()));
    assert_eq!(held.len(), 2);
    assert_eq!(
        check_and_acquire(&breaker, &mut held),
        open(Phase::HalfOpen, Some(Duration::from_secs(30)))
    );
    clock.advance(Duration::from_secs(30) - NS);
    assert_eq!(
        check_and_acquire(&breaker, &mut held),
        open(Phase::HalfOpen, Some(NS))
    );
    // A freed slot is free for check as for acquire.
    drop(held.pop());
    assert_eq!(check_and_acquire(&breaker, &mut held), Ok(()));
    // At the deadline the next acquire re-opens, for the recovery timeout.
    clock.advance(NS);
    assert_eq!(
        check_and_acquire(&breaker, &mut held),
        open(Phase::Open, Some(Duration::from_secs(10)))
    );
}

#[test]
fn check_at_a_half_open_deadline_with_jitter_gives_the_shortest_open_phase_it_can_be() {
    let (clock, builder) = one_failure_trips();
    // A source that always draws 0 (no shortening): the re-open lasts the full 10 s,
    // and the earliest it could end, with jitter 0.5, is after 5 s.
    let breaker = builder.jitter(0.5).jitter_source(|| 0.0).build().unwrap();
    breaker.try_acquire().unwrap().failure();
    clock.advance(Duration::from_secs(10));
    let _lost = breaker.try_acquire().unwrap();
    clock.advance(Duration::from_secs(30));
    assert_eq!(
        breaker.check(),
        open(Phase::Open, Some(Duration::from_secs(5)))
    );
    let acquired = breaker.try_acquire().map(drop);
    assert_eq!(acquired, open(Phase::Open, Some(Duration::from_secs(10))));
}

#[test]
fn check_in_shadow_mode_admits_what_the_rules_would_reject() {
    let (clock, builder) = one_failure_trips();
    let breaker = builder.shadow(true).build().unwrap();
    breaker.try_acquire().unwrap().failure();
    assert_eq!(breaker.phase(), Phase::Open);
    assert_eq!(breaker.check(), Ok(()));
    breaker.set_shadow(false);
    assert_eq!(
        breaker.check(),
        open(Phase::Open, Some(Duration::from_secs(10)))
    );
    clock.advance(Duration::from_secs(10));
    assert_eq!(breaker.check(), Ok(()));
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

#[test]
fn check_predicts_every_acquire_of_a_ramp() {
    // Rule 23: half of the ramp's acquires pass at its start (the 0th, not the 1st, ...).
    let (clock, builder) = one_failure_trips();
    let breaker = builder
        .required_successes(1)
        .ramp(0.5, Duration::from_secs(10))
        .build()
        .unwrap();
    breaker.try_acquire().unwrap().failure();
    clock.advance(Duration::from_secs(10));
    breaker.try_acquire().unwrap().success();
    assert_eq!(breaker.phase(), Phase::Closed);
    let mut held = Vec::new();
    let answers: Vec<bool> = (0..20)
        .map(|_| check_and_acquire(&breaker, &mut held).is_ok())
        .collect();
    assert_eq!(&answers[..2], [true, false], "{answers:?}");
    assert!(answers.iter().filter(|&&ok| ok).count() >= 5, "{answers:?}");
}

#[test]
fn check_after_a_reset_that_ended_a_ramp_admits_as_acquire_does() {
    let (clock, builder) = one_failure_trips();
    let breaker = builder
        .required_successes(1)
        .ramp(0.5, Duration::from_secs(10))
        .build()
        .unwrap();
    breaker.try_acquire().unwrap().failure();
    clock.advance(Duration::from_secs(10));
    breaker.try_acquire().unwrap().success();
    // The ramp's 0th acquire passes; its 1st would not.
    let mut held = Vec::new();
    assert_eq!(check_and_acquire(&breaker, &mut held), Ok(()));
    // A reset ends the ramp: a plain closed phase admits everything.
    breaker.reset();
    for _ in 0..4 {
        assert_eq!(check_and_acquire(&breaker, &mut held), Ok(()));
    }
}
