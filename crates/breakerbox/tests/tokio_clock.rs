//! `TokioClock`: a breaker on tokio's paused time moves when the test moves time, and only
//! then.
#![cfg(feature = "tokio")]
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use breakerbox::{CircuitBreaker, Clock, Phase, TokioClock};

fn tripped_breaker() -> CircuitBreaker<TokioClock> {
    let breaker = CircuitBreaker::builder()
        .consecutive_failures(1)
        .recovery_timeout(Duration::from_secs(30))
        .half_open_timeout(Duration::from_secs(5))
        .clock(TokioClock::new())
        .build()
        .unwrap();
    breaker.try_acquire().unwrap().failure();
    assert_eq!(breaker.phase(), Phase::Open);
    breaker
}

#[tokio::test(start_paused = true)]
async fn advancing_paused_time_moves_the_breaker_from_open_to_half_open() {
    let breaker = tripped_breaker();
    let open = breaker.try_acquire().unwrap_err();
    assert_eq!(open.retry_after(), Some(Duration::from_secs(30)));

    tokio::time::advance(Duration::from_secs(29)).await;
    let open = breaker.try_acquire().unwrap_err();
    assert_eq!(open.retry_after(), Some(Duration::from_secs(1)));

    tokio::time::advance(Duration::from_secs(1)).await;
    let probe = breaker.try_acquire().unwrap();
    assert!(probe.is_probe());
    assert_eq!(breaker.phase(), Phase::HalfOpen);
    probe.success();
}

#[tokio::test(start_paused = true)]
async fn an_auto_advancing_sleep_moves_the_breaker_too() {
    let breaker = tripped_breaker();
    // With paused time, an idle runtime jumps straight to the next timer.
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(breaker.check().is_ok());
    let probe = breaker.try_acquire().unwrap();
    assert!(probe.is_probe());
    // The lost probe's half-open phase times out after 5 s of paused time.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(breaker.check().unwrap_err().phase(), Phase::Open);
    drop(probe);
}

#[tokio::test(start_paused = true)]
async fn clones_share_their_start() {
    let clock = TokioClock::new();
    let copy = clock;
    tokio::time::advance(Duration::from_millis(1500)).await;
    assert_eq!(clock.now().as_duration(), Duration::from_millis(1500));
    assert_eq!(copy.now(), clock.now());
    assert_eq!(clock.elapsed(), Duration::from_millis(1500));
}
