//! The Redis engine's metrics (feature `metrics`), beside the core's
//! ([`breakerbox::metrics`]):
//!
//! | metric | type | labels | what |
//! |---|---|---|---|
//! | `breakerbox_store_round_trip_seconds` | histogram | `breaker`, `script` | one script call to Redis, from send to reply |
//! | `breakerbox_fallback_calls_total` | counter | `breaker` | acquires decided by the fallback while Redis was away |
//!
//! The core's metrics work per node: `breakerbox_state` follows the node's view (also of
//! transitions other nodes made), calls and probes count this node's outcomes, and a
//! [`MetricsListener`](breakerbox::metrics::MetricsListener) attached with
//! `RedisBreakerBuilder::listener` adds rejections, transitions this node made, stale
//! results, outages and repairs.

use metrics::{describe_counter, describe_histogram, Unit};

/// Registers the help text of every metric, the core's and the Redis engine's, with the
/// installed recorder.
pub fn describe_metrics() {
    breakerbox::metrics::describe();
    describe_histogram!(
        "breakerbox_store_round_trip_seconds",
        Unit::Seconds,
        "One script call to Redis, from send to reply."
    );
    describe_counter!(
        "breakerbox_fallback_calls_total",
        "Acquires decided by the fallback while Redis was away."
    );
}
