//! Gradual recovery (rule 23).
//!
//! The engine-generic scenarios live in `shared/ramp.rs` (also run against Redis by
//! `breakerbox-redis`); here they run on the in-memory engine.

in_memory_scenarios! {
    ramp:
    ramp_admits_the_stated_fraction_at_stated_times,
    the_ramp_ends_at_all_calls,
    only_a_close_from_half_open_ramps,
    a_trip_during_the_ramp_reopens_and_keeps_backing_off,
    shadow_admits_what_the_ramp_would_reject,
}
