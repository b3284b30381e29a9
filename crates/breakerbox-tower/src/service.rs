//! The middleware service.

use std::fmt;
use std::task::{Context, Poll};

use breakerbox::contract::Breaker;
use breakerbox::{DefaultJudge, Judge};
use tower_service::Service;

use crate::admission::{rejecting, Admission, Admit, Readiness};
use crate::error::BoxError;
use crate::future::ResponseFuture;
use crate::gate::{Admitted, GatedFuture};
use crate::judging::Outcome;
use crate::select::{Select, Single};

/// A service guarded by a circuit breaker. Built by [`CircuitBreakerLayer`]
/// (or [`CircuitBreakerService::new`] for one breaker and the default judge).
///
/// - **Readiness.** While the breaker (the single one, in the non-keyed form) is open with
///   time left, `poll_ready` answers `Ready(Ok(()))` without polling the inner service: an
///   error from `poll_ready` would be final for tower, and waiting would stall the caller
///   while nothing can be done. Otherwise `poll_ready` is the inner service's.
/// - **Calls.** `call` asks the request's breaker for a permit. Refused, the returned
///   future fails at once with a boxed [`CircuitOpen`](breakerbox::CircuitOpen) (carrying
///   `retry_after`) and the inner service is not touched. Admitted, the permit travels
///   with the response future; the outcome is judged when the future completes, and a
///   future dropped before that releases the permit (freeing a half-open probe slot).
/// - **Errors** are [`BoxError`]: the inner service's errors boxed, or the middleware's
///   own ([`CircuitOpen`](breakerbox::CircuitOpen), [`RegistryFull`](breakerbox::RegistryFull)).
///
/// If the open phase ends between a ready-because-open `poll_ready` and the `call`, the
/// call is still refused (with `retry_after` zero), since the inner service was never
/// polled ready; the next `poll_ready` polls it.
///
/// [`CircuitBreakerLayer`]: crate::CircuitBreakerLayer
pub struct CircuitBreakerService<S, Sel, M> {
    pub(crate) inner: S,
    pub(crate) select: Sel,
    pub(crate) mode: M,
    pub(crate) readiness: Readiness,
}

impl<S, B: Breaker> CircuitBreakerService<S, Single<B>, Outcome<DefaultJudge>> {
    /// Guards `inner` with `breaker` (any engine); `Ok` is a success and `Err` a failure.
    pub fn new(inner: S, breaker: B) -> Self {
        CircuitBreakerService::from_parts(inner, Single::new(breaker), Outcome(DefaultJudge))
    }
}

impl<S, Sel, M> CircuitBreakerService<S, Sel, M> {
    pub(crate) fn from_parts(inner: S, select: Sel, mode: M) -> Self {
        CircuitBreakerService {
            inner,
            select,
            mode,
            readiness: Readiness::NotPolled,
        }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// How breakers are selected.
    pub fn selector(&self) -> &Sel {
        &self.select
    }

    /// Readiness for tower: `Ready(Ok)` without touching the inner service while the gate
    /// breaker rejects, the inner service's readiness otherwise.
    #[inline]
    pub(crate) fn poll_ready_with<Req>(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), BoxError>>
    where
        S: Service<Req>,
        S::Error: Into<BoxError>,
        Sel: Select<Req>,
    {
        if let Some(breaker) = self.select.gate() {
            if rejecting(breaker) {
                self.readiness = Readiness::Open;
                return Poll::Ready(Ok(()));
            }
        }
        match self.inner.poll_ready(cx) {
            Poll::Ready(Ok(())) => {
                self.readiness = Readiness::Inner;
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error.into())),
            Poll::Pending => Poll::Pending,
        }
    }

    /// The readiness `poll_ready` left for this call, reset for the next one.
    #[inline]
    pub(crate) fn take_readiness(&mut self) -> Readiness {
        std::mem::replace(&mut self.readiness, Readiness::NotPolled)
    }

    /// Admits `request` and starts the mode's future `Fut`: at once when the breaker
    /// answers locally, or after the engine's store admitted it. Waiting, the future holds
    /// the inner service polled ready (a clone takes its place here, to be polled ready
    /// for the next call), as tower middlewares with an async step before the inner call
    /// do.
    #[inline(always)]
    pub(crate) fn admit_and_call<Req, Fut>(
        &mut self,
        request: Req,
        timed: bool,
    ) -> GatedFuture<S, Req, Sel::Breaker, M, Fut>
    where
        S: Service<Req> + Clone,
        Sel: Select<Req>,
        M: Clone,
        Fut: Admitted<S::Future, Sel::Breaker, M>,
    {
        let readiness = self.take_readiness();
        match Admission::admit(&self.select, &request, readiness, timed) {
            Admit::Now(admission) => GatedFuture::now(Fut::admitted(
                self.inner.call(request),
                admission,
                self.mode.clone(),
            )),
            Admit::Refused(refusal) => GatedFuture::now(Fut::refused(refusal)),
            Admit::Later(pending) => {
                let fresh = self.inner.clone();
                let ready = std::mem::replace(&mut self.inner, fresh);
                GatedFuture::waiting(pending, ready, request, self.mode.clone())
            }
        }
    }
}

impl<S, Req, Sel, J> Service<Req> for CircuitBreakerService<S, Sel, Outcome<J>>
where
    S: Service<Req> + Clone,
    S::Error: Into<BoxError>,
    Sel: Select<Req>,
    J: Judge<S::Response, S::Error> + Clone,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future =
        GatedFuture<S, Req, Sel::Breaker, Outcome<J>, ResponseFuture<S::Future, J, Sel::Breaker>>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.poll_ready_with::<Req>(cx)
    }

    #[inline(always)]
    fn call(&mut self, request: Req) -> Self::Future {
        let timed = self.mode.0.uses_latency();
        self.admit_and_call(request, timed)
    }
}

impl<S: Clone, Sel: Clone, M: Clone> Clone for CircuitBreakerService<S, Sel, M> {
    /// A clone shares the breakers; like every tower service clone, it is not ready until
    /// polled.
    fn clone(&self) -> Self {
        CircuitBreakerService::from_parts(
            self.inner.clone(),
            self.select.clone(),
            self.mode.clone(),
        )
    }
}

impl<S: fmt::Debug, Sel: fmt::Debug, M: fmt::Debug> fmt::Debug
    for CircuitBreakerService<S, Sel, M>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreakerService")
            .field("inner", &self.inner)
            .field("select", &self.select)
            .field("mode", &self.mode)
            .finish()
    }
}
