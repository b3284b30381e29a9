//! Rule 22: the deadline a response future races the inner service's future against.
//!
//! With the `tokio` feature, a call whose permit has a deadline (`call_timeout`, or
//! `probe_timeout` for a half-open probe) is cancelled when it passes: the inner future
//! is dropped and the call recorded as a failure with reason `timeout`. Without the
//! feature the crate has no timer: nothing is cancelled, and a late result is recorded as
//! a timeout failure by the breaker itself (the latency is past the deadline).

use std::task::{Context, Poll};

use breakerbox::contract::Breaker;
use breakerbox::DeadlineElapsed;

use crate::admission::Admission;

/// The deadline of one admitted call.
pub(crate) struct Deadline {
    #[cfg(feature = "tokio")]
    timer: Option<breakerbox::TokioDeadline>,
}

impl Deadline {
    /// The deadline of `admission`'s permit, from now (the call is being started).
    #[inline]
    pub(crate) fn start<B: Breaker>(admission: &Admission<B>) -> Deadline {
        #[cfg(feature = "tokio")]
        {
            use breakerbox::contract::BreakerPermit;
            let permit = admission.permit();
            Deadline {
                timer: permit
                    .deadline()
                    .map(|d| breakerbox::TokioDeadline::new(Some(d), permit.is_probe())),
            }
        }
        #[cfg(not(feature = "tokio"))]
        {
            let _ = admission;
            Deadline {}
        }
    }

    /// `Ready` once the deadline passed; `Pending` before it, or without one.
    #[inline]
    pub(crate) fn poll_elapsed(&mut self, cx: &mut Context<'_>) -> Poll<DeadlineElapsed> {
        #[cfg(feature = "tokio")]
        if let Some(timer) = self.timer.as_mut() {
            return timer.poll_elapsed(cx);
        }
        let _ = cx;
        Poll::Pending
    }
}
