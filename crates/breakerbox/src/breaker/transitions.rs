//! Phase changes. Every function here runs with `cold` locked; the lock serialises
//! generations, while half-open counters may still move lock-free, which is why the word is
//! published by compare-and-swap.
//!
//! Rule numbers ("rule 7") refer to `docs/RULES.md` in the repository.

use super::engine::{Cold, Engine, Pending};
use super::layout::epoch_tag;
use super::word::Word;
use crate::model::{Transition, TransitionReason};
use crate::sync::{lock, Ordering};
use crate::{Clock, Nanos, Phase};

impl<C: Clock> Engine<C> {
    /// Rule 1: a timed-out half-open re-opens; an expired `disable` closes.
    pub(super) fn settle_locked(&self, cold: &mut Cold, now: Nanos, pending: &mut Pending) -> Word {
        let w = self.load();
        match w.phase() {
            Phase::HalfOpen if now.as_u64() >= self.deadline.load(Ordering::Acquire) => self
                .reopen_locked(
                    cold,
                    w,
                    now,
                    TransitionReason::HalfOpenTimedOut,
                    None,
                    pending,
                ),
            Phase::Disabled if now.as_u64() >= self.until.load(Ordering::Acquire) => {
                self.enter_closed_locked(cold, w, TransitionReason::OverrideExpired, None, pending)
            }
            _ => w,
        }
    }

    /// Rule 9: every re-open is a trip; the cool-down grows with consecutive trips.
    pub(super) fn reopen_locked(
        &self,
        cold: &mut Cold,
        w: Word,
        now: Nanos,
        reason: TransitionReason,
        retry_hint: Option<Nanos>,
        pending: &mut Pending,
    ) -> Word {
        cold.trips = cold.trips.saturating_add(1);
        let sample = match &self.jitter {
            Some(source) if self.config.jitter > 0.0 => source.sample(),
            _ => 0.0,
        };
        let open_for = self
            .config
            .open_duration_with_hint(cold.trips, sample, retry_hint);
        // Rejections compare against the coarse clock, which may lag `now` by a tick;
        // counting the open phase from the earlier of the two keeps every `retry_after`
        // within the open duration.
        let start = now.min(self.clock.now_coarse());
        self.until
            .store(start.saturating_add(open_for).as_u64(), Ordering::Release);
        self.publish(w, w.next(Phase::Open), reason, pending)
    }

    /// Open (or an expired forced open) to half-open; the caller takes the first slot.
    /// `_locked` is the locked state, as proof that the lock is held.
    pub(super) fn enter_half_open_locked(
        &self,
        _locked: &mut Cold,
        w: Word,
        now: Nanos,
        pending: &mut Pending,
    ) -> Word {
        let timeout = Nanos::from_duration(self.config.half_open_timeout);
        self.deadline
            .store(now.saturating_add(timeout).as_u64(), Ordering::Release);
        self.until.store(0, Ordering::Release);
        let next = w.next(Phase::HalfOpen).with_in_flight(1);
        self.publish(w, next, TransitionReason::CooldownElapsed, pending);
        next
    }

    /// A fresh closed phase: new generation, empty window and streak, no trips; or, with
    /// `ramp` (the close from half-open with a ramp configured, rule 23), a ramp that
    /// begins then, keeping the trips until it ends.
    pub(super) fn enter_closed_locked(
        &self,
        cold: &mut Cold,
        w: Word,
        reason: TransitionReason,
        ramp: Option<Nanos>,
        pending: &mut Pending,
    ) -> Word {
        let next = w.next(Phase::Closed).with_ramp(ramp.is_some());
        let tag = epoch_tag(next.generation());
        self.streak.reset(tag);
        match &self.window {
            super::engine::EngineWindow::None => {}
            super::engine::EngineWindow::Count(window) => window.reset(next.generation()),
            super::engine::EngineWindow::Time(window) => window.reset(next.generation()),
        }
        self.until.store(0, Ordering::Release);
        match ramp {
            Some(started) => {
                self.ramp_started.store(started.as_u64(), Ordering::Release);
                self.ramp_calls.0.store(0, Ordering::Release);
            }
            None => cold.trips = 0,
        }
        self.publish(w, next, reason, pending)
    }

    /// Replaces the word of `from`'s generation by `next`, whatever the half-open counters
    /// did meanwhile.
    fn publish(
        &self,
        from: Word,
        next: Word,
        reason: TransitionReason,
        pending: &mut Pending,
    ) -> Word {
        let mut current = from.0;
        loop {
            match self.word.compare_exchange_weak(
                current,
                next.0,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(actual) => current = actual,
            }
        }
        *pending = Some(Transition {
            from: from.phase(),
            to: next.phase(),
            generation: next.generation(),
            reason,
        });
        next
    }

    /// Rule 11: force open or disable from any phase; a new generation only when the phase
    /// changes. `until` is when the override expires (`None`: never).
    pub(crate) fn manual(&self, to: Phase, until: Option<Nanos>) {
        let until = until.map_or(u64::MAX, Nanos::as_u64);
        let reason = if to == Phase::ForcedOpen {
            TransitionReason::ForcedOpen
        } else {
            TransitionReason::Disabled
        };
        let mut pending: Pending = None;
        {
            let _locked = lock(&self.cold);
            let w = self.load();
            self.until.store(until, Ordering::Release);
            if w.phase() != to {
                self.publish(w, w.next(to), reason, &mut pending);
            }
        }
        self.announce(pending);
    }

    /// Rule 11: back to a fresh closed phase, always with a new generation.
    pub(crate) fn reset(&self) {
        let mut pending: Pending = None;
        {
            let mut cold = lock(&self.cold);
            let w = self.load();
            self.enter_closed_locked(&mut cold, w, TransitionReason::Reset, None, &mut pending);
        }
        self.announce(pending);
    }

    pub(crate) fn trips(&self) -> u32 {
        lock(&self.cold).trips
    }
}
