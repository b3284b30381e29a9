//! The response body handed to the caller: what was read for judging, then the rest.

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

use breakerbox::DeadlineElapsed;
use breakerbox_http::TransportError;
use bytes::{Buf, Bytes};
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use crate::error::BoxError;

/// A call judged at the end of its body (a gRPC status in the trailers): what the body
/// tells it when it ends, fails or waits on the inner body.
pub(crate) trait Settle: Send {
    /// The body ended, with `trailers` or without (`None`): judge and record.
    fn trailers(self: Box<Self>, trailers: Option<&HeaderMap>);
    /// The body failed before its end: record the failure.
    fn failed(self: Box<Self>, error: TransportError);
    /// Rule 22: `Ready` once the call's deadline passed (polled only while the inner
    /// body has nothing: the caller's own pace is not the dependency's time).
    fn poll_deadline(&mut self, cx: &mut Context<'_>) -> Poll<DeadlineElapsed>;
}

/// What the body's end still has to judge; a mutex only to keep the body `Sync`: it is
/// reached through `&mut` (never locked).
type Pending = Mutex<Option<Box<dyn Settle>>>;

pin_project! {
    /// The body of a response from the HTTP form: the frames read for judging (if any),
    /// replayed unchanged, followed by the rest of the inner body. Data comes as [`Bytes`]
    /// (zero-copy when the inner body's data already is `Bytes`); errors are boxed.
    ///
    /// A gRPC response whose status comes in its trailers streams through unchanged and
    /// is judged when the body ends: by its trailers (`grpc-status`), as a failure when
    /// it ends without them or fails, and, with the `tokio` feature, as a `timeout: body
    /// read` failure (the caller gets a boxed [`DeadlineElapsed`]) when the call's
    /// deadline passes while the inner body has nothing to give. Dropped before its end,
    /// it releases the call's permit unjudged (the caller stopped, not the server).
    pub struct ReplayBody<B> {
        frames: VecDeque<Frame<Bytes>>,
        buffered: u64,
        #[pin]
        rest: Rest<B>,
    }
}

pin_project! {
    #[project = RestProj]
    enum Rest<B> {
        Direct { #[pin] body: B },
        Boxed { body: Pin<Box<B>> },
        Failed { error: Option<BoxError> },
        Judging { #[pin] body: B, settle: Pending },
        Done,
    }
}

impl<B> ReplayBody<B> {
    /// The inner body, untouched.
    pub(crate) fn direct(body: B) -> Self {
        ReplayBody {
            frames: VecDeque::new(),
            buffered: 0,
            rest: Rest::Direct { body },
        }
    }

    /// `frames` (holding `buffered` data bytes), then the rest of `body`.
    pub(crate) fn replay(frames: VecDeque<Frame<Bytes>>, buffered: u64, body: Pin<Box<B>>) -> Self {
        ReplayBody {
            frames,
            buffered,
            rest: Rest::Boxed { body },
        }
    }

    /// The inner body, judged by `settle` when it ends.
    pub(crate) fn judging(body: B, settle: Box<dyn Settle>) -> Self {
        ReplayBody {
            frames: VecDeque::new(),
            buffered: 0,
            rest: Rest::Judging {
                body,
                settle: Mutex::new(Some(settle)),
            },
        }
    }

    /// `frames`, then the end of the body (the inner body ended while being read).
    pub(crate) fn complete(frames: VecDeque<Frame<Bytes>>, buffered: u64) -> Self {
        ReplayBody {
            frames,
            buffered,
            rest: Rest::Done,
        }
    }

    /// `frames`, then `error` (the inner body failed while being read).
    pub(crate) fn failed(frames: VecDeque<Frame<Bytes>>, buffered: u64, error: BoxError) -> Self {
        ReplayBody {
            frames,
            buffered,
            rest: Rest::Failed { error: Some(error) },
        }
    }
}

/// A frame with its data as `Bytes`.
#[inline]
pub(crate) fn to_bytes<D: Buf>(frame: Frame<D>) -> Frame<Bytes> {
    frame.map_data(|mut data| data.copy_to_bytes(data.remaining()))
}

impl<B> Body for ReplayBody<B>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let mut this = self.project();
        if let Some(frame) = this.frames.pop_front() {
            if let Some(data) = frame.data_ref() {
                *this.buffered = this.buffered.saturating_sub(data.len() as u64);
            }
            return Poll::Ready(Some(Ok(frame)));
        }
        let polled = match this.rest.as_mut().project() {
            RestProj::Direct { body } => body.poll_frame(cx),
            RestProj::Boxed { body } => body.as_mut().poll_frame(cx),
            RestProj::Failed { error } => {
                let error = error.take();
                this.rest.set(Rest::Done);
                return Poll::Ready(error.map(Err));
            }
            RestProj::Done => return Poll::Ready(None),
            RestProj::Judging { body, settle } => {
                let settle = match settle.get_mut() {
                    Ok(settle) => settle,
                    Err(poisoned) => poisoned.into_inner(),
                };
                return match body.poll_frame(cx) {
                    Poll::Pending => {
                        let Some(pending) = settle.as_mut() else {
                            return Poll::Pending;
                        };
                        let elapsed = std::task::ready!(pending.poll_deadline(cx));
                        if let Some(pending) = settle.take() {
                            pending.failed(TransportError::Timeout);
                        }
                        this.rest.set(Rest::Done);
                        Poll::Ready(Some(Err(Box::new(elapsed))))
                    }
                    Poll::Ready(Some(Ok(frame))) => {
                        if let Some(trailers) = frame.trailers_ref() {
                            if let Some(pending) = settle.take() {
                                pending.trailers(Some(trailers));
                            }
                        }
                        Poll::Ready(Some(Ok(to_bytes(frame))))
                    }
                    Poll::Ready(Some(Err(error))) => {
                        let error: BoxError = error.into();
                        if let Some(pending) = settle.take() {
                            pending.failed(TransportError::classify(&*error));
                        }
                        Poll::Ready(Some(Err(error)))
                    }
                    Poll::Ready(None) => {
                        if let Some(pending) = settle.take() {
                            pending.trailers(None);
                        }
                        Poll::Ready(None)
                    }
                };
            }
        };
        Poll::Ready(match std::task::ready!(polled) {
            Some(Ok(frame)) => Some(Ok(to_bytes(frame))),
            Some(Err(error)) => Some(Err(error.into())),
            None => None,
        })
    }

    fn is_end_stream(&self) -> bool {
        self.frames.is_empty()
            && match &self.rest {
                Rest::Direct { body } => body.is_end_stream(),
                Rest::Boxed { body } => body.is_end_stream(),
                Rest::Failed { error } => error.is_none(),
                // Not the end until the end is judged: a caller that trusts this and stops
                // polling must still poll the end once.
                Rest::Judging { body, settle } => {
                    body.is_end_stream() && settle.lock().map_or(true, |s| s.is_none())
                }
                Rest::Done => true,
            }
    }

    fn size_hint(&self) -> SizeHint {
        let rest = match &self.rest {
            Rest::Direct { body } => body.size_hint(),
            Rest::Boxed { body } => body.size_hint(),
            Rest::Judging { body, .. } => body.size_hint(),
            Rest::Failed { .. } | Rest::Done => SizeHint::with_exact(0),
        };
        let mut hint = SizeHint::new();
        hint.set_lower(rest.lower().saturating_add(self.buffered));
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper.saturating_add(self.buffered));
        }
        hint
    }
}

impl<B> fmt::Debug for ReplayBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rest = match &self.rest {
            Rest::Direct { .. } => "direct",
            Rest::Boxed { .. } => "rest of the body",
            Rest::Failed { .. } => "error",
            Rest::Judging { .. } => "judged at its end",
            Rest::Done => "end",
        };
        f.debug_struct("ReplayBody")
            .field("frames", &self.frames.len())
            .field("buffered", &self.buffered)
            .field("then", &rest)
            .finish()
    }
}
