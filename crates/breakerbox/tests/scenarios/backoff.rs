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
