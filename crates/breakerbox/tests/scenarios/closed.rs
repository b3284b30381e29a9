//! Closed: streaks, windows that slide, exact rates, slow calls, and when a trip is judged.
//!
//! The engine-generic scenarios live in `shared/closed.rs` (also run against Redis by
//! `breakerbox-redis`); here they run on the in-memory engine, next to the
//! scenarios that only make sense in-process (threads, owned permits, futures).

use breakerbox::Phase;

use super::engine::counts;
use super::support::manual;

in_memory_scenarios! {
    closed:
    consecutive_failures_trip_and_a_success_ends_the_streak,
    healthy_history_then_burst_trips_within_half_the_window,
    fifty_percent_trips_at_exactly_half_not_one_before,
    a_success_that_brings_the_window_to_min_calls_trips,
    ignore_is_neither_a_call_nor_a_break_in_the_streak,
    a_slow_failure_counts_in_both_rates_and_only_strictly_slower_is_slow,
    latency_is_measured_through_the_breaker_clock,
    time_window_forgets_buckets_older_than_the_window,
    ageing_buckets_never_trip_only_a_recorded_outcome_does,
    a_new_closed_phase_starts_with_an_empty_window_and_streak,
    a_long_outage_does_not_blind_the_count_window,
    a_long_outage_does_not_blind_the_time_window,
}

#[test]
fn concurrent_outcomes_are_all_counted() {
    let (_clock, builder) = manual();
    let breaker = builder
        .failure_rate(0.6)
        .count_window(1_000)
        .min_calls(1_000)
        .build()
        .unwrap();
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for i in 0..250 {
                    let permit = breaker.try_acquire().unwrap();
                    if i % 2 == 0 {
                        permit.failure();
                    } else {
                        permit.success();
                    }
                }
            });
        }
    });
    let snap = breaker.snapshot();
    assert_eq!(
        (snap.phase, snap.window),
        (Phase::Closed, counts(1_000, 500, 0))
    );
}

#[test]
fn concurrent_failures_trip_exactly_once_at_the_streak() {
    let (_clock, builder) = manual();
    let breaker = builder.consecutive_failures(1_000).build().unwrap();
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..250 {
                    breaker.try_acquire().unwrap().failure();
                }
            });
        }
    });
    let snap = breaker.snapshot();
    assert_eq!(
        (snap.phase, snap.trips, snap.generation),
        (Phase::Open, 1, 1)
    );
}
