//! The in-memory engine driven only through the breaker contract
//! (`breakerbox::contract::{Breaker, BreakerPermit}`): what the tower layer, the reqwest
//! middleware, the registry and the CLI see. Every future of the in-memory engine is
//! ready at once, so each is polled once.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use breakerbox::contract::{Breaker, BreakerPermit};
use breakerbox::model::PermitKind;
use breakerbox::{
    CallError, CircuitBreaker, CircuitOpen, Clock, ConfigBuilder, EventKind, ManualClock,
    OwnedPermit, Phase, Snapshot, Verdict,
};

use super::engine::{Jitter, ScenarioEngine, ScenarioPermit};
use super::support::Recorder;

/// A `CircuitBreaker<ManualClock>` seen only as a [`Breaker`].
pub(crate) struct ThroughContract {
    breaker: CircuitBreaker<ManualClock>,
    recorder: Recorder,
}

/// The output of a future the in-memory engine answers at once.
fn now<F: Future>(future: F) -> F::Output {
    let mut cx = Context::from_waker(Waker::noop());
    match pin!(future).poll(&mut cx) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the in-memory engine answers at once"),
    }
}

impl ScenarioEngine for ThroughContract {
    type Permit<'a> = OwnedPermit<ManualClock>;

    fn build(config: ConfigBuilder, clock: &ManualClock, jitter: Option<Jitter>) -> Self {
        let (breaker, recorder) = super::in_memory::breaker(config, clock, jitter);
        ThroughContract { breaker, recorder }
    }

    fn try_acquire(&self) -> Result<Self::Permit<'_>, CircuitOpen> {
        now(Breaker::acquire_now_or_later(&self.breaker))
    }

    fn call<T, E>(&self, f: impl FnOnce() -> Result<T, E>) -> Result<T, CallError<E>> {
        let permit = self.try_acquire().map_err(CallError::Open)?;
        let clock = Breaker::clock(&self.breaker);
        let started = clock.now();
        let result = f();
        let latency = clock.now().saturating_sub(started).as_duration();
        let verdict = if result.is_ok() {
            Verdict::Success
        } else {
            Verdict::Failure
        };
        now(BreakerPermit::record_with_latency(permit, verdict, latency));
        result.map_err(CallError::Inner)
    }

    fn snapshot(&self) -> Snapshot {
        match now(Breaker::snapshot(&self.breaker)) {
            Ok(snapshot) => snapshot,
            Err(never) => match never {},
        }
    }

    fn phase(&self) -> Phase {
        Breaker::phase(&self.breaker)
    }

    fn force_open(&self) {
        let _ = now(Breaker::force_open(&self.breaker));
    }

    fn force_open_for(&self, duration: Duration) {
        let _ = now(Breaker::force_open_for(&self.breaker, duration));
    }

    fn disable(&self) {
        let _ = now(Breaker::disable(&self.breaker));
    }

    fn disable_for(&self, duration: Duration) {
        let _ = now(Breaker::disable_for(&self.breaker, duration));
    }

    fn reset(&self) {
        let _ = now(Breaker::reset(&self.breaker));
    }

    fn set_shadow(&self, on: bool) {
        let _ = now(Breaker::set_shadow(&self.breaker, on));
    }

    fn take_events(&self) -> Vec<EventKind> {
        self.recorder.take()
    }
}

impl ScenarioPermit for OwnedPermit<ManualClock> {
    fn generation(&self) -> u64 {
        BreakerPermit::generation(self)
    }

    fn kind(&self) -> PermitKind {
        BreakerPermit::kind(self)
    }

    fn record(self, verdict: Verdict) {
        now(BreakerPermit::record(self, verdict))
    }

    fn record_with_latency(self, verdict: Verdict, latency: Duration) {
        now(BreakerPermit::record_with_latency(self, verdict, latency))
    }
}
