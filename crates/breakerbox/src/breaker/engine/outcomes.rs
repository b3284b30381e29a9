//! The engine's outcome paths: recording a permit's verdict in closed and half-open,
//! tripping, ending a probe, and releasing a permit that reports nothing.

use super::{Engine, EngineWindow, Pending};
use crate::breaker::layout::epoch_tag;
use crate::breaker::word::Word;
use crate::events::EventKind;
use crate::model::{evaluate_trip, PermitKind, TripReason, WindowCounts};
use crate::sync::{lock, Ordering};
use crate::{Clock, Nanos, Phase, Verdict};

impl<C: Clock> Engine<C> {
    /// Records the verdict of a permit of `generation` and `kind`.
    #[inline(always)]
    pub(crate) fn record(
        &self,
        generation: u64,
        kind: PermitKind,
        verdict: Verdict,
        latency: Nanos,
        retry_hint: Option<Nanos>,
    ) {
        // Rule 22: one branch when no deadline is configured. Each branch inlines its own
        // copy of the rest, so that without a deadline the verdict stays what the caller
        // passed: for `success()` a constant, which folds every test of it below away.
        // Adjusting the verdict in place instead cost every call about 18 instructions
        // (`scripts/instructions.sh`).
        if self.deadlines {
            let verdict = self.config.past_deadline(kind, verdict, latency);
            return self.record_verdict(generation, kind, verdict, latency, retry_hint);
        }
        self.record_verdict(generation, kind, verdict, latency, retry_hint);
    }

    /// [`Engine::record`] for a breaker that measures no latency (`!self.timed`), so has
    /// no deadline either: skips the test of rule 22 and records a zero latency.
    #[inline(always)]
    pub(crate) fn record_untimed(&self, generation: u64, kind: PermitKind, verdict: Verdict) {
        debug_assert!(!self.timed && !self.deadlines);
        self.record_verdict(generation, kind, verdict, Nanos::ZERO, None);
    }

    /// [`Engine::record`] once the verdict is final.
    #[inline(always)]
    pub(super) fn record_verdict(
        &self,
        generation: u64,
        kind: PermitKind,
        verdict: Verdict,
        latency: Nanos,
        retry_hint: Option<Nanos>,
    ) {
        #[cfg(feature = "metrics")]
        self.counters.record(kind, verdict);
        match kind {
            PermitKind::Normal => self.record_closed(generation, verdict, latency, retry_hint),
            PermitKind::Probe => self.record_probe(generation, verdict, latency, retry_hint),
            PermitKind::Passthrough => self.release(generation, kind),
        }
    }

    #[inline(always)]
    pub(super) fn record_closed(
        &self,
        generation: u64,
        verdict: Verdict,
        latency: Nanos,
        retry_hint: Option<Nanos>,
    ) {
        let w = self.load();
        if w.generation() != generation || w.phase() != Phase::Closed {
            return self.stale_after_settling(w, generation);
        }
        if verdict == Verdict::Ignore {
            return;
        }
        let tag = epoch_tag(generation);
        let failed = verdict == Verdict::Failure;
        let slow = self.config.is_slow(latency);
        let streak = if failed {
            match self.streak.failure(tag) {
                Some(run) => run,
                None => return self.stale(generation),
            }
        } else {
            self.streak.success(tag);
            0
        };
        let counts = match &self.window {
            EngineWindow::None => None,
            EngineWindow::Count(window) => window.record(generation, failed, slow),
            // Buckets are filed by the coarse clock: edges may be a tick late, which no
            // window of whole buckets can tell, and it saves a precise clock reading.
            EngineWindow::Time(window) => {
                window.record(generation, failed, slow, self.clock.now_coarse())
            }
        };
        if failed || counts.is_some() {
            if let Some(reason) = evaluate_trip(
                &self.config,
                streak,
                counts.unwrap_or(WindowCounts::default()),
            ) {
                self.trip(generation, reason, retry_hint);
            }
        }
    }

    #[cold]
    pub(super) fn stale_after_settling(&self, w: Word, generation: u64) {
        let w = self.settle(w, self.clock.now());
        if w.generation() != generation {
            self.stale(generation);
        }
    }

    #[cold]
    pub(super) fn trip(&self, generation: u64, reason: TripReason, retry_hint: Option<Nanos>) {
        let now = self.clock.now();
        let mut pending: Pending = None;
        {
            let mut cold = lock(&self.cold);
            let w = self.load();
            if w.generation() == generation && w.phase() == Phase::Closed {
                // Rule 23: a ramp over by now ends first (the recovery was complete).
                self.settle_ramp_locked(&mut cold, w, now);
                self.reopen_locked(
                    &mut cold,
                    w,
                    now,
                    crate::model::TransitionReason::Tripped(reason),
                    retry_hint,
                    &mut pending,
                );
            }
        }
        self.announce(pending);
    }

    pub(super) fn record_probe(
        &self,
        generation: u64,
        verdict: Verdict,
        latency: Nanos,
        retry_hint: Option<Nanos>,
    ) {
        let now = self.clock.now();
        let mut w = self.settle(self.load(), now);
        if w.generation() != generation {
            return self.stale(generation);
        }
        if w.phase() != Phase::HalfOpen {
            return;
        }
        let verdict = match verdict {
            Verdict::Success if self.config.is_slow(latency) => Verdict::Failure,
            verdict => verdict,
        };
        match verdict {
            Verdict::Ignore => self.free_slot(w, generation),
            Verdict::Failure => self.locked_probe_end(generation, now, Err(retry_hint)),
            Verdict::Success => loop {
                if w.generation() != generation {
                    return self.stale(generation);
                }
                let successes = w.probe_successes() + 1;
                if successes >= self.config.required_successes {
                    return self.locked_probe_end(generation, now, Ok(()));
                }
                let next = w
                    .with_in_flight(w.in_flight().saturating_sub(1))
                    .with_probe_successes(successes);
                match self.word.compare_exchange_weak(
                    w.0,
                    next.0,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => return,
                    Err(actual) => w = Word(actual),
                }
            },
        }
    }

    /// A probe's result that changes the phase: close on the last required success
    /// (`Ok`), re-open on a failure (`Err`, with the dependency's retry hint if any).
    pub(super) fn locked_probe_end(
        &self,
        generation: u64,
        now: Nanos,
        result: Result<(), Option<Nanos>>,
    ) {
        let mut pending: Pending = None;
        let current = {
            let mut cold = lock(&self.cold);
            let w = self.settle_locked(&mut cold, now, &mut pending);
            let current = w.generation() == generation && w.phase() == Phase::HalfOpen;
            if current && result.is_ok() {
                self.enter_closed_locked(
                    &mut cold,
                    w,
                    crate::model::TransitionReason::ProbesSucceeded,
                    self.config.ramp.map(|_| now),
                    &mut pending,
                );
            } else if let (true, Err(retry_hint)) = (current, result) {
                self.reopen_locked(
                    &mut cold,
                    w,
                    now,
                    crate::model::TransitionReason::ProbeFailed,
                    retry_hint,
                    &mut pending,
                );
            }
            current
        };
        self.announce(pending);
        if !current {
            self.stale(generation);
        }
    }

    pub(super) fn free_slot(&self, mut w: Word, generation: u64) {
        loop {
            if w.generation() != generation {
                return self.stale(generation);
            }
            let next = w.with_in_flight(w.in_flight().saturating_sub(1));
            match self
                .word
                .compare_exchange_weak(w.0, next.0, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return,
                Err(actual) => w = Word(actual),
            }
        }
    }

    /// A permit dropped without a verdict: a probe frees its slot; others change nothing.
    pub(crate) fn release(&self, generation: u64, kind: PermitKind) {
        let w = self.load();
        let w = match w.phase() {
            Phase::HalfOpen | Phase::Disabled => self.settle(w, self.clock.now()),
            _ => w,
        };
        if w.generation() != generation {
            return self.stale(generation);
        }
        if kind == PermitKind::Probe && w.phase() == Phase::HalfOpen {
            self.free_slot(w, generation);
        }
    }

    #[cold]
    pub(super) fn stale(&self, generation: u64) {
        self.stale.fetch_add(1, Ordering::Relaxed);
        if self.listeners.active() {
            self.listeners
                .emit(&self.name, EventKind::StaleResult { generation });
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::time::Duration;

    use super::super::Engine;
    use crate::model::PermitKind;
    use crate::sync::Ordering;
    use crate::{Clock, Config, ManualClock, Nanos, Phase, Verdict};

    const RECOVERY: Duration = Duration::from_secs(1);

    /// A probe's result that had checked its half-open phase, then found the lock after
    /// that phase ended and a new one began (the window between `record_probe`'s load and
    /// `locked_probe_end`'s lock, which no clock reading marks for `tests/races.rs`): it is
    /// stale, and the new phase goes on.
    #[test]
    fn a_probe_end_of_an_ended_half_open_phase_leaves_the_next_one_alone() {
        let config = Config::builder()
            .consecutive_failures(1)
            .recovery_timeout(RECOVERY)
            .max_probes(2)
            .required_successes(1)
            .build()
            .expect("a valid config");
        let clock = ManualClock::new();
        let engine = Engine::new(config, clock.clone(), "t".into(), Default::default(), None);
        let (closed, _) = engine.acquire().expect("closed admits");
        engine.record(closed, PermitKind::Normal, Verdict::Failure, Nanos(0), None);
        clock.advance(RECOVERY);
        let (ended, kind) = engine.acquire().expect("the first probe");
        assert_eq!(
            (kind, engine.load().phase()),
            (PermitKind::Probe, Phase::HalfOpen)
        );
        let (same, _) = engine.acquire().expect("the second probe");
        assert_eq!(same, ended);
        // The second probe fails; after the (longer) cool-down a new half-open phase
        // admits a probe. The first probe's result is on its way meanwhile.
        engine.record(same, PermitKind::Probe, Verdict::Failure, Nanos(0), None);
        clock.advance(RECOVERY * 100);
        let (next, kind) = engine.acquire().expect("a probe of the new phase");
        assert_eq!(kind, PermitKind::Probe);
        assert_ne!(next, ended);

        for (n, result) in [Ok(()), Err(None)].into_iter().enumerate() {
            engine.locked_probe_end(ended, clock.now(), result);
            let w = engine.load();
            assert_eq!(
                (w.phase(), w.generation(), w.in_flight()),
                (Phase::HalfOpen, next, 1),
                "{result:?} of the ended phase changed nothing"
            );
            assert_eq!(engine.stale.load(Ordering::Relaxed), n as u64 + 1);
        }
    }
}
