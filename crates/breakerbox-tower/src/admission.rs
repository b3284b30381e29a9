//! Taking a permit for one call, and recording its verdict.

use std::time::Duration;

use breakerbox::{Clock, Nanos, OwnedPermit, Verdict};

use crate::error::Refusal;
use crate::select::Select;

/// What the service's last `poll_ready` decided.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Readiness {
    /// `poll_ready` has not answered ready since the last call.
    NotPolled,
    /// The gate breaker was rejecting: ready without polling the inner service.
    Open,
    /// The inner service is ready.
    Inner,
}

/// An admitted call: its permit (released if dropped unrecorded) and, when the judge looks
/// at latency, the clock and the start reading.
pub(crate) struct Admission<C: Clock> {
    permit: OwnedPermit<C>,
    timer: Option<(C, Nanos)>,
}

impl<C: Clock + Clone> Admission<C> {
    /// Asks the request's breaker for a permit. `readiness` is what `poll_ready` decided:
    /// a permit granted after a ready-because-open answer (the open phase ended in
    /// between) is released at once, since the inner service was not polled ready, and the
    /// call is refused with a zero `retry_after`.
    #[inline]
    pub(crate) fn admit<Req, S>(
        select: &S,
        request: &Req,
        readiness: Readiness,
        timed: bool,
    ) -> Result<Self, Refusal>
    where
        S: Select<Req, Clock = C>,
    {
        let breaker = select.select(request)?;
        let permit = breaker.try_acquire_owned()?;
        if readiness == Readiness::Open {
            drop(permit);
            return Err(Refusal::Open(breakerbox::CircuitOpen::new(
                breaker.phase(),
                Some(Duration::ZERO),
            )));
        }
        let timer = if timed {
            let clock = breaker.clock().clone();
            let started = clock.now();
            Some((clock, started))
        } else {
            None
        };
        Ok(Admission { permit, timer })
    }

    /// Whether the call is a half-open probe.
    pub(crate) fn is_probe(&self) -> bool {
        self.permit.is_probe()
    }

    /// The time since admission through the breaker's clock (zero when untimed).
    pub(crate) fn latency(&self) -> Duration {
        match &self.timer {
            Some((clock, started)) => clock.now().saturating_sub(*started).as_duration(),
            None => Duration::ZERO,
        }
    }

    /// Records `verdict`. A timed call records `latency`; an untimed one lets the permit
    /// measure its own latency when the breaker has a slow-call rule.
    pub(crate) fn record(self, verdict: Verdict, latency: Duration) {
        if self.timer.is_some() {
            self.permit.record_with_latency(verdict, latency);
        } else {
            self.permit.record(verdict);
        }
    }

    /// Records `verdict` with the dependency's retry hint (a judged `Retry-After`), which
    /// sets how long the breaker stays open if this outcome opens it.
    pub(crate) fn record_hinted(
        self,
        verdict: Verdict,
        latency: Duration,
        retry_hint: Option<Duration>,
    ) {
        match retry_hint {
            Some(_) => self
                .permit
                .record_with_retry_hint(verdict, latency, retry_hint),
            None => self.record(verdict, latency),
        }
    }
}

/// Whether `breaker` would reject a call right now, without changing it: open (or forced
/// open) with time left.
#[inline]
pub(crate) fn rejecting<C: Clock>(breaker: &breakerbox::CircuitBreaker<C>) -> bool {
    use breakerbox::Phase;
    match breaker.check() {
        Err(open) => matches!(open.phase(), Phase::Open | Phase::ForcedOpen),
        Ok(()) => false,
    }
}
