//! `call_with` on a breaker that measures no latency itself (no slow-call rule, no
//! deadline): the judge still sees the call's latency, and its verdict, whatever it is,
//! is what the breaker records.

use std::time::Duration;

use breakerbox::{CircuitBreaker, DefaultJudge, FnJudge, ManualClock, Phase, Verdict};

fn breaker(clock: &ManualClock) -> CircuitBreaker<ManualClock> {
    CircuitBreaker::builder()
        .consecutive_failures(2)
        .recovery_timeout(Duration::from_secs(10))
        .clock(clock.clone())
        .build()
        .expect("a valid config")
}

#[test]
fn a_latency_judge_trips_a_breaker_that_has_no_slow_call_rule() {
    let clock = ManualClock::new();
    let breaker = breaker(&clock);
    let judge = DefaultJudge.slower_than(Duration::from_millis(100));
    let slow = || {
        clock.advance(Duration::from_millis(150));
        Ok::<_, ()>("late but fine")
    };

    // A quick success breaks no streak; each slow `Ok` is a failure.
    assert!(breaker.call_with(&judge, || Ok::<_, ()>("quick")).is_ok());
    assert!(breaker.call_with(&judge, slow).is_ok());
    assert_eq!(breaker.phase(), Phase::Closed);
    assert!(breaker.call_with(&judge, slow).is_ok());
    assert_eq!(breaker.phase(), Phase::Open);
}

#[test]
fn every_verdict_of_a_judge_is_recorded_as_it_says() {
    let clock = ManualClock::new();
    let breaker = breaker(&clock);
    // Errors that say "gone" are the caller's; "5xx" fails; `Ok("bad")` fails too.
    let judge = FnJudge::new(|outcome: &Result<&str, &str>, _latency| match outcome {
        Ok("bad") => Verdict::Failure,
        Ok(_) => Verdict::Success,
        Err("gone") => Verdict::Ignore,
        Err(_) => Verdict::Failure,
    });

    assert!(breaker.call_with(&judge, || Err("5xx")).is_err());
    // An ignored call neither breaks nor extends the streak (rule 4).
    assert!(breaker.call_with(&judge, || Err("gone")).is_err());
    assert_eq!(breaker.phase(), Phase::Closed);
    assert!(breaker.call_with(&judge, || Ok("bad")).is_ok());
    assert_eq!(breaker.phase(), Phase::Open);

    // A success in between breaks the streak.
    breaker.reset();
    assert!(breaker.call_with(&judge, || Err("5xx")).is_err());
    assert!(breaker.call_with(&judge, || Ok("fine")).is_ok());
    assert!(breaker.call_with(&judge, || Err("5xx")).is_err());
    assert_eq!(breaker.phase(), Phase::Closed);
}
