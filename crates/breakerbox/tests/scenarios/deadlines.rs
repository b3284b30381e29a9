//! Call and probe deadlines (rule 22).
//!
//! The engine-generic scenarios live in `shared/deadlines.rs` (also run against Redis by
//! `breakerbox-redis`); here they run on the in-memory engine, with what only the
//! in-memory engine shows.

use std::time::Duration;

use breakerbox::{CircuitBreaker, Config, ManualClock, Phase};

use super::support::block_on;

in_memory_scenarios! {
    deadlines:
    a_success_later_than_the_call_timeout_is_a_failure,
    a_call_within_the_call_timeout_keeps_its_verdict,
    a_late_synchronous_call_is_judged_a_timeout_failure,
    a_probe_later_than_the_probe_timeout_reopens,
    probes_use_the_call_timeout_without_a_probe_timeout,
}

#[test]
fn a_late_async_call_is_judged_a_timeout_failure() {
    let clock = ManualClock::new();
    let breaker = CircuitBreaker::builder()
        .consecutive_failures(1)
        .call_timeout(Duration::from_millis(100))
        .clock(clock.clone())
        .build()
        .unwrap();
    let answer = block_on(breaker.call_async(async {
        clock.advance(Duration::from_millis(101));
        Ok::<_, ()>(1)
    }));
    assert_eq!(answer.ok(), Some(1), "the result is still returned");
    assert_eq!(breaker.phase(), Phase::Open);
}

#[test]
fn the_permit_knows_its_deadline() {
    let clock = ManualClock::new();
    let breaker = CircuitBreaker::builder()
        .consecutive_failures(1)
        .recovery_timeout(Duration::from_secs(1))
        .call_timeout(Duration::from_secs(2))
        .probe_timeout(Duration::from_millis(300))
        .clock(clock.clone())
        .build()
        .unwrap();
    let permit = breaker.try_acquire().unwrap();
    assert_eq!(permit.deadline(), Some(Duration::from_secs(2)));
    permit.failure();
    clock.advance(Duration::from_secs(1));
    let probe = breaker.try_acquire_owned().unwrap();
    assert_eq!(
        breakerbox::BreakerPermit::deadline(&probe),
        Some(Duration::from_millis(300))
    );
    breaker.disable();
    assert_eq!(breaker.try_acquire().unwrap().deadline(), None);
    let plain = CircuitBreaker::from_config(Config::builder().build().unwrap()).unwrap();
    assert_eq!(plain.try_acquire().unwrap().deadline(), None);
}
