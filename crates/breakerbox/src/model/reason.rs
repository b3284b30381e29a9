//! Why a breaker's phase changed, with stable names for logs, metrics and other engines.

use super::TripReason;

/// Why the phase changed.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransitionReason {
    /// The closed-phase policy tripped.
    Tripped(TripReason),
    /// The open phase (or a forced-open override) ran out and an acquire came.
    CooldownElapsed,
    /// A probe failed.
    ProbeFailed,
    /// Half-open was not confirmed within `half_open_timeout`.
    HalfOpenTimedOut,
    /// `required_successes` consecutive probes succeeded.
    ProbesSucceeded,
    /// A `disable` override ran out.
    OverrideExpired,
    /// `force_open` was called.
    ForcedOpen,
    /// `disable` was called.
    Disabled,
    /// `reset` was called.
    Reset,
    /// A shared engine gave back an open phase its store had lost (a Redis restarted
    /// empty, or a failover to a replica that was behind), from what a node still knew.
    Restored,
}

impl TransitionReason {
    /// A short stable name for logs and metrics.
    pub const fn as_str(self) -> &'static str {
        match self {
            TransitionReason::Tripped(reason) => reason.as_str(),
            TransitionReason::CooldownElapsed => "cooldown_elapsed",
            TransitionReason::ProbeFailed => "probe_failed",
            TransitionReason::HalfOpenTimedOut => "half_open_timed_out",
            TransitionReason::ProbesSucceeded => "probes_succeeded",
            TransitionReason::OverrideExpired => "override_expired",
            TransitionReason::ForcedOpen => "forced_open",
            TransitionReason::Disabled => "disabled",
            TransitionReason::Reset => "reset",
            TransitionReason::Restored => "restored",
        }
    }

    /// Parses [`TransitionReason::as_str`]'s names (e.g. from another engine's replies).
    ///
    /// ```
    /// use breakerbox::model::TransitionReason;
    /// let reason = TransitionReason::ProbeFailed;
    /// assert_eq!(TransitionReason::from_name(reason.as_str()), Some(reason));
    /// assert_eq!(TransitionReason::from_name("bogus"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<TransitionReason> {
        Some(match name {
            "consecutive_failures" => TransitionReason::Tripped(TripReason::ConsecutiveFailures),
            "failure_rate" => TransitionReason::Tripped(TripReason::FailureRate),
            "slow_call_rate" => TransitionReason::Tripped(TripReason::SlowCallRate),
            "cooldown_elapsed" => TransitionReason::CooldownElapsed,
            "probe_failed" => TransitionReason::ProbeFailed,
            "half_open_timed_out" => TransitionReason::HalfOpenTimedOut,
            "probes_succeeded" => TransitionReason::ProbesSucceeded,
            "override_expired" => TransitionReason::OverrideExpired,
            "forced_open" => TransitionReason::ForcedOpen,
            "disabled" => TransitionReason::Disabled,
            "reset" => TransitionReason::Reset,
            "restored" => TransitionReason::Restored,
            _ => return None,
        })
    }
}
