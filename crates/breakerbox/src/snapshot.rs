//! A point-in-time view of a breaker, for status pages, metrics and tests.

use std::time::Duration;

use crate::model::WindowCounts;
use crate::Phase;

/// What a breaker looks like right now. Taking one changes nothing (rule 1): an open phase
/// past its end still shows as open, with `retry_after` zero.
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    /// The breaker's name.
    pub name: String,
    /// The stored phase.
    pub phase: Phase,
    /// The current generation.
    pub generation: u64,
    /// What the closed-phase rate window holds (zero outside closed).
    pub window: WindowCounts,
    /// `failures / calls` over the window, when it holds calls.
    pub failure_rate: Option<f64>,
    /// `slow / calls` over the window, when it holds calls.
    pub slow_call_rate: Option<f64>,
    /// The current run of consecutive failures in closed.
    pub consecutive_failures: u32,
    /// Probes in flight in half-open.
    pub probes_in_flight: u32,
    /// Consecutive probe successes in half-open.
    pub probe_successes: u32,
    /// Consecutive trips without a close.
    pub trips: u32,
    /// Rule 10: the rest of the open phase, the time left to the half-open deadline, or the
    /// rest of an expiring override.
    pub retry_after: Option<Duration>,
    /// Results and releases dropped because their permit was from an older generation.
    pub stale_results: u64,
}

impl Snapshot {
    pub(crate) fn rates(counts: WindowCounts) -> (Option<f64>, Option<f64>) {
        if counts.calls == 0 {
            return (None, None);
        }
        let calls = counts.calls as f64;
        (
            Some(counts.failures as f64 / calls),
            Some(counts.slow as f64 / calls),
        )
    }
}
