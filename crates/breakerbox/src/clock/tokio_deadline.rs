//! Rule 22's cancellation for tokio users: the timer of one call's deadline.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Sleep;

use crate::DeadlineElapsed;

/// The timer of one admitted call's deadline (rule 22 of `docs/RULES.md`), in tokio's
/// time: what the tower layer, the reqwest middleware and the proxy race the call's future
/// against. Start it when the call is admitted, from the permit's deadline
/// (`BreakerPermit::deadline`); without a deadline it never elapses and allocates
/// nothing. When it elapses, the caller drops the call's future and records a failure
/// with reason `timeout` (through `breakerbox_http::Exchange::on_transport_error` with
/// `TransportError::Timeout`, for HTTP).
///
/// Needs a tokio runtime with its time driver when a deadline is set (as
/// `tokio::time::sleep` does).
///
/// ```
/// use breakerbox::TokioDeadline;
/// use std::time::Duration;
///
/// #[tokio::main(flavor = "current_thread", start_paused = true)]
/// async fn main() {
///     let mut deadline = TokioDeadline::new(Some(Duration::from_secs(2)), false);
///     let hung = std::future::pending::<()>();
///     let elapsed = deadline.run(hung).await.unwrap_err();
///     assert_eq!(elapsed.deadline(), Duration::from_secs(2));
///
///     let mut none = TokioDeadline::new(None, false);
///     assert_eq!(none.run(async { 7 }).await, Ok(7));
/// }
/// ```
#[derive(Debug)]
pub struct TokioDeadline {
    sleep: Option<Pin<Box<Sleep>>>,
    elapsed: DeadlineElapsed,
}

impl TokioDeadline {
    /// A timer that elapses `deadline` from now (never, for `None`), for a half-open
    /// probe if `probe`.
    pub fn new(deadline: Option<Duration>, probe: bool) -> TokioDeadline {
        TokioDeadline {
            sleep: deadline.map(|d| Box::pin(tokio::time::sleep(d))),
            elapsed: DeadlineElapsed::new(deadline.unwrap_or(Duration::MAX), probe),
        }
    }

    /// The timer of a call admitted with `permit`: its deadline, from now.
    #[cfg(not(loom))]
    pub fn for_permit<P: crate::BreakerPermit + ?Sized>(permit: &P) -> TokioDeadline {
        TokioDeadline::new(permit.deadline(), permit.is_probe())
    }

    /// Whether a deadline is set at all.
    pub fn is_set(&self) -> bool {
        self.sleep.is_some()
    }

    /// `Ready` once the deadline has passed (and from then on); `Pending`, with `cx`
    /// woken when it passes, before; always `Pending` without a deadline.
    pub fn poll_elapsed(&mut self, cx: &mut Context<'_>) -> Poll<DeadlineElapsed> {
        match self.sleep.as_mut() {
            Some(sleep) => sleep.as_mut().poll(cx).map(|()| self.elapsed),
            None => Poll::Pending,
        }
    }

    /// Awaits `future` until the deadline: its output, or [`DeadlineElapsed`] once the
    /// deadline passed first (then `future` is dropped, unfinished). The future is polled
    /// before the timer, so an output ready at the deadline wins.
    pub async fn run<F: Future>(&mut self, future: F) -> Result<F::Output, DeadlineElapsed> {
        let mut future = std::pin::pin!(future);
        std::future::poll_fn(|cx| {
            if let Poll::Ready(output) = future.as_mut().poll(cx) {
                return Poll::Ready(Ok(output));
            }
            self.poll_elapsed(cx).map(Err)
        })
        .await
    }
}
