//! The in-memory engine behind the engine-generic scenarios: `CircuitBreaker` on a
//! `ManualClock`, its events recorded by a listener.

use std::time::Duration;

use breakerbox::model::PermitKind;
use breakerbox::{
    CallError, CircuitBreaker, CircuitOpen, ConfigBuilder, EventKind, ManualClock, Permit, Phase,
    Snapshot, Verdict,
};

use super::engine::{Jitter, ScenarioEngine, ScenarioPermit};
use super::support::Recorder;

/// A scenario's breaker on `clock`, with a recorder listening (and `jitter` if given).
pub(crate) fn breaker(
    config: ConfigBuilder,
    clock: &ManualClock,
    jitter: Option<Jitter>,
) -> (CircuitBreaker<ManualClock>, Recorder) {
    let recorder = Recorder::default();
    let mut builder = CircuitBreaker::builder()
        .clock(clock.clone())
        .config(config.build().expect("a valid scenario config"))
        .listener(recorder.listener());
    if let Some(jitter) = jitter {
        builder = builder.jitter_source(move || jitter());
    }
    let breaker = builder.build().expect("a valid scenario config");
    (breaker, recorder)
}

/// `CircuitBreaker<ManualClock>` with a recorder listening.
pub(crate) struct InMemory {
    breaker: CircuitBreaker<ManualClock>,
    recorder: Recorder,
}

impl ScenarioEngine for InMemory {
    type Permit<'a> = Permit<'a, ManualClock>;

    fn build(config: ConfigBuilder, clock: &ManualClock, jitter: Option<Jitter>) -> Self {
        let (breaker, recorder) = breaker(config, clock, jitter);
        InMemory { breaker, recorder }
    }

    fn try_acquire(&self) -> Result<Self::Permit<'_>, CircuitOpen> {
        self.breaker.try_acquire()
    }

    fn call<T, E>(&self, f: impl FnOnce() -> Result<T, E>) -> Result<T, CallError<E>> {
        self.breaker.call(f)
    }

    fn snapshot(&self) -> Snapshot {
        self.breaker.snapshot()
    }

    fn phase(&self) -> Phase {
        self.breaker.phase()
    }

    fn force_open(&self) {
        self.breaker.force_open()
    }

    fn force_open_for(&self, duration: Duration) {
        self.breaker.force_open_for(duration)
    }

    fn disable(&self) {
        self.breaker.disable()
    }

    fn disable_for(&self, duration: Duration) {
        self.breaker.disable_for(duration)
    }

    fn reset(&self) {
        self.breaker.reset()
    }

    fn set_shadow(&self, on: bool) {
        self.breaker.set_shadow(on)
    }

    fn take_events(&self) -> Vec<EventKind> {
        self.recorder.take()
    }
}

impl ScenarioPermit for Permit<'_, ManualClock> {
    fn generation(&self) -> u64 {
        Permit::generation(self)
    }

    fn kind(&self) -> PermitKind {
        Permit::kind(self)
    }

    fn record(self, verdict: Verdict) {
        Permit::record(self, verdict)
    }

    fn record_with_latency(self, verdict: Verdict, latency: Duration) {
        Permit::record_with_latency(self, verdict, latency)
    }
}
