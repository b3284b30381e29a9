//! Rule 23 in the in-memory engine: admission during a ramp, off the closed hot path.
//!
//! A closed word with the ramp flag sends acquires here. Each takes its number in the
//! ramp with one `fetch_add` and is admitted iff [`ramp_admits`] says so at the fraction
//! of its coarse clock reading: no lock. Concurrent acquires get distinct numbers, so the
//! admissions are those of some serial order of the same numbers; the only difference
//! concurrency makes is that an acquire may use a fraction up to one coarse tick (plus
//! the time it was descheduled) older than its number's turn, and since the test is
//! monotone in the fraction, a run of acquires admits between what it would at the
//! oldest and at the newest fraction its callers read (each within the bound stated on
//! [`ramp_admits`]). The flag is cleared, and `trips` reset, under the lock by the first
//! acquire (or trip) that finds the ramp over.

use super::engine::{Cold, Engine};
use super::word::Word;
use crate::config::{ramp_admits, Rate};
use crate::model::PermitKind;
use crate::sync::{lock, Ordering};
use crate::{CircuitOpen, Clock, Nanos, Phase};

impl<C: Clock> Engine<C> {
    /// The fraction the ramp of a word with the ramp flag admits at `now`, in parts per
    /// million; `None` once it is over.
    fn ramp_fraction_ppm(&self, now: Nanos) -> Option<u32> {
        let ramp = self.config.ramp?;
        let started = Nanos(self.ramp_started.load(Ordering::Acquire));
        ramp.fraction_ppm(now.saturating_sub(started))
    }

    /// An acquire in a closed phase whose word has the ramp flag.
    #[inline(never)]
    pub(super) fn acquire_ramp(&self, w: Word) -> Result<(u64, PermitKind), CircuitOpen> {
        let now = self.clock.now_coarse();
        let Some(fraction) = self.ramp_fraction_ppm(now) else {
            self.end_ramp(w, now);
            return Ok((w.generation(), PermitKind::Normal));
        };
        let n = self.ramp_calls.0.fetch_add(1, Ordering::Relaxed);
        if ramp_admits(n, fraction) {
            Ok((w.generation(), PermitKind::Normal))
        } else {
            self.rejected(w.generation(), Phase::Closed, None)
        }
    }

    /// What the next ramp acquire would answer now (changes nothing).
    pub(super) fn check_ramp(&self) -> Result<(), CircuitOpen> {
        match self.ramp_fraction_ppm(self.clock.now_coarse()) {
            Some(fraction) if !ramp_admits(self.ramp_calls.0.load(Ordering::Relaxed), fraction) => {
                Err(CircuitOpen::new(Phase::Closed, None))
            }
            _ => Ok(()),
        }
    }

    /// The ramp of the closed phase of `w` is over at `now`: it ends (once).
    #[cold]
    fn end_ramp(&self, w: Word, now: Nanos) {
        let mut cold = lock(&self.cold);
        self.settle_ramp_locked(&mut cold, w, now);
    }

    /// Under the lock: if the closed phase of `w` is still current with its ramp flag and
    /// the ramp is over at `now`, clear the flag and reset `trips` (the recovery is done).
    pub(super) fn settle_ramp_locked(&self, cold: &mut Cold, w: Word, now: Nanos) {
        let current = self.load();
        // A closed word holds only its generation and the flag (the half-open counters
        // are cleared on every phase change, and only the flag is ever set in a closed
        // phase), so one comparison asks all three: the same generation, still closed,
        // still ramping.
        if current != w.with_ramp(true) || self.ramp_fraction_ppm(now).is_some() {
            return;
        }
        cold.trips = 0;
        // Nothing moves a closed word lock-free, so one exchange does it.
        let _ = self.word.compare_exchange(
            current.0,
            current.with_ramp(false).0,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// The fraction admitted now, for a snapshot: `None` outside a ramp.
    pub(super) fn ramp_now(&self, w: Word, now: Nanos) -> Option<Rate> {
        if w.phase() != Phase::Closed || !w.ramping() {
            return None;
        }
        self.ramp_fraction_ppm(now)
            .and_then(|ppm| Rate::from_ppm(ppm).ok())
    }
}
