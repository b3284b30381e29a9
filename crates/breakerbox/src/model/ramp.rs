//! Rule 23, gradual recovery: the ramp, a sub-state of Closed that begins at the close
//! from half-open. While it lasts, an acquire is admitted only if its number in the ramp
//! falls in the fraction admitted at `now`; a trip re-opens as from Closed, keeping the
//! trips counted before the close (backoff goes on across a failed recovery).

use super::{ModelState, Transition, TransitionReason};
use crate::config::{ramp_admits, Rate};
use crate::{Config, Nanos};

impl ModelState {
    /// The close from half-open: with a ramp configured, the ramp begins at `now` and
    /// `trips` is kept until it ends; without one, `trips` resets (rule 9).
    pub(super) fn begin_ramp(&mut self, now: Nanos, config: &Config) {
        if config.ramp.is_some() {
            self.ramp_started = Some(now);
            self.ramp_calls = 0;
        } else {
            self.trips = 0;
        }
    }

    /// Any phase change ends a ramp (its trips are then whatever the change leaves).
    pub(super) fn end_ramp(&mut self) {
        self.ramp_started = None;
        self.ramp_calls = 0;
    }

    /// The fraction the ramp admits at `now`, in parts per million, or `None` when no ramp
    /// is active at `now` (none began, or `now - ramp_started >= duration`).
    pub(super) fn ramp_fraction_ppm(&self, now: Nanos, config: &Config) -> Option<u32> {
        let (started, ramp) = (self.ramp_started?, config.ramp?);
        ramp.fraction_ppm(now.saturating_sub(started))
    }

    /// The fraction a ramp admits at `now`, for a snapshot (changes nothing): `None` when
    /// no ramp is active at `now`.
    pub fn ramp_fraction(&self, now: Nanos, config: &Config) -> Option<Rate> {
        self.ramp_fraction_ppm(now, config)
            .and_then(|ppm| Rate::from_ppm(ppm).ok())
    }

    /// A ramp that is over at `now` ends: the recovery is complete, so `trips` resets.
    /// Applied by an acquire and by a trip, never by other operations.
    fn settle_ramp(&mut self, now: Nanos, config: &Config) {
        if self.ramp_started.is_some() && self.ramp_fraction_ppm(now, config).is_none() {
            self.end_ramp();
            self.trips = 0;
        }
    }

    /// An acquire in Closed: admitted, unless a ramp is active at `now` and this acquire's
    /// number is not in the fraction admitted now (every acquire of the ramp takes a number,
    /// admitted or not). A ramp that is over ends here.
    pub(super) fn ramp_admits(&mut self, now: Nanos, config: &Config) -> bool {
        self.settle_ramp(now, config);
        let Some(fraction) = self.ramp_fraction_ppm(now, config) else {
            return true;
        };
        let n = self.ramp_calls;
        self.ramp_calls = n.saturating_add(1);
        ramp_admits(n, fraction)
    }

    /// A trip in Closed: during a ramp it counts on from the trips before the close; a
    /// ramp over at `now` ends first, so it is the first trip.
    pub(super) fn trip_closed(
        &mut self,
        now: Nanos,
        config: &Config,
        r: f64,
        retry_hint: Option<Nanos>,
        reason: TransitionReason,
    ) -> Transition {
        self.settle_ramp(now, config);
        self.reopen_hinted(now, config, r, retry_hint, reason)
    }
}
