//! What a scenario needs from an engine, so one scenario suite runs unchanged against the
//! in-memory `CircuitBreaker` (this crate) and the Redis engine (`breakerbox-redis`, which
//! includes this file and `shared/*.rs` by path).
//!
//! Every operation is synchronous: an async engine blocks on its own runtime. Time is a
//! `ManualClock` that starts at zero and drives the engine's decisions.

#![allow(dead_code)] // each includer uses a different part of it

use std::sync::Arc;
use std::time::Duration;

use breakerbox::model::{PermitKind, WindowCounts};
use breakerbox::{
    CallError, CircuitOpen, Config, ConfigBuilder, EventKind, ManualClock, Phase, Snapshot, Verdict,
};

/// Injected randomness for jitter.
pub(crate) type Jitter = Arc<dyn Fn() -> f64 + Send + Sync>;

/// One breaker, driven by a scenario.
pub(crate) trait ScenarioEngine: Sized {
    /// Jitter samples the engine may draw before it knows whether an operation opens the
    /// breaker (and keeps for the next one when it does not): 0 where the engine draws at
    /// the re-open itself, 1 where a script decides and needs its sample up front.
    const SAMPLES_DRAWN_AHEAD: usize = 0;

    /// The right to make one call.
    type Permit<'a>: ScenarioPermit
    where
        Self: 'a;

    /// A breaker with `config`, its time from `clock`, its jitter from `jitter` if given.
    /// It records its events for [`ScenarioEngine::take_events`].
    fn build(config: ConfigBuilder, clock: &ManualClock, jitter: Option<Jitter>) -> Self;
    /// Asks to make one call.
    fn try_acquire(&self) -> Result<Self::Permit<'_>, CircuitOpen>;
    /// Runs `f` if admitted; `Ok` is a success and `Err` a failure, the latency measured
    /// through the breaker's clock.
    fn call<T, E>(&self, f: impl FnOnce() -> Result<T, E>) -> Result<T, CallError<E>>;
    /// The state (changes nothing).
    fn snapshot(&self) -> Snapshot;
    /// The stored phase (changes nothing).
    fn phase(&self) -> Phase;
    /// Opens until reset.
    fn force_open(&self);
    /// Opens for `duration`, then probes.
    fn force_open_for(&self, duration: Duration);
    /// Admits everything and records nothing until reset.
    fn disable(&self);
    /// Admits everything and records nothing for `duration`.
    fn disable_for(&self, duration: Duration);
    /// Back to a fresh closed phase.
    fn reset(&self);
    /// Switches shadow mode (rule 20).
    fn set_shadow(&self, on: bool);
    /// The events seen since the last call: transitions, rejections and stale results.
    fn take_events(&self) -> Vec<EventKind>;
}

/// A permit of a [`ScenarioEngine`]. Dropping it unrecorded releases it; an engine's drop
/// returns once the release has taken effect.
pub(crate) trait ScenarioPermit: Sized + std::fmt::Debug {
    /// The generation the permit was issued in.
    fn generation(&self) -> u64;
    /// What the permit is for.
    fn kind(&self) -> PermitKind;
    /// Whether this is a half-open probe.
    fn is_probe(&self) -> bool {
        self.kind() == PermitKind::Probe
    }
    /// Records `verdict`, the latency measured since the acquire.
    fn record(self, verdict: Verdict);
    /// Records `verdict` for a call that took `latency`.
    fn record_with_latency(self, verdict: Verdict, latency: Duration);
    /// Records a success.
    fn success(self) {
        self.record(Verdict::Success)
    }
    /// Records a failure.
    fn failure(self) {
        self.record(Verdict::Failure)
    }
    /// Records a call that says nothing about the dependency.
    fn ignore(self) {
        self.record(Verdict::Ignore)
    }
}

/// An engine with `config` on a fresh manual clock, returned with that clock.
pub(crate) fn start<E: ScenarioEngine>(config: ConfigBuilder) -> (ManualClock, E) {
    let clock = ManualClock::new();
    let engine = E::build(config, &clock, None);
    (clock, engine)
}

/// A config that opens on its first failure: 10 s open, 30 s to confirm recovery.
pub(crate) fn one_failure_trips() -> ConfigBuilder {
    Config::builder()
        .consecutive_failures(1)
        .recovery_timeout(Duration::from_secs(10))
        .half_open_timeout(Duration::from_secs(30))
}

/// Records one failure and checks that it opened the breaker.
pub(crate) fn trip<E: ScenarioEngine>(breaker: &E) {
    breaker.try_acquire().expect("closed admits").failure();
    assert_eq!(breaker.phase(), Phase::Open, "one failure trips");
}

/// Window counts, briefly.
pub(crate) fn counts(calls: u64, failures: u64, slow: u64) -> WindowCounts {
    WindowCounts {
        calls,
        failures,
        slow,
    }
}

/// The phase changes among `events`.
pub(crate) fn transitions(events: Vec<EventKind>) -> Vec<(Phase, Phase)> {
    events
        .into_iter()
        .filter_map(|kind| match kind {
            EventKind::Transition(t) => Some((t.from, t.to)),
            _ => None,
        })
        .collect()
}
