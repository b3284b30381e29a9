//! Stamps: the start of a duration measurement (a call's latency), which a clock may take
//! more cheaply than a full reading.

/// The start of a duration measurement, from [`Clock::stamp`](crate::Clock::stamp). Only
/// the clock that took it can measure from it, with
/// [`Clock::elapsed_since`](crate::Clock::elapsed_since); its value means nothing else.
///
/// ```
/// use breakerbox::{Clock, ManualClock};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let start = clock.stamp();
/// clock.advance(Duration::from_millis(250));
/// assert_eq!(clock.elapsed_since(start).as_duration(), Duration::from_millis(250));
/// ```
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Stamp(u64);

impl Stamp {
    /// A stamp holding `value`, in whatever unit the clock that makes it chose.
    pub const fn from_raw(value: u64) -> Stamp {
        Stamp(value)
    }

    /// The stamp's value, in the unit of the clock that made it.
    pub const fn raw(self) -> u64 {
        self.0
    }
}
