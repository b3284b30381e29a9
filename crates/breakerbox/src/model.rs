//! The pure transition model: `(state, operation, now, config) -> (state, decision)`.
//!
//! This is the contract every engine implements (the in-memory [`CircuitBreaker`] and the
//! Redis Lua scripts) and the oracle their tests are held against. It has no atomics, no
//! clock and no randomness: time and the jitter sample are arguments. It is written to be
//! ported line by line; see `docs/RULES.md` (rules 1-13, and 19 for outcomes that waited
//! in a batch, 20 for shadow mode, 21 for the quorum, 22 for call deadlines, 23 for the
//! ramp), which it follows rule by rule.
//!
//! ```
//! use breakerbox::model::{Decision, ModelState, Operation, PermitKind};
//! use breakerbox::{Config, Nanos, Phase, Verdict};
//!
//! let config = Config::builder().consecutive_failures(1).build().unwrap();
//! let mut state = ModelState::new(&config);
//! let step = state.apply(Operation::Acquire, Nanos(0), &config, 0.0);
//! let Decision::Admitted { generation, kind } = step.decision else { panic!() };
//! let outcome = Operation::Outcome { generation, kind, verdict: Verdict::Failure, latency: Nanos(5), retry_hint: None, age: Nanos::ZERO, node: 0 };
//! let step = state.apply(outcome, Nanos(10), &config, 0.0);
//! assert_eq!(state.phase, Phase::Open);
//! assert_eq!(step.transition.unwrap().to, Phase::Open);
//! ```
//!
//! [`CircuitBreaker`]: crate::CircuitBreaker

mod policy;
mod quorum;
mod ramp;
mod reason;
mod window;

pub use policy::{evaluate_trip, fired_rules, TripReason, WindowCounts};
pub use quorum::{NodeFailure, QuorumTrack};
pub use reason::TransitionReason;
pub use window::{Bucket, ModelWindow};

use crate::{Config, Nanos, Phase, Verdict};

/// What a permit is for.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum PermitKind {
    /// A call in closed; its outcome goes into the window.
    Normal,
    /// A half-open probe holding one of the `max_probes` slots.
    Probe,
    /// A call while disabled, or a call admitted in shadow mode that would have been
    /// rejected (rule 20); nothing is recorded.
    Passthrough,
}

/// One operation on a breaker.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Operation {
    /// Ask to make a call.
    Acquire,
    /// Report the verdict of a call admitted with a permit of `generation` and `kind`.
    Outcome {
        /// The permit's generation.
        generation: u64,
        /// The permit's kind.
        kind: PermitKind,
        /// How the call was judged.
        verdict: Verdict,
        /// How long it took.
        latency: Nanos,
        /// How long the dependency asked to be left alone (an HTTP `Retry-After`), if it
        /// did: when this outcome opens the breaker, the open phase lasts at least this
        /// long, capped at `max_open_duration`.
        retry_hint: Option<Nanos>,
        /// How long before `now` the call completed: zero for an outcome reported when
        /// it happened; more for one that waited in a batch (rule 19: a success that
        /// completed before the current failure streak began does not end it).
        age: Nanos,
        /// Which node reported it (rule 21; an engine that is one node says 0). Only a
        /// config with a quorum looks at it.
        node: u64,
    },
    /// A permit was dropped without a verdict (e.g. a cancelled future).
    Release {
        /// The permit's generation.
        generation: u64,
        /// The permit's kind.
        kind: PermitKind,
    },
    /// An operator opens the breaker, until `until` if given.
    ForceOpen {
        /// When the override expires (the breaker then probes, as after an open phase).
        until: Option<Nanos>,
    },
    /// An operator disables the breaker, until `until` if given.
    Disable {
        /// When the override expires (the breaker then closes).
        until: Option<Nanos>,
    },
    /// An operator resets the breaker to a fresh closed state.
    Reset,
    /// An operator switches shadow mode on or off (rule 20). Changes nothing else: no
    /// generation, no transition.
    SetShadow {
        /// Whether the breaker is in shadow mode from now on.
        on: bool,
    },
}

/// What an operation decided.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The call may go ahead with a permit of this generation and kind.
    Admitted {
        /// The permit's generation.
        generation: u64,
        /// The permit's kind.
        kind: PermitKind,
    },
    /// The call is rejected.
    Rejected {
        /// The phase after the operation.
        phase: Phase,
        /// When to retry, if known.
        retry_after: Option<Nanos>,
    },
    /// The outcome or release was applied.
    Recorded,
    /// Rule 21: the outcome, a failure, was applied and a failure-driven rule fired, but
    /// without the quorum of nodes: the shared phase stays closed and the reporting node
    /// should open its own view for `open_for`.
    LocalOpen {
        /// The first rule that fired.
        reason: TripReason,
        /// How long the node's local open phase lasts: the open duration a trip would
        /// have had, without jitter, at least the outcome's retry hint (capped).
        open_for: Nanos,
    },
    /// The outcome or release belonged to an older generation and changed nothing.
    Stale,
    /// A manual operation was applied.
    Done,
}

/// A phase change.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    /// The phase before.
    pub from: Phase,
    /// The phase after.
    pub to: Phase,
    /// The new generation.
    pub generation: u64,
    /// Why.
    pub reason: TransitionReason,
}

/// The result of [`ModelState::apply`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// What was decided.
    pub decision: Decision,
    /// The phase change it made, if any (an operation makes at most one).
    pub transition: Option<Transition>,
}

/// The whole state of one breaker.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelState {
    /// The current phase.
    pub phase: Phase,
    /// +1 at every phase change (and at every reset).
    pub generation: u64,
    /// When the current phase began.
    pub since: Nanos,
    /// Open: when the cool-down ends. ForcedOpen / Disabled: when the override expires
    /// ([`Nanos::MAX`] for never). Otherwise unused (zero).
    pub open_until: Nanos,
    /// Consecutive trips without a close, for backoff.
    pub trips: u32,
    /// Half-open: probes in flight.
    pub in_flight: u32,
    /// Half-open: consecutive probe successes.
    pub probe_successes: u32,
    /// Closed: the current run of consecutive failures.
    pub consecutive_failures: u32,
    /// Closed: when the earliest failure of that run completed (zero without a run).
    pub streak_started: Nanos,
    /// Closed: the rate window.
    pub window: ModelWindow,
    /// Rule 20: in shadow mode, an acquire that would be rejected admits a passthrough
    /// permit instead. Not a phase: kept across transitions and resets.
    pub shadow: bool,
    /// Rule 20: how many acquires were admitted in shadow mode that would have been
    /// rejected. Kept across transitions and resets.
    pub shadow_rejections: u64,
    /// Closed, rule 21 (a config with a quorum): the nodes that failed recently.
    pub quorum: QuorumTrack,
    /// Rule 23: Closed after a close from half-open, with a ramp configured: when the ramp
    /// began (the close). `None` without a ramp, or once it has ended.
    pub ramp_started: Option<Nanos>,
    /// Rule 23: the acquires of the current ramp so far (the next one is number
    /// `ramp_calls`, counting from 0).
    pub ramp_calls: u64,
}

impl ModelState {
    /// A fresh closed breaker at generation 0.
    pub fn new(config: &Config) -> ModelState {
        ModelState {
            phase: Phase::Closed,
            generation: 0,
            since: Nanos::ZERO,
            open_until: Nanos::ZERO,
            trips: 0,
            in_flight: 0,
            probe_successes: 0,
            consecutive_failures: 0,
            streak_started: Nanos::ZERO,
            window: ModelWindow::new(config),
            shadow: config.shadow,
            shadow_rejections: 0,
            quorum: QuorumTrack::default(),
            ramp_started: None,
            ramp_calls: 0,
        }
    }

    /// Applies one operation at `now`. `jitter_sample` in [0, 1) is the randomness used if
    /// this operation opens the breaker.
    pub fn apply(
        &mut self,
        operation: Operation,
        now: Nanos,
        config: &Config,
        jitter_sample: f64,
    ) -> Step {
        match operation {
            Operation::ForceOpen { until } => {
                self.manual(Phase::ForcedOpen, until, now, TransitionReason::ForcedOpen)
            }
            Operation::Disable { until } => {
                self.manual(Phase::Disabled, until, now, TransitionReason::Disabled)
            }
            Operation::Reset => {
                let from = self.phase;
                self.enter_closed(now, config);
                self.trips = 0;
                Step {
                    decision: Decision::Done,
                    transition: Some(self.transition(from, TransitionReason::Reset)),
                }
            }
            Operation::SetShadow { on } => {
                self.shadow = on;
                recorded(Decision::Done)
            }
            Operation::Acquire => {
                let mut step =
                    self.after_due(now, config, jitter_sample, |s| s.acquire(now, config));
                // Rule 20: everything above ran as without shadow (transitions included);
                // only the answer changes.
                if self.shadow && matches!(step.decision, Decision::Rejected { .. }) {
                    self.shadow_rejections = self.shadow_rejections.saturating_add(1);
                    step.decision = self.admit(PermitKind::Passthrough);
                }
                step
            }
            Operation::Outcome {
                generation,
                kind,
                verdict,
                latency,
                retry_hint,
                age,
                node,
            } => self.after_due(now, config, jitter_sample, |s| {
                // Rule 22: a call past its permit's deadline is a failure (`timeout`).
                let verdict = config.past_deadline(kind, verdict, latency);
                s.outcome(
                    (generation, kind, node),
                    (verdict, latency, retry_hint, now.saturating_sub(age)),
                    now,
                    config,
                    jitter_sample,
                )
            }),
            Operation::Release { generation, kind } => {
                self.after_due(now, config, jitter_sample, |s| s.release(generation, kind))
            }
        }
    }

    /// Rule 1: apply what is due at `now`, then the operation itself. An operation makes
    /// at most one transition; the due one is reported when the operation made none.
    fn after_due(
        &mut self,
        now: Nanos,
        config: &Config,
        jitter_sample: f64,
        operation: impl FnOnce(&mut ModelState) -> Step,
    ) -> Step {
        let due = self.apply_due(now, config, jitter_sample);
        let mut step = operation(self);
        if step.transition.is_none() {
            step.transition = due;
        }
        step
    }

    /// Rule 1: a timed-out half-open re-opens, an expired `disable` closes, on any
    /// state-changing operation.
    fn apply_due(&mut self, now: Nanos, config: &Config, r: f64) -> Option<Transition> {
        match self.phase {
            Phase::HalfOpen
                if now.saturating_sub(self.since)
                    >= Nanos::from_duration(config.half_open_timeout) =>
            {
                Some(self.reopen(now, config, r, TransitionReason::HalfOpenTimedOut))
            }
            Phase::Disabled if now >= self.open_until => {
                self.enter_closed(now, config);
                self.trips = 0;
                Some(self.transition(Phase::Disabled, TransitionReason::OverrideExpired))
            }
            _ => None,
        }
    }

    fn acquire(&mut self, now: Nanos, config: &Config) -> Step {
        let mut transition = None;
        if matches!(self.phase, Phase::Open | Phase::ForcedOpen) && now >= self.open_until {
            let from = self.phase;
            self.phase = Phase::HalfOpen;
            self.generation += 1;
            self.since = now;
            self.in_flight = 0;
            self.probe_successes = 0;
            self.open_until = Nanos::ZERO;
            transition = Some(self.transition(from, TransitionReason::CooldownElapsed));
        }
        let decision = match self.phase {
            Phase::Closed => {
                if self.ramp_admits(now, config) {
                    self.admit(PermitKind::Normal)
                } else {
                    // Rule 23: the only rejection in Closed; no retry_after.
                    self.reject(None)
                }
            }
            Phase::Disabled => self.admit(PermitKind::Passthrough),
            Phase::HalfOpen if self.in_flight < config.max_probes => {
                self.in_flight += 1;
                self.admit(PermitKind::Probe)
            }
            Phase::HalfOpen => {
                let deadline = self
                    .since
                    .saturating_add(Nanos::from_duration(config.half_open_timeout));
                self.reject(Some(deadline.saturating_sub(now)))
            }
            Phase::Open => self.reject(Some(self.open_until.saturating_sub(now))),
            Phase::ForcedOpen if self.open_until == Nanos::MAX => self.reject(None),
            Phase::ForcedOpen => self.reject(Some(self.open_until.saturating_sub(now))),
        };
        Step {
            decision,
            transition,
        }
    }

    fn outcome(
        &mut self,
        (generation, kind, node): (u64, PermitKind, u64),
        (verdict, latency, retry_hint, completed): (Verdict, Nanos, Option<Nanos>, Nanos),
        now: Nanos,
        config: &Config,
        r: f64,
    ) -> Step {
        if generation != self.generation {
            return recorded(Decision::Stale);
        }
        match (self.phase, kind) {
            (Phase::Closed, PermitKind::Normal) => {
                if verdict == Verdict::Ignore {
                    return recorded(Decision::Recorded);
                }
                let failed = verdict == Verdict::Failure;
                let slow = config.is_slow(latency);
                let began_streak = failed && self.consecutive_failures == 0;
                self.streak_after(failed, completed, now);
                self.window.record(failed, slow, now);
                let counts = self.window.counts(now);
                if config.has_quorum() {
                    self.quorum
                        .record(node, failed, began_streak, now, config.quorum);
                    return self.quorum_trip(counts, (failed, retry_hint), now, config, r);
                }
                match evaluate_trip(config, self.consecutive_failures, counts) {
                    Some(reason) => Step {
                        decision: Decision::Recorded,
                        transition: Some(self.trip_closed(
                            now,
                            config,
                            r,
                            retry_hint,
                            TransitionReason::Tripped(reason),
                        )),
                    },
                    None => recorded(Decision::Recorded),
                }
            }
            (Phase::HalfOpen, PermitKind::Probe) => {
                self.in_flight = self.in_flight.saturating_sub(1);
                let verdict = match verdict {
                    // Rule 5: a slow probe success is not a recovery.
                    Verdict::Success if config.is_slow(latency) => Verdict::Failure,
                    verdict => verdict,
                };
                match verdict {
                    Verdict::Ignore => recorded(Decision::Recorded),
                    Verdict::Failure => Step {
                        decision: Decision::Recorded,
                        transition: Some(self.reopen_hinted(
                            now,
                            config,
                            r,
                            retry_hint,
                            TransitionReason::ProbeFailed,
                        )),
                    },
                    Verdict::Success => {
                        self.probe_successes += 1;
                        if self.probe_successes < config.required_successes {
                            return recorded(Decision::Recorded);
                        }
                        self.enter_closed(now, config);
                        // Rule 23: a ramp begins; `trips` is kept until it ends.
                        self.begin_ramp(now, config);
                        Step {
                            decision: Decision::Recorded,
                            transition: Some(
                                self.transition(Phase::HalfOpen, TransitionReason::ProbesSucceeded),
                            ),
                        }
                    }
                }
            }
            // Disabled passthrough permits, or a kind that does not fit the phase: nothing.
            _ => recorded(Decision::Recorded),
        }
    }

    fn release(&mut self, generation: u64, kind: PermitKind) -> Step {
        if generation != self.generation {
            return recorded(Decision::Stale);
        }
        if self.phase == Phase::HalfOpen && kind == PermitKind::Probe {
            self.in_flight = self.in_flight.saturating_sub(1);
        }
        recorded(Decision::Recorded)
    }

    fn manual(
        &mut self,
        to: Phase,
        until: Option<Nanos>,
        now: Nanos,
        reason: TransitionReason,
    ) -> Step {
        let until = until.unwrap_or(Nanos::MAX);
        if self.phase == to {
            self.open_until = until;
            return recorded(Decision::Done);
        }
        let from = self.phase;
        self.phase = to;
        self.generation += 1;
        self.since = now;
        self.open_until = until;
        self.in_flight = 0;
        self.probe_successes = 0;
        self.end_ramp();
        Step {
            decision: Decision::Done,
            transition: Some(self.transition(from, reason)),
        }
    }

    /// Rule 9: every re-open counts as a trip and sets a new cool-down.
    fn reopen(
        &mut self,
        now: Nanos,
        config: &Config,
        r: f64,
        reason: TransitionReason,
    ) -> Transition {
        self.reopen_hinted(now, config, r, None, reason)
    }

    /// A re-open whose cool-down lasts at least what the dependency asked for
    /// ([`Config::open_duration_with_hint`]).
    fn reopen_hinted(
        &mut self,
        now: Nanos,
        config: &Config,
        r: f64,
        retry_hint: Option<Nanos>,
        reason: TransitionReason,
    ) -> Transition {
        let from = self.phase;
        self.trips = self.trips.saturating_add(1);
        self.phase = Phase::Open;
        self.generation += 1;
        self.since = now;
        self.open_until =
            now.saturating_add(config.open_duration_with_hint(self.trips, r, retry_hint));
        self.in_flight = 0;
        self.probe_successes = 0;
        self.end_ramp();
        self.transition(from, reason)
    }

    /// Rule 19: a failure extends the run (which began at its earliest completion); a
    /// success ends it unless it completed before the run began (an outcome that waited
    /// in a batch while other callers' failures arrived), while that start is not in the
    /// future (time stepped back: then any success ends it).
    fn streak_after(&mut self, failed: bool, completed: Nanos, now: Nanos) {
        if failed {
            self.streak_started = if self.consecutive_failures == 0 {
                completed
            } else {
                self.streak_started.min(completed)
            };
            self.consecutive_failures += 1;
        } else if !(self.consecutive_failures > 0
            && completed < self.streak_started
            && self.streak_started <= now)
        {
            self.consecutive_failures = 0;
            self.streak_started = Nanos::ZERO;
        }
    }

    fn enter_closed(&mut self, now: Nanos, config: &Config) {
        self.phase = Phase::Closed;
        self.generation += 1;
        self.since = now;
        self.open_until = Nanos::ZERO;
        self.in_flight = 0;
        self.probe_successes = 0;
        self.consecutive_failures = 0;
        self.streak_started = Nanos::ZERO;
        self.window = ModelWindow::new(config);
        self.quorum = QuorumTrack::default();
        self.end_ramp();
    }

    fn admit(&self, kind: PermitKind) -> Decision {
        Decision::Admitted {
            generation: self.generation,
            kind,
        }
    }

    fn reject(&self, retry_after: Option<Nanos>) -> Decision {
        Decision::Rejected {
            phase: self.phase,
            retry_after,
        }
    }

    fn transition(&self, from: Phase, reason: TransitionReason) -> Transition {
        Transition {
            from,
            to: self.phase,
            generation: self.generation,
            reason,
        }
    }

    /// Rule 10 as a snapshot reports it (changes nothing): the retry-after an acquire would
    /// see now if it were rejected.
    pub fn retry_after(&self, now: Nanos, config: &Config) -> Option<Nanos> {
        match self.phase {
            Phase::Open => Some(self.open_until.saturating_sub(now)),
            Phase::HalfOpen => Some(
                self.since
                    .saturating_add(Nanos::from_duration(config.half_open_timeout))
                    .saturating_sub(now),
            ),
            Phase::ForcedOpen if self.open_until != Nanos::MAX => {
                Some(self.open_until.saturating_sub(now))
            }
            _ => None,
        }
    }
}

fn recorded(decision: Decision) -> Step {
    Step {
        decision,
        transition: None,
    }
}
