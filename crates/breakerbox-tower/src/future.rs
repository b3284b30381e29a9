//! The response future of the generic form.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use breakerbox::contract::Breaker;
use breakerbox::{DeadlineElapsed, Judge, Verdict};
use pin_project_lite::pin_project;

use crate::admission::Admission;
use crate::deadline::Deadline;
use crate::error::{BoxError, Refusal};
use crate::gate::Admitted;
use crate::judging::Outcome;

pin_project! {
    /// The future of a [`CircuitBreakerService`](crate::CircuitBreakerService) call judged by
    /// a [`Judge`]: either a refusal, ready at once, or the inner service's future carrying
    /// the call's permit. Dropping it before it completes releases the permit. With the
    /// `tokio` feature, the call is cancelled at its permit's deadline (rule 22): the
    /// inner future is dropped, a failure recorded, and a boxed
    /// [`DeadlineElapsed`](breakerbox::DeadlineElapsed) answered.
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
            deadline: Deadline,
        },
        TimedOut { elapsed: DeadlineElapsed },
    }
}

impl<F, J, C: Breaker> Admitted<F, C, Outcome<J>> for ResponseFuture<F, J, C> {
    #[inline(always)]
    fn admitted(future: F, admission: Admission<C>, judge: Outcome<J>) -> Self {
        ResponseFuture {
            state: State::Admitted {
                deadline: Deadline::start(&admission),
                future,
                judged: Some((admission, judge.0)),
            },
        }
    }

    #[inline(always)]
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

    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        match state.as_mut().project() {
            StateProj::Refused { refusal } => Poll::Ready(Err(refusal.boxed())),
            StateProj::TimedOut { elapsed } => Poll::Ready(Err(Box::new(*elapsed))),
            StateProj::Admitted {
                future,
                judged,
                deadline,
            } => {
                let Poll::Ready(outcome) = future.poll(cx) else {
                    let elapsed = ready!(deadline.poll_elapsed(cx));
                    // Rule 22: the call is cancelled (its future dropped below) and is a
                    // failure, whatever the judge would have said of a result.
                    if let Some((admission, _)) = judged.take() {
                        let latency = admission.latency();
                        admission.record(Verdict::Failure, latency);
                    }
                    state.set(State::TimedOut { elapsed });
                    return Poll::Ready(Err(Box::new(elapsed)));
                };
                // Recorded where it lies, then dropped spent: a call that completes at
                // once would otherwise read the admission back as it is being stored.
                if let Some((admission, judge)) = judged.as_mut() {
                    let latency = admission.latency();
                    let verdict = judge.judge(&outcome, latency);
                    admission.record_in_place(verdict, latency);
                }
                *judged = None;
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
            State::TimedOut { .. } => "timed out",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish()
    }
}
