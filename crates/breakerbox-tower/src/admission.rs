//! Taking a permit for one call, and recording its verdict.

use std::pin::Pin;
use std::time::Duration;

use breakerbox::contract::{Breaker, BreakerPermit, LocalAdmission};
use breakerbox::{Clock, Stamp, Verdict};

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
/// at latency, the breaker's clock and the start reading.
pub(crate) struct Admission<B: Breaker> {
    permit: B::OwnedPermit,
    timer: Option<(B::Clock, Stamp)>,
}

/// What a call's breaker answered without a round trip.
pub(crate) enum Admit<B: Breaker> {
    /// Admitted: call the inner service now.
    Now(Admission<B>),
    /// Refused: the inner service is not touched.
    Refused(Refusal),
    /// Only the engine's store can answer (a Redis half-open probe, strict mode): the
    /// call waits for [`Breaker::acquire`], then calls the inner service.
    Later(Pending<B>),
}

/// An acquire waiting on the engine's store.
pub(crate) struct Pending<B: Breaker> {
    pub(crate) acquire: Pin<Box<B::Acquire>>,
    clock: B::Clock,
    timed: bool,
}

impl<B: Breaker> Pending<B> {
    /// The admission, once the store admitted the call.
    pub(crate) fn admitted(&self, permit: B::OwnedPermit) -> Admission<B> {
        Admission::new(permit, &self.clock, self.timed)
    }
}

impl<B: Breaker> Admission<B> {
    /// Asks the request's breaker for a permit. `readiness` is what `poll_ready` decided:
    /// a call after a ready-because-open answer (the open phase ended in between) is
    /// refused with a zero `retry_after` (a permit granted meanwhile is released at
    /// once), since the inner service was not polled ready.
    #[inline(always)]
    pub(crate) fn admit<Req, S>(
        select: &S,
        request: &Req,
        readiness: Readiness,
        timed: bool,
    ) -> Admit<B>
    where
        S: Select<Req, Breaker = B>,
    {
        let breaker = match select.select(request) {
            Ok(breaker) => breaker,
            Err(full) => return Admit::Refused(full.into()),
        };
        let not_polled = || {
            Refusal::Open(breakerbox::CircuitOpen::new(
                breaker.phase(),
                Some(Duration::ZERO),
            ))
        };
        match breaker.try_acquire_local_owned() {
            LocalAdmission::Admitted(permit) => {
                if readiness == Readiness::Open {
                    drop(permit);
                    return Admit::Refused(not_polled());
                }
                Admit::Now(Admission::new(permit, breaker.clock(), timed))
            }
            LocalAdmission::Rejected(open) => Admit::Refused(open.into()),
            LocalAdmission::Remote if readiness == Readiness::Open => Admit::Refused(not_polled()),
            LocalAdmission::Remote => Admit::Later(Pending {
                acquire: Box::pin(breaker.acquire()),
                clock: breaker.clock().clone(),
                timed,
            }),
        }
    }

    #[inline(always)]
    fn new(permit: B::OwnedPermit, clock: &B::Clock, timed: bool) -> Self {
        let timer = if timed {
            let clock = clock.clone();
            let started = clock.stamp();
            Some((clock, started))
        } else {
            None
        };
        Admission { permit, timer }
    }

    /// Whether the call is a half-open probe.
    pub(crate) fn is_probe(&self) -> bool {
        self.permit.is_probe()
    }

    /// The call's permit.
    #[cfg(feature = "tokio")]
    pub(crate) fn permit(&self) -> &B::OwnedPermit {
        &self.permit
    }

    /// The time since admission through the breaker's clock (zero when untimed).
    #[inline(always)]
    pub(crate) fn latency(&self) -> Duration {
        match &self.timer {
            Some((clock, started)) => clock.elapsed_since(*started).as_duration(),
            None => Duration::ZERO,
        }
    }

    /// Records `verdict`. A timed call records `latency`; an untimed one lets the permit
    /// measure its own latency when the breaker has a slow-call rule. The record is
    /// committed at once (an engine that must send it does so on its own).
    #[inline(always)]
    pub(crate) fn record(self, verdict: Verdict, latency: Duration) {
        if self.timer.is_some() {
            drop(self.permit.record_with_latency(verdict, latency));
        } else {
            drop(self.permit.record(verdict));
        }
    }

    /// Records `verdict` as [`Admission::record`] does, where the admission lies (a
    /// future that holds it records without moving it out: moving it just after it was
    /// stored stalls on store forwarding). Spent afterwards: dropping it releases nothing.
    #[inline(always)]
    pub(crate) fn record_in_place(&mut self, verdict: Verdict, latency: Duration) {
        let latency = self.timer.is_some().then_some(latency);
        drop(self.permit.record_in_place(verdict, latency, None));
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
            Some(_) => drop(
                self.permit
                    .record_with_retry_hint(verdict, latency, retry_hint),
            ),
            None => self.record(verdict, latency),
        }
    }
}

/// Whether `breaker` would reject a call right now, without changing it: open (or forced
/// open) with time left.
#[inline]
pub(crate) fn rejecting<B: Breaker>(breaker: &B) -> bool {
    use breakerbox::Phase;
    match breaker.check() {
        Err(open) => matches!(open.phase(), Phase::Open | Phase::ForcedOpen),
        Ok(()) => false,
    }
}
