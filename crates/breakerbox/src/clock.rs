//! Time as the breaker sees it: a monotonic nanosecond reading from an injected [`Clock`].

use std::fmt;
use std::time::Duration;

use crate::sync::{Arc, AtomicU64, Ordering};

mod stamp;
pub use stamp::Stamp;
#[cfg(feature = "tokio")]
mod tokio_clock;
#[cfg(all(target_os = "linux", target_arch = "x86_64", not(loom)))]
mod tsc;
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub use tokio_clock::TokioClock;
#[cfg(feature = "tokio")]
mod tokio_deadline;
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub use tokio_deadline::TokioDeadline;

/// A monotonic timestamp or a duration in nanoseconds.
///
/// The zero point is the clock's own (boot time for [`MonotonicClock`], whatever the test
/// chose for [`ManualClock`]); readings of different clocks are not comparable.
///
/// ```
/// use breakerbox::Nanos;
/// use std::time::Duration;
///
/// let t = Nanos::from_duration(Duration::from_millis(1500));
/// assert_eq!(t.as_u64(), 1_500_000_000);
/// assert_eq!(t.saturating_sub(Nanos(500_000_000)).as_duration(), Duration::from_secs(1));
/// ```
#[derive(Copy, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Nanos(pub u64);

impl Nanos {
    /// The zero reading.
    pub const ZERO: Nanos = Nanos(0);
    /// The largest reading; used as "never".
    pub const MAX: Nanos = Nanos(u64::MAX);

    /// Converts a [`Duration`], saturating at [`Nanos::MAX`].
    pub fn from_duration(duration: Duration) -> Nanos {
        Nanos(u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX))
    }

    /// This value as a [`Duration`].
    pub const fn as_duration(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// The raw number of nanoseconds.
    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// `self - other`, or zero when `other` is later.
    pub const fn saturating_sub(self, other: Nanos) -> Nanos {
        Nanos(self.0.saturating_sub(other.0))
    }

    /// `self + other`, saturating at [`Nanos::MAX`].
    pub const fn saturating_add(self, other: Nanos) -> Nanos {
        Nanos(self.0.saturating_add(other.0))
    }
}

impl fmt::Debug for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_duration())
    }
}

impl From<Duration> for Nanos {
    fn from(duration: Duration) -> Nanos {
        Nanos::from_duration(duration)
    }
}

/// A source of monotonic time. Every breaker asks its clock; library code never reads the
/// OS clock directly.
///
/// `now_coarse` may return a reading that lags `now` by up to a few milliseconds but is
/// cheaper; the breaker uses it only to decide whether an open phase is over, never to
/// measure latency. Both must share one time base.
///
/// Latency is measured with [`Clock::stamp`] and [`Clock::elapsed_since`], which a clock
/// may answer from a cheaper counter than `now` (the default clock does, see
/// [`MonotonicClock`]); by default they are two `now` readings.
pub trait Clock: Send + Sync + 'static {
    /// The current reading.
    fn now(&self) -> Nanos;

    /// A cheaper reading that may lag [`Clock::now`] by a few milliseconds.
    fn now_coarse(&self) -> Nanos {
        self.now()
    }

    /// The start of a duration measurement (a call's latency).
    #[inline]
    fn stamp(&self) -> Stamp {
        Stamp::from_raw(self.now().as_u64())
    }

    /// The time since `since`, a stamp this clock took; zero for a stamp from the future
    /// (another clock's).
    #[inline]
    fn elapsed_since(&self, since: Stamp) -> Nanos {
        self.now().saturating_sub(Nanos(since.raw()))
    }
}

impl<C: Clock + ?Sized> Clock for std::sync::Arc<C> {
    fn now(&self) -> Nanos {
        (**self).now()
    }
    fn now_coarse(&self) -> Nanos {
        (**self).now_coarse()
    }
    #[inline]
    fn stamp(&self) -> Stamp {
        (**self).stamp()
    }
    #[inline]
    fn elapsed_since(&self, since: Stamp) -> Nanos {
        (**self).elapsed_since(since)
    }
}

/// The default clock: the operating system's monotonic clock.
///
/// On Linux `now` reads `CLOCK_MONOTONIC` (what `Instant` uses) and `now_coarse` reads
/// `CLOCK_MONOTONIC_COARSE`, the same clock at tick resolution, which costs a few
/// nanoseconds instead of tens. Elsewhere both use `Instant`.
///
/// Latency ([`Clock::stamp`], [`Clock::elapsed_since`]) is measured on x86-64 Linux with
/// the CPU's time-stamp counter when the CPU reports it invariant (constant rate in every
/// power state): about 10 ns a reading where `CLOCK_MONOTONIC` costs 25-60 ns in a virtual
/// machine. The counter is calibrated against `CLOCK_MONOTONIC` once per process (by
/// `quanta`, which busy-waits up to 200 ms) on a thread of its own that the first stamp
/// starts, so no caller waits; until then, and without an invariant counter, latency is two
/// `CLOCK_MONOTONIC` readings. The counter must be in step across cores, as the OS keeps it
/// when it uses it as its own clock source (`tsc` in
/// `/sys/devices/system/clocksource/clocksource0/current_clocksource`).
///
/// ```
/// use breakerbox::{Clock, MonotonicClock};
/// let clock = MonotonicClock::default();
/// let a = clock.now();
/// let b = clock.now();
/// assert!(b >= a);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct MonotonicClock;

#[cfg(target_os = "linux")]
impl Clock for MonotonicClock {
    fn now(&self) -> Nanos {
        timespec_nanos(rustix::time::clock_gettime(
            rustix::time::ClockId::Monotonic,
        ))
    }
    #[inline]
    fn now_coarse(&self) -> Nanos {
        timespec_nanos(rustix::time::clock_gettime(
            rustix::time::ClockId::MonotonicCoarse,
        ))
    }
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    #[inline]
    fn stamp(&self) -> Stamp {
        tsc::stamp(|| self.now())
    }
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    #[inline]
    fn elapsed_since(&self, since: Stamp) -> Nanos {
        tsc::elapsed_since(since, || self.now())
    }
}

impl MonotonicClock {
    /// Whether latency is measured with the time-stamp counter yet (see the type's docs):
    /// false until its calibration (started by the first stamp) is done, and always false
    /// where there is no invariant counter.
    pub fn latency_from_tsc() -> bool {
        #[cfg(all(target_os = "linux", target_arch = "x86_64", not(loom)))]
        {
            tsc::calibrated()
        }
        #[cfg(not(all(target_os = "linux", target_arch = "x86_64", not(loom))))]
        {
            false
        }
    }
}

#[cfg(target_os = "linux")]
#[inline]
fn timespec_nanos(ts: rustix::time::Timespec) -> Nanos {
    let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(ts.tv_nsec).unwrap_or(0);
    Nanos(secs.saturating_mul(1_000_000_000).saturating_add(nanos))
}

#[cfg(not(target_os = "linux"))]
impl Clock for MonotonicClock {
    #[allow(clippy::disallowed_methods)] // this is the clock implementation
    fn now(&self) -> Nanos {
        use std::sync::OnceLock;
        use std::time::Instant;
        static ORIGIN: OnceLock<Instant> = OnceLock::new();
        let origin = *ORIGIN.get_or_init(Instant::now);
        // Start at one second so that "zero" never means "now" for the first caller.
        Nanos::from_duration(origin.elapsed()).saturating_add(Nanos(1_000_000_000))
    }
}

/// A clock that moves only when told to. Clones share one reading, so a test can hand a
/// clone to the breaker and keep one to `advance`.
///
/// ```
/// use breakerbox::{Clock, ManualClock, Nanos};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let breaker_side = clock.clone();
/// clock.advance(Duration::from_secs(2));
/// assert_eq!(breaker_side.now(), Nanos(2_000_000_000));
/// ```
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    now: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock reading zero.
    pub fn new() -> ManualClock {
        ManualClock::starting_at(Nanos::ZERO)
    }

    /// A clock reading `start`.
    pub fn starting_at(start: Nanos) -> ManualClock {
        ManualClock {
            now: Arc::new(AtomicU64::new(start.0)),
        }
    }

    /// Moves the clock forward by `by` (saturating).
    pub fn advance(&self, by: Duration) {
        let by = Nanos::from_duration(by).0;
        let _ = self
            .now
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                Some(t.saturating_add(by))
            });
    }

    /// Sets the reading. Moving it backwards is allowed, for tests of clock anomalies.
    pub fn set(&self, to: Nanos) {
        self.now.store(to.0, Ordering::Release);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Nanos {
        Nanos(self.now.load(Ordering::Acquire))
    }
}
