//! A point-in-time view of a breaker, for status pages, metrics and tests.
//!
//! Rule numbers ("rule 7") refer to `docs/RULES.md` in the repository.

use std::time::Duration;

use crate::model::WindowCounts;
use crate::Phase;

/// What a breaker looks like right now. Taking one changes nothing (rule 1): an open phase
/// past its end still shows as open, with `retry_after` zero.
///
/// Fields may be added in a minor release: an engine outside this crate builds one with
/// [`Snapshot::new`] and sets the fields it knows.
///
/// ```
/// use breakerbox::{Phase, Snapshot};
/// let mut snapshot = Snapshot::new("payments", Phase::HalfOpen, 7);
/// snapshot.probes_in_flight = 1;
/// assert_eq!(snapshot.trips, 0);
/// assert_eq!(snapshot.failure_rate, None);
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
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
    /// Rule 20: whether the breaker is in shadow mode (admits what it would reject).
    pub shadow: bool,
    /// Rule 20: calls admitted in shadow mode that would have been rejected.
    pub shadow_rejections: u64,
    /// Rule 21 (shared engines): the time left of this node's local open phase (a rule
    /// fired on this node's failures without the quorum of nodes), if one is running.
    pub local_open: Option<Duration>,
    /// Rule 23: while closed and ramping up after a recovery, the fraction of calls
    /// admitted now; `None` otherwise.
    pub ramp: Option<crate::Rate>,
    /// An operator's timed override (`force_open_for`, `disable_for`): the time it has
    /// left; `None` in any other phase and for an override without an end. Unlike
    /// `retry_after` (what a rejected acquire would be told, so nothing for a disable), it
    /// says when a timed disable ends.
    pub override_left: Option<Duration>,
}

impl Snapshot {
    /// A snapshot of breaker `name` in `phase` and `generation`, with every other field
    /// empty: no window counts, no rates, no runs or probes, no trips, no `retry_after`,
    /// no stale results, not in shadow mode, no ramp, no override's end.
    pub fn new(name: impl Into<String>, phase: Phase, generation: u64) -> Snapshot {
        Snapshot {
            name: name.into(),
            phase,
            generation,
            window: WindowCounts::default(),
            failure_rate: None,
            slow_call_rate: None,
            consecutive_failures: 0,
            probes_in_flight: 0,
            probe_successes: 0,
            trips: 0,
            retry_after: None,
            stale_results: 0,
            shadow: false,
            shadow_rejections: 0,
            local_open: None,
            ramp: None,
            override_left: None,
        }
    }

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
