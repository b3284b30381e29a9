//! Open durations: backoff, its cap, injected jitter, and what a rejection says about when
//! to retry.
//!
//! The engine-generic scenarios live in `shared/backoff.rs` (also run against Redis by
//! `breakerbox-redis`); here they run on the in-memory engine.

in_memory_scenarios! {
    backoff:
    backoff_grows_open_duration_and_caps,
    the_half_open_deadline_counts_as_a_trip_for_backoff,
    reset_clears_the_backoff,
    jitter_only_shortens_with_injected_randomness,
    retry_after_on_every_rejection,
}

mod draws {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use breakerbox::{CircuitBreaker, ManualClock, Phase};

    /// Trips, fails a probe, lets a half-open phase time out, and asks `check` at its
    /// deadline: three re-opens and one readiness check. Returns the source's draws.
    fn draws_over_three_reopens(jitter: f64) -> usize {
        let clock = ManualClock::new();
        let draws = Arc::new(AtomicUsize::new(0));
        let counter = draws.clone();
        let breaker = CircuitBreaker::builder()
            .clock(clock.clone())
            .consecutive_failures(1)
            .recovery_timeout(Duration::from_secs(10))
            .half_open_timeout(Duration::from_secs(30))
            .jitter(jitter)
            .jitter_source(move || {
                counter.fetch_add(1, Ordering::Relaxed);
                0.0
            })
            .build()
            .unwrap();
        breaker.try_acquire().unwrap().failure();
        clock.advance(Duration::from_secs(10));
        breaker.try_acquire().unwrap().failure();
        clock.advance(Duration::from_secs(10));
        let _lost = breaker.try_acquire().unwrap();
        clock.advance(Duration::from_secs(30));
        assert!(breaker.check().is_err());
        assert!(breaker.try_acquire().is_err());
        assert_eq!(breaker.phase(), Phase::Open);
        assert_eq!(breaker.snapshot().trips, 3);
        draws.load(Ordering::Relaxed)
    }

    #[test]
    fn a_breaker_without_jitter_never_draws_from_its_jitter_source() {
        assert_eq!(draws_over_three_reopens(0.0), 0);
    }

    #[test]
    fn a_breaker_with_jitter_draws_once_per_reopen_and_never_to_check() {
        assert_eq!(draws_over_three_reopens(0.5), 3);
    }
}
