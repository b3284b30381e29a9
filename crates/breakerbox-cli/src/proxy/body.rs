//! The body type of every request and response the proxy hands on: a buffered body, or
//! a streamed one preceded by the frames already read (for judging or size checks).

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

use super::pool::Lent;
use super::upload::Upload;

/// The error type of every body the proxy hands on.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A body handed on by the proxy.
pub enum ProxyBody {
    /// All of it, in memory (or nothing).
    Full(Option<Bytes>),
    /// A client's request body, streamed to the upstream.
    Upload(Upload),
    /// Frames already read, then the rest of the stream.
    Stream {
        /// Frames read before handing on.
        read: VecDeque<Frame<Bytes>>,
        /// The rest.
        rest: Incoming,
        /// The upstream connection, given back to its pool at the end of the body.
        lent: Option<Lent>,
    },
}

impl ProxyBody {
    /// An empty body.
    pub fn empty() -> ProxyBody {
        ProxyBody::Full(None)
    }

    /// A body of `bytes`.
    pub fn full(bytes: impl Into<Bytes>) -> ProxyBody {
        let bytes = bytes.into();
        ProxyBody::Full((!bytes.is_empty()).then_some(bytes))
    }

    /// `read`, then the rest of an upstream response body; `lent` goes back to its pool
    /// once the body has been read to its end (at once if it already has).
    pub fn upstream(read: VecDeque<Frame<Bytes>>, rest: Incoming, lent: Lent) -> ProxyBody {
        let lent = if rest.is_end_stream() {
            lent.give_back();
            None
        } else {
            Some(lent)
        };
        ProxyBody::Stream { read, rest, lent }
    }
}

impl Body for ProxyBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            ProxyBody::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            ProxyBody::Upload(upload) => Pin::new(upload).poll_frame(cx),
            ProxyBody::Stream { read, rest, lent } => match read.pop_front() {
                Some(frame) => Poll::Ready(Some(Ok(frame))),
                None => {
                    let polled = Pin::new(&mut *rest).poll_frame(cx);
                    match &polled {
                        Poll::Ready(None) => {
                            if let Some(lent) = lent.take() {
                                lent.give_back();
                            }
                        }
                        Poll::Ready(Some(Ok(_))) if rest.is_end_stream() => {
                            if let Some(lent) = lent.take() {
                                lent.give_back();
                            }
                        }
                        Poll::Ready(Some(Err(_))) => *lent = None,
                        _ => {}
                    }
                    polled.map(|frame| frame.map(|r| r.map_err(BoxError::from)))
                }
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ProxyBody::Full(bytes) => bytes.is_none(),
            ProxyBody::Upload(upload) => upload.is_end_stream(),
            ProxyBody::Stream { read, rest, .. } => read.is_empty() && rest.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ProxyBody::Full(bytes) => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64))
            }
            ProxyBody::Upload(upload) => upload.size_hint(),
            ProxyBody::Stream { read, rest, .. } => {
                let buffered: u64 = read
                    .iter()
                    .filter_map(|f| f.data_ref().map(|d| d.len() as u64))
                    .sum();
                let inner = rest.size_hint();
                let mut hint = SizeHint::new();
                hint.set_lower(inner.lower() + buffered);
                if let Some(upper) = inner.upper() {
                    hint.set_upper(upper + buffered);
                }
                hint
            }
        }
    }
}
