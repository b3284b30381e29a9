//! Shadow mode (rule 20).
//!
//! The engine-generic scenarios live in `shared/shadow.rs` (also run against Redis by
//! `breakerbox-redis`); here they run on the in-memory engine.

in_memory_scenarios! {
    shadow:
    shadow_trips_as_usual_but_admits_and_counts_would_be_rejections,
    shadow_keeps_the_half_open_probe_limit_and_its_transitions,
    shadow_admits_the_acquire_that_reopens_a_timed_out_half_open,
    shadow_switches_at_runtime_and_changes_no_phase,
    shadow_changes_nothing_for_calls_that_are_admitted_anyway,
}
