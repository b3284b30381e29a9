//! Manual control: force open, disable (with and without expiry) and reset.
//!
//! The engine-generic scenarios live in `shared/manual.rs` (also run against Redis by
//! `breakerbox-redis`); here they run on the in-memory engine.

in_memory_scenarios! {
    manual:
    force_open_starts_a_new_generation_only_when_the_phase_changes,
    force_open_from_open_keeps_the_trip_count,
    force_open_for_expiry_sends_the_next_acquire_to_half_open,
    force_open_from_half_open_makes_its_probes_stale,
    disable_admits_everything_and_records_nothing,
    disable_with_expiry_closes_on_any_operation_after_it,
    a_dropped_permit_after_disable_expiry_closes_the_breaker,
    reset_always_starts_a_fresh_closed_generation,
    a_snapshot_tells_the_time_left_of_a_timed_override,
}
