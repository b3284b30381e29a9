//! Half-open: probe slots, successes to close, failures and deadlines to re-open, and
//! results that arrive too late. Engine-generic (also run against Redis).
//!
//! Rule numbers ("rule 7") refer to `docs/RULES.md` in the repository.

use std::time::Duration;

use breakerbox::model::PermitKind;
use breakerbox::{Phase, Verdict};

use crate::scenarios::engine::{one_failure_trips, start, trip, ScenarioEngine, ScenarioPermit};

pub(crate) fn half_open_admits_one_probe_when_max_probes_is_one<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(one_failure_trips().max_probes(1));
    trip(&breaker);
    clock.advance(Duration::from_secs(10));
    let probe = breaker.try_acquire().expect("the first probe");
    assert!(probe.is_probe());
    for _ in 0..100 {
        let rejected = breaker.try_acquire().unwrap_err();
        assert_eq!(rejected.phase(), Phase::HalfOpen);
        assert_eq!(rejected.retry_after(), Some(Duration::from_secs(30)));
    }
    assert_eq!(breaker.snapshot().probes_in_flight, 1);
}

pub(crate) fn max_probes_caps_concurrent_probes_not_total_probes<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(one_failure_trips().max_probes(3).required_successes(5));
    trip(&breaker);
    clock.advance(Duration::from_secs(10));
    let probes: Vec<_> = (0..3).map(|_| breaker.try_acquire().unwrap()).collect();
    assert!(probes.iter().all(|p| p.is_probe()));
    assert!(breaker.try_acquire().is_err(), "a fourth is over the cap");
    for probe in probes {
        probe.success();
        let again = breaker
            .try_acquire()
            .expect("a finished probe frees its slot");
        assert!(again.is_probe());
        std::mem::forget(again); // keep the slot taken, as a hung caller would
    }
    let snap = breaker.snapshot();
    assert_eq!((snap.probes_in_flight, snap.probe_successes), (3, 3));
}

pub(crate) fn two_probe_successes_are_required_to_close<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(one_failure_trips().required_successes(2));
    trip(&breaker);
    clock.advance(Duration::from_secs(10));
    breaker.try_acquire().unwrap().success();
    let snap = breaker.snapshot();
    assert_eq!((snap.phase, snap.probe_successes), (Phase::HalfOpen, 1));
    breaker.try_acquire().unwrap().success();
    let snap = breaker.snapshot();
    assert_eq!((snap.phase, snap.trips), (Phase::Closed, 0));
    assert_eq!(
        breaker.try_acquire().unwrap().kind(),
        PermitKind::Normal,
        "closed again"
    );
}

pub(crate) fn probe_failure_reopens_and_resets_success_count<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(one_failure_trips().required_successes(3));
    trip(&breaker);
    clock.advance(Duration::from_secs(10));
    breaker.try_acquire().unwrap().success();
    breaker.try_acquire().unwrap().success();
    assert_eq!(breaker.snapshot().probe_successes, 2);
    breaker.try_acquire().unwrap().failure();
    let snap = breaker.snapshot();
    assert_eq!(
        (snap.phase, snap.probe_successes, snap.trips),
        (Phase::Open, 0, 2)
    );
    // The next half-open phase starts counting from zero: two successes do not close.
    clock.advance(Duration::from_secs(10));
    breaker.try_acquire().unwrap().success();
    breaker.try_acquire().unwrap().success();
    let snap = breaker.snapshot();
    assert_eq!((snap.phase, snap.probe_successes), (Phase::HalfOpen, 2));
}

pub(crate) fn probe_failure_restarts_the_cooldown<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(one_failure_trips());
    trip(&breaker);
    clock.advance(Duration::from_secs(10));
    let probe = breaker.try_acquire().unwrap();
    clock.advance(Duration::from_secs(4));
    probe.failure();
    // Open again for a full recovery timeout, counted from the probe failure.
    let rejected = breaker.try_acquire().unwrap_err();
    assert_eq!(rejected.phase(), Phase::Open);
    assert_eq!(rejected.retry_after(), Some(Duration::from_secs(10)));
    clock.advance(Duration::from_millis(9_999));
    assert!(breaker.try_acquire().is_err());
    clock.advance(Duration::from_millis(1));
    assert!(breaker.try_acquire().unwrap().is_probe());
}

pub(crate) fn open_timeout_leads_to_half_open<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(one_failure_trips());
    trip(&breaker);
    let generation = breaker.snapshot().generation;
    clock.advance(Duration::from_secs(60));
    // Idle time alone changes nothing: the stored phase is still open, with nothing left.
    let snap = breaker.snapshot();
    assert_eq!(
        (snap.phase, snap.retry_after),
        (Phase::Open, Some(Duration::ZERO))
    );
    let probe = breaker.try_acquire().unwrap();
    assert!(probe.is_probe());
    assert_eq!(probe.generation(), generation + 1);
    let snap = breaker.snapshot();
    assert_eq!((snap.phase, snap.probes_in_flight), (Phase::HalfOpen, 1));
}

pub(crate) fn half_open_timeout_leads_back_to_open<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(one_failure_trips());
    trip(&breaker);
    clock.advance(Duration::from_secs(10));
    let hung = breaker.try_acquire().unwrap();
    clock.advance(Duration::from_millis(29_999));
    assert_eq!(breaker.try_acquire().unwrap_err().phase(), Phase::HalfOpen);
    clock.advance(Duration::from_millis(1));
    let rejected = breaker.try_acquire().unwrap_err();
    assert_eq!(rejected.phase(), Phase::Open, "the phase after the acquire");
    assert_eq!(rejected.retry_after(), Some(Duration::from_secs(10)));
    let snap = breaker.snapshot();
    assert_eq!((snap.trips, snap.probes_in_flight), (2, 0));
    // The hung probe finally answers: too late, it changes nothing.
    hung.success();
    let after = breaker.snapshot();
    assert_eq!(after.phase, Phase::Open);
    assert_eq!(after.stale_results, 1);
}

pub(crate) fn a_probe_result_after_the_deadline_reopens_even_if_no_acquire_noticed<
    E: ScenarioEngine,
>() {
    let (clock, breaker) = start::<E>(one_failure_trips().required_successes(1));
    trip(&breaker);
    clock.advance(Duration::from_secs(10));
    let probe = breaker.try_acquire().unwrap();
    clock.advance(Duration::from_secs(30));
    probe.success();
    let snap = breaker.snapshot();
    assert_eq!(
        (snap.phase, snap.trips, snap.stale_results),
        (Phase::Open, 2, 1)
    );
    assert_eq!(snap.retry_after, Some(Duration::from_secs(10)));
}

pub(crate) fn a_normal_permit_dropped_after_the_deadline_reopens<E: ScenarioEngine>() {
    // Rule 1: every release applies what is due, whatever the permit, so the half-open
    // deadline takes effect at the drop of a permit from the closed era.
    let (clock, breaker) = start::<E>(one_failure_trips());
    let from_closed = breaker.try_acquire().unwrap();
    trip(&breaker);
    clock.advance(Duration::from_secs(10));
    let probe = breaker.try_acquire().unwrap();
    let half_open = probe.generation();
    clock.advance(Duration::from_secs(30));
    drop(from_closed);
    let snap = breaker.snapshot();
    assert_eq!(
        (snap.phase, snap.generation, snap.trips),
        (Phase::Open, half_open + 1, 2)
    );
    assert_eq!(snap.retry_after, Some(Duration::from_secs(10)));
    drop(probe);
}

pub(crate) fn late_result_from_older_generation_changes_nothing<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(one_failure_trips().max_probes(2).required_successes(2));
    let from_closed = breaker.try_acquire().unwrap();
    trip(&breaker);
    clock.advance(Duration::from_secs(10));
    let probe = breaker.try_acquire().unwrap();
    probe.success();
    let before = breaker.snapshot();
    assert_eq!(before.probe_successes, 1);
    // A failure from the closed era must neither re-open nor reset the probe count.
    from_closed.failure();
    let after = breaker.snapshot();
    assert_eq!(after.stale_results, before.stale_results + 1);
    assert_eq!(
        (
            after.phase,
            after.generation,
            after.probe_successes,
            after.probes_in_flight
        ),
        (
            before.phase,
            before.generation,
            before.probe_successes,
            before.probes_in_flight
        )
    );
    // Same for a probe of an earlier half-open phase.
    let old_probe = breaker.try_acquire().unwrap();
    breaker.try_acquire().unwrap().failure();
    assert_eq!(breaker.phase(), Phase::Open);
    clock.advance(Duration::from_secs(10));
    breaker.try_acquire().unwrap().success();
    let before = breaker.snapshot();
    old_probe.success();
    let after = breaker.snapshot();
    assert_eq!(
        after.phase,
        Phase::HalfOpen,
        "an old success does not close"
    );
    assert_eq!(after.probe_successes, before.probe_successes);
}

pub(crate) fn dropped_probe_permit_frees_its_slot<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(one_failure_trips());
    trip(&breaker);
    clock.advance(Duration::from_secs(10));
    let probe = breaker.try_acquire().unwrap();
    assert!(breaker.try_acquire().is_err());
    drop(probe);
    let snap = breaker.snapshot();
    assert_eq!(
        (snap.phase, snap.probes_in_flight, snap.probe_successes),
        (Phase::HalfOpen, 0, 0)
    );
    assert!(breaker.try_acquire().unwrap().is_probe());
}

pub(crate) fn ignore_only_frees_the_probe_slot<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(one_failure_trips().required_successes(2));
    trip(&breaker);
    clock.advance(Duration::from_secs(10));
    breaker.try_acquire().unwrap().success();
    let before = breaker.snapshot();
    breaker.try_acquire().unwrap().ignore();
    let after = breaker.snapshot();
    assert_eq!(after.phase, Phase::HalfOpen);
    assert_eq!(after.generation, before.generation);
    assert_eq!(after.probe_successes, 1, "ignore neither counts nor resets");
    assert_eq!(after.probes_in_flight, 0);
    assert_eq!(after.trips, before.trips);
    breaker.try_acquire().unwrap().success();
    assert_eq!(breaker.phase(), Phase::Closed);
}

pub(crate) fn slow_probe_success_reopens<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(
        one_failure_trips()
            .slow_call_threshold(Duration::from_millis(100))
            .required_successes(1),
    );
    trip(&breaker);
    clock.advance(Duration::from_secs(10));
    breaker
        .try_acquire()
        .unwrap()
        .record_with_latency(Verdict::Success, Duration::from_millis(101));
    let snap = breaker.snapshot();
    assert_eq!((snap.phase, snap.trips), (Phase::Open, 2));

    // The latency measured through the breaker's clock counts the same way.
    clock.advance(Duration::from_secs(10));
    let result = breaker.call(|| {
        clock.advance(Duration::from_millis(250));
        Ok::<_, ()>("200 OK, far too late")
    });
    assert_eq!(result, Ok("200 OK, far too late"));
    assert_eq!(breaker.phase(), Phase::Open);

    // At exactly the threshold a success is a success.
    clock.advance(Duration::from_secs(10));
    breaker
        .try_acquire()
        .unwrap()
        .record_with_latency(Verdict::Success, Duration::from_millis(100));
    assert_eq!(breaker.phase(), Phase::Closed);
}
