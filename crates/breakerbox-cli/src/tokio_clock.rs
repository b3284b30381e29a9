//! Tokio's clock, the one the CLI's sleeps, deadlines and paced traffic run on: the only
//! place the CLI reads it, so that a test under tokio's paused time controls all of them.

use std::sync::OnceLock;
use std::time::Duration;

use breakerbox::{Clock, Nanos};
use tokio::time::Instant;

/// Tokio's clock: as a [`Clock`] (nanoseconds since its first reading in this process),
/// and as the instants tokio's timers take.
#[derive(Clone, Copy, Debug, Default)]
pub struct TokioClock;

impl TokioClock {
    /// Now, as tokio's timers count it.
    pub fn instant(self) -> Instant {
        Instant::now()
    }

    /// The instant `after` from now, for a tokio sleep or timer reset.
    pub fn deadline_in(self, after: Duration) -> Instant {
        let now = Instant::now();
        // A deadline past what an instant holds waits as long as one can (a year on).
        now.checked_add(after)
            .unwrap_or_else(|| now + Duration::from_secs(365 * 24 * 3600))
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Nanos {
        static BASE: OnceLock<Instant> = OnceLock::new();
        let base = *BASE.get_or_init(Instant::now);
        Nanos::from_duration(Instant::now().saturating_duration_since(base))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn readings_follow_tokios_paused_time() {
        let clock = TokioClock;
        let (start, reading) = (clock.instant(), clock.now());
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(clock.instant() - start, Duration::from_millis(250));
        assert_eq!(
            clock.now().saturating_sub(reading).as_duration(),
            Duration::from_millis(250)
        );
        assert_eq!(
            clock.deadline_in(Duration::from_secs(2)) - clock.instant(),
            Duration::from_secs(2)
        );
        assert!(clock.deadline_in(Duration::MAX) > clock.instant());
    }
}
