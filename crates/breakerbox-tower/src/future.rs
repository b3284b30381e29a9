//! The response future of the generic form.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use breakerbox::contract::Breaker;
use breakerbox::Judge;
use pin_project_lite::pin_project;

use crate::admission::Admission;
use crate::error::{BoxError, Refusal};
use crate::gate::Admitted;
use crate::judging::Outcome;

pin_project! {
    /// The future of a [`CircuitBreakerService`](crate::CircuitBreakerService) call judged by
    /// a [`Judge`]: either a refusal, ready at once, or the inner service's future carrying
    /// the call's permit. Dropping it before it completes releases the permit.
    pub struct ResponseFuture<F, J, C: Breaker> {
        #[pin]
        state: State<F, J, C>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, J, C: Breaker> {
        Refused { refusal: Refusal },
        Admitted {
            #[pin]
            future: F,
            judged: Option<(Admission<C>, J)>,
        },
    }
}

impl<F, J, C: Breaker> Admitted<F, C, Outcome<J>> for ResponseFuture<F, J, C> {
    fn admitted(future: F, admission: Admission<C>, judge: Outcome<J>) -> Self {
        ResponseFuture {
            state: State::Admitted {
                future,
                judged: Some((admission, judge.0)),
            },
        }
    }

    fn refused(refusal: Refusal) -> Self {
        ResponseFuture {
            state: State::Refused { refusal },
        }
    }
}

impl<F, T, E, J, C> Future for ResponseFuture<F, J, C>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
    J: Judge<T, E>,
    C: Breaker,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Refused { refusal } => Poll::Ready(Err(refusal.boxed())),
            StateProj::Admitted { future, judged } => {
                let outcome = ready!(future.poll(cx));
                if let Some((admission, judge)) = judged.take() {
                    let latency = admission.latency();
                    let verdict = judge.judge(&outcome, latency);
                    admission.record(verdict, latency);
                }
                Poll::Ready(outcome.map_err(Into::into))
            }
        }
    }
}

impl<F, J, C: Breaker> fmt::Debug for ResponseFuture<F, J, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Refused { .. } => "refused",
            State::Admitted {
                judged: Some(_), ..
            } => "admitted",
            State::Admitted { judged: None, .. } => "complete",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish()
    }
}
