//! The trip policy, shared by every engine: given the streak and the window's counts,
//! should the breaker open?

use crate::Config;

/// What a rate window holds: non-ignored calls, failures and slow calls among them.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct WindowCounts {
    /// Non-ignored calls in the window.
    pub calls: u64,
    /// Failures among them.
    pub failures: u64,
    /// Slow calls among them (a slow failure counts here and in `failures`).
    pub slow: u64,
}

/// Which rule tripped the breaker.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum TripReason {
    /// `consecutive_failures` failures in a row.
    ConsecutiveFailures,
    /// The failure rate reached its threshold.
    FailureRate,
    /// The slow-call rate reached its threshold.
    SlowCallRate,
}

impl TripReason {
    /// A short stable name for logs and metrics.
    pub const fn as_str(self) -> &'static str {
        match self {
            TripReason::ConsecutiveFailures => "consecutive_failures",
            TripReason::FailureRate => "failure_rate",
            TripReason::SlowCallRate => "slow_call_rate",
        }
    }
}

/// Rules 3, 6 and 8: trip when any configured rule says so, rates only once `min_calls`
/// calls are in the window, compared exactly in parts per million.
///
/// ```
/// use breakerbox::model::{evaluate_trip, TripReason, WindowCounts};
/// use breakerbox::Config;
///
/// let config = Config::builder().failure_rate(0.5).count_window(10).min_calls(4).build().unwrap();
/// let few = WindowCounts { calls: 3, failures: 3, slow: 0 };
/// assert_eq!(evaluate_trip(&config, 3, few), None);
/// let enough = WindowCounts { calls: 4, failures: 2, slow: 0 };
/// assert_eq!(evaluate_trip(&config, 0, enough), Some(TripReason::FailureRate));
/// ```
pub fn evaluate_trip(config: &Config, streak: u32, counts: WindowCounts) -> Option<TripReason> {
    if let Some(n) = config.consecutive_failures {
        if streak >= n {
            return Some(TripReason::ConsecutiveFailures);
        }
    }
    let rule = config.rate.as_ref()?;
    if counts.calls < u64::from(rule.min_calls) {
        return None;
    }
    if let Some(rate) = rule.failure_rate {
        if rate.reached(counts.failures, counts.calls) {
            return Some(TripReason::FailureRate);
        }
    }
    if let Some(rate) = rule.slow_rate {
        if rate.reached(counts.slow, counts.calls) {
            return Some(TripReason::SlowCallRate);
        }
    }
    None
}

/// Every rule that says "trip" (in [`evaluate_trip`]'s order: consecutive failures,
/// failure rate, slow-call rate), for rule 21, which may refuse the first ones for want of
/// a quorum.
///
/// ```
/// use breakerbox::model::{fired_rules, TripReason, WindowCounts};
/// use breakerbox::Config;
///
/// let config = Config::builder().consecutive_failures(2).failure_rate(0.5).count_window(4).min_calls(2).build().unwrap();
/// let counts = WindowCounts { calls: 2, failures: 2, slow: 0 };
/// let fired: Vec<_> = fired_rules(&config, 2, counts).collect();
/// assert_eq!(fired, [TripReason::ConsecutiveFailures, TripReason::FailureRate]);
/// ```
pub fn fired_rules(
    config: &Config,
    streak: u32,
    counts: WindowCounts,
) -> impl Iterator<Item = TripReason> {
    let consecutive = config.consecutive_failures.is_some_and(|n| streak >= n);
    let rule = config
        .rate
        .as_ref()
        .filter(|rule| counts.calls >= u64::from(rule.min_calls));
    let failure = rule
        .and_then(|r| r.failure_rate)
        .is_some_and(|rate| rate.reached(counts.failures, counts.calls));
    let slow = rule
        .and_then(|r| r.slow_rate)
        .is_some_and(|rate| rate.reached(counts.slow, counts.calls));
    [
        consecutive.then_some(TripReason::ConsecutiveFailures),
        failure.then_some(TripReason::FailureRate),
        slow.then_some(TripReason::SlowCallRate),
    ]
    .into_iter()
    .flatten()
}
