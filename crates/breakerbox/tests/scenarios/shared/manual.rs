//! Manual control: force open, disable (with and without expiry) and reset. Engine-generic
//! (also run against Redis).

use std::time::Duration;

use breakerbox::model::PermitKind;
use breakerbox::{Phase, Verdict};

use crate::scenarios::engine::{
    one_failure_trips, start, transitions, trip, ScenarioEngine, ScenarioPermit,
};

pub(crate) fn force_open_starts_a_new_generation_only_when_the_phase_changes<E: ScenarioEngine>() {
    let (_clock, breaker) = start::<E>(one_failure_trips());
    breaker.force_open();
    let snap = breaker.snapshot();
    assert_eq!((snap.phase, snap.generation), (Phase::ForcedOpen, 1));
    breaker.force_open();
    breaker.force_open_for(Duration::from_secs(5));
    assert_eq!(breaker.snapshot().generation, 1);
    let rejected = breaker.try_acquire().unwrap_err();
    assert_eq!(rejected.phase(), Phase::ForcedOpen);
    assert_eq!(rejected.retry_after(), Some(Duration::from_secs(5)));
}

pub(crate) fn force_open_from_open_keeps_the_trip_count<E: ScenarioEngine>() {
    let (_clock, breaker) = start::<E>(one_failure_trips());
    trip(&breaker);
    breaker.force_open();
    let snap = breaker.snapshot();
    assert_eq!(
        (snap.phase, snap.generation, snap.trips),
        (Phase::ForcedOpen, 2, 1)
    );
}

pub(crate) fn force_open_for_expiry_sends_the_next_acquire_to_half_open<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(one_failure_trips().required_successes(1));
    breaker.force_open_for(Duration::from_secs(5));
    clock.advance(Duration::from_millis(4_999));
    assert_eq!(
        breaker.try_acquire().unwrap_err().retry_after(),
        Some(Duration::from_millis(1))
    );
    clock.advance(Duration::from_millis(1));
    assert_eq!(
        breaker.phase(),
        Phase::ForcedOpen,
        "nothing moves without an acquire"
    );
    let probe = breaker.try_acquire().unwrap();
    assert!(probe.is_probe());
    assert_eq!(breaker.phase(), Phase::HalfOpen);
    probe.success();
    assert_eq!(breaker.phase(), Phase::Closed);
}

pub(crate) fn force_open_from_half_open_makes_its_probes_stale<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(one_failure_trips().required_successes(1));
    trip(&breaker);
    clock.advance(Duration::from_secs(10));
    let probe = breaker.try_acquire().unwrap();
    breaker.force_open();
    probe.success();
    let snap = breaker.snapshot();
    assert_eq!((snap.phase, snap.stale_results), (Phase::ForcedOpen, 1));
}

pub(crate) fn disable_admits_everything_and_records_nothing<E: ScenarioEngine>() {
    let (_clock, breaker) = start::<E>(one_failure_trips());
    breaker.disable();
    let generation = breaker.snapshot().generation;
    for _ in 0..10 {
        let permit = breaker.try_acquire().unwrap();
        assert_eq!(permit.kind(), PermitKind::Passthrough);
        permit.failure();
    }
    assert_eq!(
        breaker
            .call(|| Err::<(), _>("boom"))
            .unwrap_err()
            .into_inner(),
        Some("boom")
    );
    let snap = breaker.snapshot();
    assert_eq!((snap.phase, snap.generation), (Phase::Disabled, generation));
    breaker.disable();
    assert_eq!(
        breaker.snapshot().generation,
        generation,
        "already disabled"
    );
}

pub(crate) fn disable_with_expiry_closes_on_any_operation_after_it<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(one_failure_trips());
    breaker.disable_for(Duration::from_secs(5));
    let passthrough = breaker.try_acquire().unwrap();
    clock.advance(Duration::from_secs(5));
    assert_eq!(
        breaker.phase(),
        Phase::Disabled,
        "a snapshot changes nothing"
    );
    // The outcome that arrives after the expiry closes the breaker and is itself stale.
    passthrough.record(Verdict::Failure);
    let snap = breaker.snapshot();
    assert_eq!(
        (snap.phase, snap.stale_results, snap.trips),
        (Phase::Closed, 1, 0)
    );
    assert_eq!(
        transitions(breaker.take_events()),
        [
            (Phase::Closed, Phase::Disabled),
            (Phase::Disabled, Phase::Closed)
        ]
    );
    // The fresh closed phase trips on its own first failure.
    trip(&breaker);

    // An acquire after the expiry closes too, and gets a normal permit.
    breaker.disable_for(Duration::from_secs(1));
    clock.advance(Duration::from_secs(1));
    assert_eq!(breaker.try_acquire().unwrap().kind(), PermitKind::Normal);
}

pub(crate) fn a_dropped_permit_after_disable_expiry_closes_the_breaker<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(one_failure_trips());
    breaker.disable_for(Duration::from_secs(5));
    let passthrough = breaker.try_acquire().unwrap();
    clock.advance(Duration::from_secs(6));
    drop(passthrough);
    assert_eq!(breaker.phase(), Phase::Closed);
}

pub(crate) fn reset_always_starts_a_fresh_closed_generation<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(one_failure_trips().consecutive_failures(3));
    let held = breaker.try_acquire().unwrap();
    breaker.try_acquire().unwrap().failure();
    breaker.try_acquire().unwrap().failure();
    breaker.reset();
    let snap = breaker.snapshot();
    assert_eq!(
        (snap.phase, snap.generation, snap.consecutive_failures),
        (Phase::Closed, 1, 0)
    );
    held.failure();
    assert_eq!(
        breaker.snapshot().consecutive_failures,
        0,
        "the old permit is stale"
    );

    // From every other phase as well, clearing overrides and trips.
    let setups: [fn(&E); 3] = [
        |b| b.force_open(),
        |b| b.disable(),
        |b| b.force_open_for(Duration::from_secs(1)),
    ];
    for setup in setups {
        setup(&breaker);
        let generation = breaker.snapshot().generation;
        breaker.reset();
        let snap = breaker.snapshot();
        assert_eq!(
            (snap.phase, snap.generation, snap.retry_after),
            (Phase::Closed, generation + 1, None)
        );
        assert_eq!(breaker.try_acquire().unwrap().kind(), PermitKind::Normal);
    }
    for _ in 0..3 {
        breaker.try_acquire().unwrap().failure();
    }
    clock.advance(Duration::from_secs(10));
    let _probe = breaker.try_acquire().unwrap();
    breaker.reset();
    let snap = breaker.snapshot();
    assert_eq!(
        (snap.phase, snap.trips, snap.probes_in_flight),
        (Phase::Closed, 0, 0)
    );
}

pub(crate) fn a_snapshot_tells_the_time_left_of_a_timed_override<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(one_failure_trips());
    assert_eq!(
        breaker.snapshot().override_left,
        None,
        "closed: no override"
    );
    breaker.disable_for(Duration::from_secs(5));
    clock.advance(Duration::from_secs(2));
    let snap = breaker.snapshot();
    assert_eq!(snap.phase, Phase::Disabled);
    assert_eq!(snap.override_left, Some(Duration::from_secs(3)));
    assert_eq!(snap.retry_after, None, "a disable rejects nothing");
    breaker.disable();
    assert_eq!(breaker.snapshot().override_left, None, "no end");
    breaker.force_open_for(Duration::from_secs(7));
    clock.advance(Duration::from_secs(1));
    let snap = breaker.snapshot();
    assert_eq!(
        (snap.phase, snap.override_left, snap.retry_after),
        (
            Phase::ForcedOpen,
            Some(Duration::from_secs(6)),
            Some(Duration::from_secs(6))
        )
    );
    breaker.force_open();
    assert_eq!(breaker.snapshot().override_left, None, "no end");
    breaker.reset();
    trip(&breaker);
    assert_eq!(breaker.phase(), Phase::Open);
    assert_eq!(
        breaker.snapshot().override_left,
        None,
        "a trip is no override"
    );
}
