//! The in-memory engine: the hot paths, lock-free, and the state they share.
//!
//! Invariants:
//! - The generation (and so the phase) changes only while `cold` is locked. Half-open
//!   counters in the word change lock-free, by compare-and-swap on the whole word, so a
//!   probe slot is always reserved in the generation it was checked in.
//! - `until` and `deadline` are written before the word that makes them current is
//!   published (release), and read after the word (acquire).
//! - Closed-phase state (streak, window) is tagged with the closed generation, so a new
//!   closed phase starts fresh without waiting for writers of older ones.
//!
//! Rule numbers ("rule 7") refer to `docs/RULES.md` in the repository.

mod outcomes;

use super::count_window::CountWindow;
use super::streak::Streak;
use super::time_window::TimeWindow;
use super::word::Word;
use crate::config::WindowKind;
use crate::events::{EventKind, Listeners};
use crate::model::{PermitKind, Transition};
use crate::sync::{lock, AtomicBool, AtomicU64, Mutex, Ordering};
use crate::{CircuitOpen, Clock, Config, JitterSource, Nanos, Phase};

pub(crate) enum EngineWindow {
    None,
    Count(CountWindow),
    Time(TimeWindow),
}

/// What only changes under the lock, besides the generation.
pub(crate) struct Cold {
    /// Consecutive trips without a close, for backoff.
    pub(crate) trips: u32,
}

/// The shared state of one breaker.
pub(crate) struct Engine<C> {
    pub(super) word: AtomicU64,
    pub(super) until: AtomicU64,
    pub(super) deadline: AtomicU64,
    /// Written by failures (and the success after one): kept off the line of `word`,
    /// which every call reads.
    pub(super) streak: super::padded::Padded<Streak>,
    pub(super) window: EngineWindow,
    pub(super) stale: AtomicU64,
    /// Rule 20: admit what would be rejected (read only off the closed fast path).
    pub(super) shadow: AtomicBool,
    /// Rule 20: would-be rejections admitted in shadow mode.
    pub(super) shadow_rejections: AtomicU64,
    /// Rule 23: when the current ramp began (written before the word that sets the ramp
    /// flag is published; read only when the word has the flag).
    pub(super) ramp_started: AtomicU64,
    /// Rule 23: the acquires of the current ramp so far; each takes its number here.
    pub(super) ramp_calls: super::padded::Padded<AtomicU64>,
    pub(super) cold: Mutex<Cold>,
    pub(crate) config: Config,
    /// `config.measures_latency()`, read once: whether permits read the clock (a slow-call
    /// rule or a deadline), one load on the hot path.
    pub(crate) timed: bool,
    /// `config.has_deadline()`, read once (rule 22).
    deadlines: bool,
    pub(crate) clock: C,
    pub(crate) name: std::sync::Arc<str>,
    pub(super) listeners: Listeners,
    pub(super) jitter: Option<std::sync::Arc<dyn JitterSource>>,
    #[cfg(feature = "metrics")]
    counters: crate::metrics::OutcomeCounters,
}

/// A transition made under the lock, to announce once the lock is released.
pub(super) type Pending = Option<Transition>;

impl<C: Clock> Engine<C> {
    pub(crate) fn new(
        config: Config,
        clock: C,
        name: std::sync::Arc<str>,
        listeners: Listeners,
        jitter: Option<std::sync::Arc<dyn JitterSource>>,
    ) -> Engine<C> {
        let window = match config.rate.map(|rule| (rule.window, rule.min_calls)) {
            None => EngineWindow::None,
            Some((WindowKind::Count { size }, min_calls)) => {
                EngineWindow::Count(CountWindow::new(size, min_calls, 0))
            }
            Some((kind @ WindowKind::Time { buckets, .. }, min_calls)) => {
                EngineWindow::Time(TimeWindow::new(
                    kind.bucket_width().unwrap_or(Nanos(1)),
                    buckets,
                    min_calls,
                    0,
                ))
            }
        };
        #[cfg(feature = "metrics")]
        crate::metrics::set_phase(&name, Phase::Closed);
        Engine {
            #[cfg(feature = "metrics")]
            counters: crate::metrics::OutcomeCounters::new(&name),
            word: AtomicU64::new(Word::new(Phase::Closed, 0).0),
            until: AtomicU64::new(0),
            deadline: AtomicU64::new(0),
            streak: super::padded::Padded(Streak::new(0)),
            window,
            stale: AtomicU64::new(0),
            shadow: AtomicBool::new(config.shadow),
            shadow_rejections: AtomicU64::new(0),
            ramp_started: AtomicU64::new(0),
            ramp_calls: super::padded::Padded(AtomicU64::new(0)),
            cold: Mutex::new(Cold { trips: 0 }),
            timed: config.measures_latency(),
            deadlines: config.has_deadline(),
            config,
            clock,
            name,
            listeners,
            jitter,
        }
    }

    #[inline(always)]
    pub(crate) fn load(&self) -> Word {
        Word(self.word.load(Ordering::Acquire))
    }

    // ----- acquire -------------------------------------------------------------------

    /// Admits a call or says why not. Closed without a ramp costs one atomic load.
    #[inline(always)]
    pub(crate) fn acquire(&self) -> Result<(u64, PermitKind), CircuitOpen> {
        let w = self.load();
        if w.is_plain_closed() {
            return Ok((w.generation(), PermitKind::Normal));
        }
        self.acquire_not_closed(w)
    }

    #[inline(never)]
    fn acquire_not_closed(&self, w: Word) -> Result<(u64, PermitKind), CircuitOpen> {
        match w.phase() {
            Phase::Open | Phase::ForcedOpen => {
                let until = self.until.load(Ordering::Acquire);
                if until == u64::MAX && w.phase() == Phase::ForcedOpen {
                    return self.rejected(w.generation(), Phase::ForcedOpen, None);
                }
                let now = self.clock.now_coarse();
                if now.as_u64() < until {
                    return self.rejected(
                        w.generation(),
                        w.phase(),
                        Some(Nanos(until - now.as_u64())),
                    );
                }
                self.acquire_slow(now)
            }
            Phase::HalfOpen => self.acquire_probe(w, self.clock.now_coarse()),
            Phase::Disabled => {
                let until = self.until.load(Ordering::Acquire);
                if until == u64::MAX {
                    return Ok((w.generation(), PermitKind::Passthrough));
                }
                let now = self.clock.now_coarse();
                if now.as_u64() < until {
                    return Ok((w.generation(), PermitKind::Passthrough));
                }
                self.acquire_slow(now)
            }
            Phase::Closed => self.acquire_ramp(w),
        }
    }

    /// What [`Engine::acquire`] would answer now, if it would reject; changes nothing.
    /// In shadow mode (rule 20) nothing is rejected.
    /// A plain closed breaker (the common case) answers inline with one atomic load; the
    /// rest is out of line.
    #[inline(always)]
    pub(crate) fn check(&self) -> Result<(), CircuitOpen> {
        let w = self.load();
        if w.is_plain_closed() {
            return Ok(());
        }
        self.check_not_plain_closed(w)
    }

    /// [`Engine::check`] for a word that is not plain closed; decides on that one word.
    #[inline(never)]
    fn check_not_plain_closed(&self, w: Word) -> Result<(), CircuitOpen> {
        match self.check_rules(w) {
            Err(_) if self.shadow.load(Ordering::Relaxed) => Ok(()),
            answer => answer,
        }
    }

    /// What the rules alone would answer for the word `w` (without shadow mode).
    fn check_rules(&self, w: Word) -> Result<(), CircuitOpen> {
        let retry = |until: u64, now: Nanos| Some(Nanos(until.saturating_sub(now.as_u64())));
        match w.phase() {
            // A closed word that is not plain closed carries the ramp flag (rule 23).
            Phase::Closed => self.check_ramp(),
            Phase::Disabled => Ok(()),
            Phase::ForcedOpen if self.until.load(Ordering::Acquire) == u64::MAX => {
                Err(open_at(Phase::ForcedOpen, None))
            }
            Phase::Open | Phase::ForcedOpen => {
                let until = self.until.load(Ordering::Acquire);
                let now = self.clock.now_coarse();
                if now.as_u64() < until {
                    Err(open_at(w.phase(), retry(until, now)))
                } else {
                    Ok(())
                }
            }
            Phase::HalfOpen => {
                let deadline = self.deadline.load(Ordering::Acquire);
                let now = self.clock.now_coarse();
                if now.as_u64() >= deadline {
                    // Rule 1: the next acquire re-opens (a trip) and rejects.
                    Err(open_at(Phase::Open, Some(self.next_open_duration())))
                } else if w.in_flight() >= self.config.max_probes {
                    Err(open_at(Phase::HalfOpen, retry(deadline, now)))
                } else {
                    Ok(())
                }
            }
        }
    }

    /// How long the next re-open would last, for a rejection that has not re-opened yet:
    /// exact without jitter; with jitter, the shortest it can be (the earliest a retry may
    /// be admitted). Takes the lock to read the trip count (only on this rare path).
    #[cold]
    fn next_open_duration(&self) -> Nanos {
        let trips = lock(&self.cold).trips.saturating_add(1);
        // The sample that shortens most; `open_duration` ignores it when jitter is 0.
        let sample = if self.jitter.is_some() { 1.0 } else { 0.0 };
        self.config.open_duration(trips, sample)
    }

    fn acquire_probe(&self, w: Word, now: Nanos) -> Result<(u64, PermitKind), CircuitOpen> {
        if w.phase() != Phase::HalfOpen {
            return self.acquire();
        }
        let deadline = self.deadline.load(Ordering::Acquire);
        if now.as_u64() >= deadline {
            return self.acquire_slow(now);
        }
        match self.reserve_probe(w) {
            Ok(generation) => Ok((generation, PermitKind::Probe)),
            // The word moved to another phase meanwhile: decide afresh.
            Err(current) if current.generation() != w.generation() => self.acquire(),
            Err(_) => self.rejected(
                w.generation(),
                Phase::HalfOpen,
                Some(Nanos(deadline - now.as_u64())),
            ),
        }
    }

    /// Takes a probe slot in the half-open phase of `w`'s generation by compare-and-swap.
    /// `Err` carries the current word when every slot is taken or the phase has moved on.
    fn reserve_probe(&self, mut w: Word) -> Result<u64, Word> {
        let generation = w.generation();
        loop {
            if w.phase() != Phase::HalfOpen
                || w.generation() != generation
                || w.in_flight() >= self.config.max_probes
            {
                return Err(w);
            }
            let next = w.with_in_flight(w.in_flight() + 1);
            match self
                .word
                .compare_exchange_weak(w.0, next.0, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Ok(generation),
                Err(actual) => w = Word(actual),
            }
        }
    }

    /// Acquire when something is due: under the lock, apply it, then decide.
    fn acquire_slow(&self, now: Nanos) -> Result<(u64, PermitKind), CircuitOpen> {
        let mut pending: Pending = None;
        let decision = {
            let mut cold = lock(&self.cold);
            let w = self.settle_locked(&mut cold, now, &mut pending);
            match w.phase() {
                // A probe closed it meanwhile: the ramp decides, once the lock is free.
                Phase::Closed if w.ramping() => Err((w.generation(), Phase::Closed, None)),
                Phase::Closed => Ok((w.generation(), PermitKind::Normal)),
                Phase::Disabled => Ok((w.generation(), PermitKind::Passthrough)),
                Phase::Open | Phase::ForcedOpen => {
                    let until = self.until.load(Ordering::Acquire);
                    if now.as_u64() >= until {
                        let w = self.enter_half_open_locked(&mut cold, w, now, &mut pending);
                        Ok((w.generation(), PermitKind::Probe))
                    } else if until == u64::MAX && w.phase() == Phase::ForcedOpen {
                        Err((w.generation(), w.phase(), None))
                    } else {
                        Err((w.generation(), w.phase(), Some(Nanos(until - now.as_u64()))))
                    }
                }
                Phase::HalfOpen => {
                    // Under the lock the generation cannot move, so `Err` means full.
                    let deadline = Nanos(self.deadline.load(Ordering::Acquire));
                    self.reserve_probe(w)
                        .map(|generation| (generation, PermitKind::Probe))
                        .map_err(|_| {
                            (
                                w.generation(),
                                Phase::HalfOpen,
                                Some(deadline.saturating_sub(now)),
                            )
                        })
                }
            }
        };
        self.announce(pending);
        match decision {
            Err((_, Phase::Closed, _)) => self.acquire(),
            decision => decision
                .or_else(|(generation, phase, retry)| self.rejected(generation, phase, retry)),
        }
    }

    /// A rejection in `phase` of `generation`, or, in shadow mode (rule 20), a passthrough
    /// permit of that generation, counted as a would-be rejection.
    #[inline]
    pub(super) fn rejected(
        &self,
        generation: u64,
        phase: Phase,
        retry_after: Option<Nanos>,
    ) -> Result<(u64, PermitKind), CircuitOpen> {
        let open = CircuitOpen::from_nanos(phase, retry_after.map(Nanos::as_u64));
        if self.shadow.load(Ordering::Relaxed) {
            self.shadow_rejections.fetch_add(1, Ordering::Relaxed);
            if self.listeners.active() {
                self.listeners
                    .emit(&self.name, EventKind::ShadowRejected(open));
            }
            return Ok((generation, PermitKind::Passthrough));
        }
        if self.listeners.active() {
            self.listeners.emit(&self.name, EventKind::Rejected(open));
        }
        Err(open)
    }

    /// Rule 20: switches shadow mode; changes nothing else.
    pub(crate) fn set_shadow(&self, on: bool) {
        self.shadow.store(on, Ordering::Relaxed);
    }

    /// Rule 1 for operations other than acquire: applies a due half-open timeout or
    /// override expiry, and returns the word after it.
    fn settle(&self, w: Word, now: Nanos) -> Word {
        let due = match w.phase() {
            Phase::HalfOpen => now.as_u64() >= self.deadline.load(Ordering::Acquire),
            Phase::Disabled => now.as_u64() >= self.until.load(Ordering::Acquire),
            _ => false,
        };
        if !due {
            return w;
        }
        let mut pending: Pending = None;
        let w = {
            let mut cold = lock(&self.cold);
            self.settle_locked(&mut cold, now, &mut pending)
        };
        self.announce(pending);
        w
    }

    pub(super) fn announce(&self, pending: Pending) {
        if let Some(transition) = pending {
            #[cfg(feature = "metrics")]
            crate::metrics::set_phase(&self.name, transition.to);
            self.listeners
                .emit(&self.name, EventKind::Transition(transition));
        }
    }
}

fn open_at(phase: Phase, retry_after: Option<Nanos>) -> CircuitOpen {
    CircuitOpen::new(phase, retry_after.map(Nanos::as_duration))
}
