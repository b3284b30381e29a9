//! `BreakerPermit::record_in_place`: a permit recorded where it lies records once, with
//! the latency given or measured and the retry hint given, and is spent: a second record
//! and its drop change nothing. For every permit of the in-memory engine (owned, borrowed
//! from a program-long breaker, behind `DynBreaker`).

#![allow(clippy::unwrap_used)] // tests unwrap

use std::time::Duration;

use breakerbox::contract::{Breaker, BreakerPermit, DynBreaker, LocalAdmission};
use breakerbox::{CircuitBreaker, ManualClock, Phase, Verdict};

fn admitted<P: std::fmt::Debug>(admission: LocalAdmission<P>) -> P {
    match admission {
        LocalAdmission::Admitted(permit) => permit,
        other => panic!("a closed breaker admits: {other:?}"),
    }
}

/// Two failures trip: a permit that counted twice would open the breaker.
fn two_failures_trip() -> CircuitBreaker {
    CircuitBreaker::builder()
        .consecutive_failures(2)
        .build()
        .unwrap()
}

/// Records in place whatever `P::Recorded` is (it is done already for this engine).
fn record<P: BreakerPermit>(
    permit: &mut P,
    verdict: Verdict,
    latency: Option<Duration>,
    retry_hint: Option<Duration>,
) {
    drop(permit.record_in_place(verdict, latency, retry_hint));
}

/// Records a failure in place twice, then drops the permit: one failure counted.
fn spent_after_one_record<P: BreakerPermit>(mut permit: P) {
    record(&mut permit, Verdict::Failure, None, None);
    record(&mut permit, Verdict::Failure, Some(Duration::ZERO), None);
    drop(permit);
}

#[test]
fn every_in_memory_permit_records_once_and_is_spent() {
    let owned = two_failures_trip();
    spent_after_one_record(admitted(owned.try_acquire_local_owned()));
    let snapshot = owned.snapshot();
    assert_eq!(
        (snapshot.phase, snapshot.consecutive_failures),
        (Phase::Closed, 1)
    );

    let program_long: &'static CircuitBreaker = Box::leak(Box::new(two_failures_trip()));
    spent_after_one_record(admitted(Breaker::try_acquire_local_owned(&program_long)));
    assert_eq!(program_long.snapshot().consecutive_failures, 1);

    let shared = two_failures_trip();
    let dynamic = DynBreaker::new(shared.clone());
    spent_after_one_record(admitted(dynamic.try_acquire_local_owned()));
    assert_eq!(shared.snapshot().consecutive_failures, 1);
    // A second permit's failure is the second one: it trips.
    spent_after_one_record(admitted(dynamic.try_acquire_local_owned()));
    assert_eq!(shared.phase(), Phase::Open);
}

#[test]
fn without_a_latency_it_is_measured_from_the_acquire_and_a_given_one_is_used() {
    let clock = ManualClock::new();
    let breaker = CircuitBreaker::builder()
        .consecutive_failures(100)
        .failure_rate(0.5)
        .slow_call_threshold(Duration::from_millis(100))
        .slow_call_rate(0.9)
        .min_calls(100)
        .count_window(100)
        .clock(clock.clone())
        .build()
        .unwrap();
    // Measured: 150 ms passed since the acquire.
    let mut measured = admitted(breaker.try_acquire_local_owned());
    clock.advance(Duration::from_millis(150));
    record(&mut measured, Verdict::Success, None, None);
    assert_eq!(breaker.snapshot().window.slow, 1, "measured as slow");
    // Given: the 10 ms said wins over the 150 ms that pass.
    let mut given = admitted(breaker.try_acquire_local_owned());
    clock.advance(Duration::from_millis(150));
    record(
        &mut given,
        Verdict::Success,
        Some(Duration::from_millis(10)),
        None,
    );
    let window = breaker.snapshot().window;
    assert_eq!(
        (window.calls, window.slow),
        (2, 1),
        "the given latency is fast"
    );
}

#[test]
fn a_retry_hint_sets_how_long_the_trip_lasts() {
    let breaker = CircuitBreaker::builder()
        .consecutive_failures(1)
        .recovery_timeout(Duration::from_secs(5))
        // A hint is capped at the longest open phase: 300 s here.
        .backoff(2.0, Duration::from_secs(300))
        .jitter(0.0)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let mut permit = admitted(breaker.try_acquire_local_owned());
    record(
        &mut permit,
        Verdict::Failure,
        None,
        Some(Duration::from_secs(120)),
    );
    let open = breaker.try_acquire().unwrap_err();
    assert_eq!(open.retry_after(), Some(Duration::from_secs(120)));
}

#[test]
fn a_probe_recorded_in_place_frees_its_slot_once() {
    let clock = ManualClock::new();
    let breaker = CircuitBreaker::builder()
        .consecutive_failures(1)
        .recovery_timeout(Duration::from_secs(1))
        .jitter(0.0)
        .max_probes(1)
        .required_successes(2)
        .clock(clock.clone())
        .build()
        .unwrap();
    admitted(breaker.try_acquire_local_owned()).failure();
    clock.advance(Duration::from_secs(1));
    let mut probe = admitted(breaker.try_acquire_local_owned());
    assert!(probe.is_probe());
    assert_eq!(breaker.snapshot().probes_in_flight, 1);
    record(&mut probe, Verdict::Success, None, None);
    let snapshot = breaker.snapshot();
    assert_eq!(
        (
            snapshot.phase,
            snapshot.probes_in_flight,
            snapshot.probe_successes
        ),
        (Phase::HalfOpen, 0, 1)
    );
    // The next probe takes the freed slot; dropping the spent one releases nothing more.
    let next = admitted(breaker.try_acquire_local_owned());
    drop(probe);
    assert_eq!(breaker.snapshot().probes_in_flight, 1);
    next.success();
    assert_eq!(breaker.phase(), Phase::Closed);
}
