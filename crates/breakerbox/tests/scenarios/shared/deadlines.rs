//! Call and probe deadlines (rule 22): a call later than its permit's deadline is a
//! failure with reason timeout, whatever its verdict. Engine-generic (also run against
//! Redis).

use std::time::Duration;

use breakerbox::Phase;

use crate::scenarios::engine::{
    one_failure_trips, start, transitions, trip, ScenarioEngine, ScenarioPermit,
};

fn deadlines() -> breakerbox::ConfigBuilder {
    one_failure_trips()
        .consecutive_failures(2)
        .call_timeout(Duration::from_secs(2))
        .probe_timeout(Duration::from_millis(500))
}

pub(crate) fn a_success_later_than_the_call_timeout_is_a_failure<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(deadlines());
    let permit = breaker.try_acquire().unwrap();
    clock.advance(Duration::from_millis(2_001));
    permit.success();
    assert_eq!(
        breaker.snapshot().consecutive_failures,
        1,
        "late: a failure"
    );
    breaker
        .try_acquire()
        .unwrap()
        .record_with_latency(breakerbox::Verdict::Ignore, Duration::from_millis(2_001));
    assert_eq!(
        breaker.phase(),
        Phase::Open,
        "a late ignore is a failure too"
    );
}

pub(crate) fn a_call_within_the_call_timeout_keeps_its_verdict<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(deadlines());
    breaker.try_acquire().unwrap().failure();
    let permit = breaker.try_acquire().unwrap();
    clock.advance(Duration::from_secs(2));
    permit.success();
    assert_eq!(
        breaker.snapshot().consecutive_failures,
        0,
        "exactly at the deadline is in time"
    );
}

pub(crate) fn a_late_synchronous_call_is_judged_a_timeout_failure<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(deadlines().consecutive_failures(1));
    let answer = breaker.call(|| {
        clock.advance(Duration::from_secs(3));
        Ok::<_, ()>("late")
    });
    assert_eq!(answer.ok(), Some("late"), "the result is still returned");
    assert_eq!(breaker.phase(), Phase::Open);
}

pub(crate) fn a_probe_later_than_the_probe_timeout_reopens<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(deadlines().consecutive_failures(1).required_successes(1));
    trip(&breaker);
    clock.advance(Duration::from_secs(10));
    let probe = breaker.try_acquire().unwrap();
    assert!(probe.is_probe());
    clock.advance(Duration::from_millis(501));
    probe.success();
    assert_eq!(
        breaker.phase(),
        Phase::Open,
        "a late probe is a failed probe"
    );
    clock.advance(Duration::from_secs(10));
    let probe = breaker.try_acquire().unwrap();
    clock.advance(Duration::from_millis(500));
    probe.success();
    assert_eq!(breaker.phase(), Phase::Closed, "in time, it closes");
    assert_eq!(
        transitions(breaker.take_events()),
        vec![
            (Phase::Closed, Phase::Open),
            (Phase::Open, Phase::HalfOpen),
            (Phase::HalfOpen, Phase::Open),
            (Phase::Open, Phase::HalfOpen),
            (Phase::HalfOpen, Phase::Closed),
        ]
    );
}

pub(crate) fn probes_use_the_call_timeout_without_a_probe_timeout<E: ScenarioEngine>() {
    let (clock, breaker) = start::<E>(
        one_failure_trips()
            .required_successes(1)
            .call_timeout(Duration::from_secs(2)),
    );
    trip(&breaker);
    clock.advance(Duration::from_secs(10));
    breaker
        .try_acquire()
        .unwrap()
        .record_with_latency(breakerbox::Verdict::Success, Duration::from_millis(2_001));
    assert_eq!(breaker.phase(), Phase::Open);
    clock.advance(Duration::from_secs(10));
    breaker
        .try_acquire()
        .unwrap()
        .record_with_latency(breakerbox::Verdict::Success, Duration::from_millis(1_999));
    assert_eq!(breaker.phase(), Phase::Closed);
}
