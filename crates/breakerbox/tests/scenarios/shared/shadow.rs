//! Shadow mode (rule 20): every rule and transition runs, nothing is rejected, would-be
//! rejections are counted and reported. Engine-generic (also run against Redis).

use std::time::Duration;

use breakerbox::model::PermitKind;
use breakerbox::{EventKind, Phase};

use crate::scenarios::engine::{
    one_failure_trips, start, transitions, trip, ScenarioEngine, ScenarioPermit,
};

fn shadow_rejections(events: &[EventKind]) -> Vec<(Phase, Option<Duration>)> {
    events
        .iter()
        .filter_map(|kind| match kind {
            EventKind::ShadowRejected(open) => Some((open.phase(), open.retry_after())),
            _ => None,
        })
        .collect()
}

pub(crate) fn shadow_trips_as_usual_but_admits_and_counts_would_be_rejections<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(one_failure_trips().shadow(true));
    assert!(breaker.snapshot().shadow);
    trip(&breaker);
    breaker.take_events();
    clock.advance(Duration::from_secs(4));
    for _ in 0..3 {
        let permit = breaker.try_acquire().expect("shadow admits while open");
        assert_eq!(permit.kind(), PermitKind::Passthrough);
        assert_eq!(permit.generation(), 1);
        permit.failure();
    }
    let snap = breaker.snapshot();
    assert_eq!(
        (
            snap.phase,
            snap.generation,
            snap.trips,
            snap.shadow_rejections
        ),
        (Phase::Open, 1, 1, 3),
        "passthrough outcomes change nothing"
    );
    assert_eq!(snap.retry_after, Some(Duration::from_secs(6)));
    let events = breaker.take_events();
    assert_eq!(
        shadow_rejections(&events),
        vec![(Phase::Open, Some(Duration::from_secs(6))); 3]
    );
    assert!(
        !events.iter().any(|e| matches!(e, EventKind::Rejected(_))),
        "{events:?}"
    );
}

pub(crate) fn shadow_keeps_the_half_open_probe_limit_and_its_transitions<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(one_failure_trips().shadow(true).required_successes(1));
    trip(&breaker);
    clock.advance(Duration::from_secs(10));
    let probe = breaker.try_acquire().unwrap();
    assert!(probe.is_probe(), "the cool-down still ends in a probe");
    let extra = breaker
        .try_acquire()
        .expect("shadow admits past the probe limit");
    assert_eq!(extra.kind(), PermitKind::Passthrough);
    extra.success();
    let snap = breaker.snapshot();
    assert_eq!(
        (snap.phase, snap.probes_in_flight, snap.shadow_rejections),
        (Phase::HalfOpen, 1, 1),
        "a passthrough success is not a probe success"
    );
    probe.success();
    assert_eq!(breaker.phase(), Phase::Closed);
    assert_eq!(
        transitions(breaker.take_events()),
        vec![
            (Phase::Closed, Phase::Open),
            (Phase::Open, Phase::HalfOpen),
            (Phase::HalfOpen, Phase::Closed)
        ]
    );
}

pub(crate) fn shadow_admits_the_acquire_that_reopens_a_timed_out_half_open<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(one_failure_trips().shadow(true));
    trip(&breaker);
    clock.advance(Duration::from_secs(10));
    let probe = breaker.try_acquire().unwrap();
    clock.advance(Duration::from_secs(30));
    let permit = breaker.try_acquire().expect("shadow admits");
    assert_eq!(permit.kind(), PermitKind::Passthrough);
    let snap = breaker.snapshot();
    assert_eq!(
        (
            snap.phase,
            snap.generation,
            snap.trips,
            snap.shadow_rejections
        ),
        (Phase::Open, 3, 2, 1),
        "the deadline still re-opens (a trip)"
    );
    assert_eq!(permit.generation(), 3);
    probe.success();
    assert_eq!(breaker.snapshot().stale_results, 1);
}

pub(crate) fn shadow_switches_at_runtime_and_changes_no_phase<E: ScenarioEngine>() {
    let (_clock, breaker) = start::<E>(one_failure_trips());
    breaker.force_open();
    assert_eq!(
        breaker.try_acquire().unwrap_err().phase(),
        Phase::ForcedOpen
    );
    let before = breaker.snapshot();
    breaker.set_shadow(true);
    let on = breaker.snapshot();
    assert!(on.shadow);
    assert_eq!((on.phase, on.generation), (before.phase, before.generation));
    assert!(
        breaker.call(|| Ok::<_, ()>(7)).is_ok(),
        "forced open, in shadow"
    );
    breaker.reset();
    let reset = breaker.snapshot();
    assert!(reset.shadow, "a reset keeps shadow mode");
    assert_eq!(reset.shadow_rejections, 1, "and the count");
    trip(&breaker);
    breaker.set_shadow(false);
    assert!(!breaker.snapshot().shadow);
    assert_eq!(breaker.try_acquire().unwrap_err().phase(), Phase::Open);
    assert_eq!(breaker.snapshot().shadow_rejections, 1);
}

pub(crate) fn shadow_changes_nothing_for_calls_that_are_admitted_anyway<E: ScenarioEngine>() {
    let (_clock, breaker) = start::<E>(one_failure_trips().consecutive_failures(2).shadow(true));
    let permit = breaker.try_acquire().unwrap();
    assert_eq!(permit.kind(), PermitKind::Normal);
    permit.failure();
    assert_eq!(breaker.snapshot().consecutive_failures, 1);
    breaker.disable();
    let permit = breaker.try_acquire().unwrap();
    assert_eq!(permit.kind(), PermitKind::Passthrough);
    drop(permit);
    assert_eq!(
        breaker.snapshot().shadow_rejections,
        0,
        "disabled admits: nothing would have been rejected"
    );
}
