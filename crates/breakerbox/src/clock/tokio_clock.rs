//! A clock that reads tokio's time, so a breaker follows `tokio::time::pause` and
//! `advance` in tests.

use std::time::Duration;

use tokio::time::Instant;

use super::{Clock, Nanos};

/// A [`Clock`] that reads [`tokio::time::Instant`]: the time elapsed since the clock was
/// created. In a runtime whose time is paused (`#[tokio::test(start_paused = true)]`,
/// [`tokio::time::pause`][pause]), the breaker sees exactly the time the test advances,
/// and an auto-advancing `sleep` moves it too; elsewhere it is the monotonic clock.
/// Clones share their starting point.
///
/// [pause]: https://docs.rs/tokio/1/tokio/time/fn.pause.html
///
/// Paused time needs tokio's `test-util` feature, which a test enables for itself (in
/// `[dev-dependencies]`); this crate asks tokio only for `time`.
///
/// ```
/// use breakerbox::{CircuitBreaker, Phase, TokioClock};
/// use std::time::Duration;
///
/// #[tokio::main(flavor = "current_thread", start_paused = true)]
/// async fn main() -> Result<(), breakerbox::ConfigError> {
///     let breaker = CircuitBreaker::builder()
///         .consecutive_failures(1)
///         .recovery_timeout(Duration::from_secs(30))
///         .clock(TokioClock::new())
///         .build()?;
///
///     let _ = breaker.call(|| Err::<(), _>("connection refused"));
///     assert_eq!(breaker.phase(), Phase::Open);
///
///     // Paused time: no real waiting, the breaker sees the 30 s go by.
///     tokio::time::advance(Duration::from_secs(30)).await;
///     let probe = breaker.try_acquire().expect("the recovery timeout is over");
///     assert!(probe.is_probe());
///     assert_eq!(breaker.phase(), Phase::HalfOpen);
///     Ok(())
/// }
/// ```
#[derive(Copy, Clone, Debug)]
pub struct TokioClock {
    start: Instant,
}

impl TokioClock {
    /// A clock reading zero now. Create it inside the runtime whose time it should follow
    /// (outside any runtime, tokio's `Instant` reads the OS clock).
    pub fn new() -> TokioClock {
        TokioClock {
            start: Instant::now(),
        }
    }

    /// A clock reading zero at `start`.
    pub fn starting_at(start: Instant) -> TokioClock {
        TokioClock { start }
    }

    /// How long since the clock's start, as a [`Duration`].
    pub fn elapsed(&self) -> Duration {
        Instant::now().saturating_duration_since(self.start)
    }

    /// Now, as tokio's timers count it: for a `sleep_until` or an interval that must
    /// agree with this clock's readings.
    pub fn instant(&self) -> Instant {
        Instant::now()
    }

    /// The instant `after` from now, for a tokio sleep or a timer's reset; a deadline
    /// past what an instant can hold is a year from now instead of a panic.
    ///
    /// ```
    /// use breakerbox::TokioClock;
    /// use std::time::Duration;
    ///
    /// #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// async fn main() {
    ///     let clock = TokioClock::new();
    ///     let at = clock.deadline_in(Duration::from_millis(250));
    ///     tokio::time::sleep_until(at).await;
    ///     assert_eq!(clock.elapsed(), Duration::from_millis(250));
    ///     assert!(clock.deadline_in(Duration::MAX) > clock.instant());
    /// }
    /// ```
    pub fn deadline_in(&self, after: Duration) -> Instant {
        let now = Instant::now();
        now.checked_add(after)
            .unwrap_or_else(|| now + Duration::from_secs(365 * 24 * 3600))
    }
}

impl Default for TokioClock {
    fn default() -> TokioClock {
        TokioClock::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Nanos {
        Nanos::from_duration(self.elapsed())
    }
}
