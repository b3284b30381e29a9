//! Waiting for an engine's store to admit a call before the inner service is called.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use breakerbox::contract::Breaker;
use breakerbox::{CircuitOpen, Phase};
use pin_project_lite::pin_project;
use tower_service::Service;

use crate::admission::{Admission, Pending};
use crate::error::Refusal;

/// A response future that a mode (the generic form, the HTTP form) starts once a call is
/// admitted, or that answers a refusal.
pub(crate) trait Admitted<F, B: Breaker, M>: Sized {
    /// The inner service's `future`, judged by `mode`, its outcome recorded through
    /// `admission`'s permit.
    fn admitted(future: F, admission: Admission<B>, mode: M) -> Self;

    /// A call refused without touching the inner service.
    fn refused(refusal: Refusal) -> Self;
}

/// How a waiting call starts its mode's future once the store answered.
struct Start<S, Req, B: Breaker, M, Fut> {
    admitted: fn(&mut S, Req, Admission<B>, M) -> Fut,
    refused: fn(Refusal) -> Fut,
}

/// Calls `service` with `request` and starts the mode's future around it.
fn call_admitted<S, Req, B, M, Fut>(
    service: &mut S,
    request: Req,
    admission: Admission<B>,
    mode: M,
) -> Fut
where
    S: Service<Req>,
    B: Breaker,
    Fut: Admitted<S::Future, B, M>,
{
    Fut::admitted(service.call(request), admission, mode)
}

pin_project! {
    /// The future of a [`CircuitBreakerService`](crate::CircuitBreakerService) call. Most
    /// calls are admitted or refused at once and this is the mode's future
    /// ([`ResponseFuture`](crate::ResponseFuture),
    /// [`HttpResponseFuture`](crate::HttpResponseFuture)). When only the engine's store
    /// can admit the call (a Redis half-open probe, strict mode), it first waits for that
    /// answer, holding the request and a ready clone of the inner service, and calls the
    /// inner service once admitted. Dropping it releases whatever it holds.
    pub struct GatedFuture<S, Req, B: Breaker, M, Fut> {
        #[pin]
        state: Gate<S, Req, B, M, Fut>,
    }
}

pin_project! {
    #[project = GateProj]
    enum Gate<S, Req, B: Breaker, M, Fut> {
        Running {
            #[pin]
            future: Fut,
        },
        Waiting {
            pending: Pending<B>,
            call: Option<(S, Req, M)>,
            start: Start<S, Req, B, M, Fut>,
        },
    }
}

impl<S, Req, B: Breaker, M, Fut> GatedFuture<S, Req, B, M, Fut> {
    /// A call answered at once.
    #[inline(always)]
    pub(crate) fn now(future: Fut) -> Self {
        GatedFuture {
            state: Gate::Running { future },
        }
    }

    /// A call that waits for `pending`, then calls `service` (polled ready) with
    /// `request`, judged by `mode`.
    pub(crate) fn waiting(pending: Pending<B>, service: S, request: Req, mode: M) -> Self
    where
        S: Service<Req>,
        Fut: Admitted<S::Future, B, M>,
    {
        GatedFuture {
            state: Gate::Waiting {
                pending,
                call: Some((service, request, mode)),
                start: Start {
                    admitted: call_admitted::<S, Req, B, M, Fut>,
                    refused: Fut::refused,
                },
            },
        }
    }
}

impl<S, Req, B, M, Fut> Future for GatedFuture<S, Req, B, M, Fut>
where
    S: Service<Req>,
    B: Breaker,
    Fut: Future,
{
    type Output = Fut::Output;

    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                GateProj::Running { future } => return future.poll(cx),
                GateProj::Waiting {
                    pending,
                    call,
                    start,
                } => {
                    let answer = ready!(pending.acquire.as_mut().poll(cx));
                    let next = match (answer, call.take()) {
                        (Ok(permit), Some((mut service, request, mode))) => {
                            let admission = pending.admitted(permit);
                            (start.admitted)(&mut service, request, admission, mode)
                        }
                        (Err(open), _) => (start.refused)(Refusal::Open(open)),
                        // Not reachable: the call is taken only here, once.
                        (Ok(_), None) => (start.refused)(Refusal::Open(CircuitOpen::new(
                            Phase::Closed,
                            Some(Duration::ZERO),
                        ))),
                    };
                    state.set(Gate::Running { future: next });
                }
            }
        }
    }
}

impl<S, Req, B: Breaker, M, Fut: fmt::Debug> fmt::Debug for GatedFuture<S, Req, B, M, Fut> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.state {
            Gate::Running { future } => future.fmt(f),
            Gate::Waiting { .. } => f.write_str("GatedFuture(waiting for admission)"),
        }
    }
}
