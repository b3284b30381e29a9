//! The names of the core's engine-generic scenarios (`breakerbox/tests/scenarios/shared`)
//! that the Redis engine runs, by file: `with_shared_scenarios!(callback)` calls
//! `callback! { module: [names...] ... }`, so every topology's test binary runs the same
//! list.

#![allow(unused_macros)]

macro_rules! with_shared_scenarios {
    ($callback:ident) => {
        $callback! {
            half_open: [
                half_open_admits_one_probe_when_max_probes_is_one,
                max_probes_caps_concurrent_probes_not_total_probes,
                two_probe_successes_are_required_to_close,
                probe_failure_reopens_and_resets_success_count,
                probe_failure_restarts_the_cooldown,
                open_timeout_leads_to_half_open,
                half_open_timeout_leads_back_to_open,
                a_probe_result_after_the_deadline_reopens_even_if_no_acquire_noticed,
                a_normal_permit_dropped_after_the_deadline_reopens,
                late_result_from_older_generation_changes_nothing,
                dropped_probe_permit_frees_its_slot,
                ignore_only_frees_the_probe_slot,
                slow_probe_success_reopens,
            ]
            closed: [
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
            ]
            backoff: [
                backoff_grows_open_duration_and_caps,
                the_half_open_deadline_counts_as_a_trip_for_backoff,
                reset_clears_the_backoff,
                // A sample a script call did not use (it opened nothing) is kept for the next
                // call, so samples are consumed one per re-open, as in the in-memory engine.
                jitter_only_shortens_with_injected_randomness,
                retry_after_on_every_rejection,
            ]
            manual: [
                force_open_starts_a_new_generation_only_when_the_phase_changes,
                force_open_from_open_keeps_the_trip_count,
                force_open_for_expiry_sends_the_next_acquire_to_half_open,
                force_open_from_half_open_makes_its_probes_stale,
                disable_admits_everything_and_records_nothing,
                disable_with_expiry_closes_on_any_operation_after_it,
                a_dropped_permit_after_disable_expiry_closes_the_breaker,
                reset_always_starts_a_fresh_closed_generation,
                a_snapshot_tells_the_time_left_of_a_timed_override,
            ]
            deadlines: [
                a_success_later_than_the_call_timeout_is_a_failure,
                a_call_within_the_call_timeout_keeps_its_verdict,
                a_late_synchronous_call_is_judged_a_timeout_failure,
                a_probe_later_than_the_probe_timeout_reopens,
                probes_use_the_call_timeout_without_a_probe_timeout,
            ]
            ramp: [
                ramp_admits_the_stated_fraction_at_stated_times,
                the_ramp_ends_at_all_calls,
                only_a_close_from_half_open_ramps,
                a_trip_during_the_ramp_reopens_and_keeps_backing_off,
                shadow_admits_what_the_ramp_would_reject,
            ]
            shadow: [
                shadow_trips_as_usual_but_admits_and_counts_would_be_rejections,
                shadow_keeps_the_half_open_probe_limit_and_its_transitions,
                shadow_admits_the_acquire_that_reopens_a_timed_out_half_open,
                shadow_switches_at_runtime_and_changes_no_phase,
                shadow_changes_nothing_for_calls_that_are_admitted_anyway,
            ]
        }
    };
}
