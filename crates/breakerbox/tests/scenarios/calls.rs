//! `call`, `call_with` and `call_async`: what they run, what they record, what they return.

use std::time::Duration;

use breakerbox::{CallError, FnJudge, Phase, Verdict};

use super::support::{block_on, manual, one_failure_trips, YieldOnce};

#[test]
fn call_returns_the_result_and_records_it() {
    let (_clock, builder) = manual();
    let breaker = builder.consecutive_failures(2).build().unwrap();
    assert_eq!(breaker.call(|| Ok::<_, &str>(7)), Ok(7));
    assert_eq!(
        breaker.call(|| Err::<(), _>("refused")),
        Err(CallError::Inner("refused"))
    );
    assert_eq!(breaker.snapshot().consecutive_failures, 1);
    let _ = breaker.call(|| Err::<(), _>("refused"));
    let mut ran = false;
    let result = breaker.call(|| {
        ran = true;
        Ok::<_, &str>(())
    });
    assert!(!ran, "a rejected call is not attempted");
    let open = result.unwrap_err().rejection().expect("a rejection");
    assert_eq!(open.phase(), Phase::Open);
}

#[test]
fn call_with_a_judge_can_ignore_errors_that_are_the_callers_fault() {
    let (_clock, builder) = manual();
    let breaker = builder.consecutive_failures(1).build().unwrap();
    let judge = FnJudge::new(
        |outcome: &Result<(), u16>, _latency: Duration| match outcome {
            Ok(()) => Verdict::Success,
            Err(404) => Verdict::Ignore,
            Err(_) => Verdict::Failure,
        },
    );
    for _ in 0..5 {
        assert_eq!(
            breaker.call_with(&judge, || Err(404)),
            Err(CallError::Inner(404))
        );
    }
    assert_eq!(breaker.phase(), Phase::Closed);
    let _ = breaker.call_with(&judge, || Err(503));
    assert_eq!(breaker.phase(), Phase::Open);
}

#[test]
fn a_latency_judge_sees_the_time_measured_on_the_breaker_clock() {
    let (clock, builder) = manual();
    let breaker = builder.consecutive_failures(1).build().unwrap();
    let judge = breakerbox::DefaultJudge.slower_than(Duration::from_millis(100));
    let fast = breaker.call_with(&judge, || {
        clock.advance(Duration::from_millis(100));
        Ok::<_, ()>(())
    });
    assert_eq!((fast, breaker.phase()), (Ok(()), Phase::Closed));
    let slow = breaker.call_with(&judge, || {
        clock.advance(Duration::from_millis(101));
        Ok::<_, ()>(())
    });
    assert_eq!(slow, Ok(()), "the caller still gets its value");
    assert_eq!(breaker.phase(), Phase::Open);
}

#[test]
fn call_async_records_success_and_failure() {
    let (_clock, builder) = manual();
    let breaker = builder.consecutive_failures(2).build().unwrap();
    assert_eq!(
        block_on(breaker.call_async(YieldOnce::new(Ok::<_, ()>(1)))),
        Ok(1)
    );
    let failed = block_on(breaker.call_async(YieldOnce::new(Err::<(), _>("timeout"))));
    assert_eq!(failed, Err(CallError::Inner("timeout")));
    assert_eq!(breaker.snapshot().consecutive_failures, 1);
    let _ = block_on(breaker.call_async(async { Err::<(), _>("timeout") }));
    let rejected = block_on(breaker.call_async(async { Ok::<_, ()>(()) }));
    assert_eq!(
        rejected.unwrap_err().rejection().map(|o| o.phase()),
        Some(Phase::Open)
    );
}

#[test]
fn call_async_probe_success_closes() {
    let (clock, builder) = one_failure_trips();
    let breaker = builder.required_successes(1).build().unwrap();
    let _ = breaker.call(|| Err::<(), _>(()));
    clock.advance(Duration::from_secs(10));
    assert_eq!(
        block_on(breaker.call_async(YieldOnce::new(Ok::<_, ()>("up")))),
        Ok("up")
    );
    assert_eq!(breaker.phase(), Phase::Closed);
}

#[test]
fn owned_permits_record_from_another_thread() {
    let (_clock, builder) = manual();
    let breaker = builder.consecutive_failures(1).build().unwrap();
    let permit = breaker.try_acquire_owned().unwrap();
    std::thread::spawn(move || permit.failure()).join().unwrap();
    assert_eq!(breaker.phase(), Phase::Open);
}

/// Every message of an error chain, outermost first, as a reporter prints it.
fn chain(error: &(dyn std::error::Error + 'static)) -> Vec<String> {
    let mut messages = vec![error.to_string()];
    let mut source = error.source();
    while let Some(cause) = source {
        messages.push(cause.to_string());
        source = cause.source();
    }
    messages
}

#[test]
fn a_call_error_chain_prints_every_message_once() {
    /// A caller's error that wraps an I/O error, as its source.
    #[derive(Debug)]
    struct Fetch(std::io::Error);
    impl std::fmt::Display for Fetch {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("fetching the quote failed")
        }
    }
    impl std::error::Error for Fetch {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    let (_clock, builder) = one_failure_trips();
    let breaker = builder.build().unwrap();
    let failed = breaker
        .call(|| Err::<(), _>(Fetch(std::io::Error::other("connection refused"))))
        .unwrap_err();
    assert_eq!(
        chain(&failed),
        [
            "the protected call failed",
            "fetching the quote failed",
            "connection refused"
        ]
    );
    assert!(failed.into_inner().is_some());

    let rejected = breaker
        .call(|| Err::<(), _>(Fetch(std::io::Error::other("not attempted"))))
        .unwrap_err();
    assert_eq!(
        chain(&rejected),
        ["circuit breaker rejected the call (open); retry after 10s"]
    );
}

#[test]
fn call_measures_the_latency_from_its_own_admission() {
    let clock = breakerbox::ManualClock::starting_at(breakerbox::Nanos::from_duration(
        Duration::from_secs(100),
    ));
    let breaker = breakerbox::CircuitBreaker::builder()
        .clock(clock.clone())
        .slow_call_threshold(Duration::from_millis(100))
        .slow_call_rate(1.0)
        .count_window(10)
        .min_calls(1)
        .build()
        .unwrap();
    let result = breaker.call(|| {
        clock.advance(Duration::from_millis(40));
        Ok::<_, ()>(())
    });
    assert_eq!(result, Ok(()));
    let snapshot = breaker.snapshot();
    assert_eq!((snapshot.window.calls, snapshot.window.slow), (1, 0));
    assert_eq!(snapshot.phase, Phase::Closed, "40 ms is not slow");
}
