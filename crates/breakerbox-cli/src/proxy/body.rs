//! The body type of every request and response the proxy hands on: a buffered body, a
//! client's upload, or an upstream's response.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use super::download::Download;
use super::upload::Upload;

/// The error type of every body the proxy hands on.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A body handed on by the proxy.
pub enum ProxyBody {
    /// All of it, in memory (or nothing).
    Full(Option<Bytes>),
    /// A client's request body, streamed to the upstream.
    Upload(Upload),
    /// An upstream's response body, judged at its end.
    Download(Box<Download>),
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
            ProxyBody::Download(download) => Pin::new(download.as_mut()).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ProxyBody::Full(bytes) => bytes.is_none(),
            ProxyBody::Upload(upload) => upload.is_end_stream(),
            ProxyBody::Download(download) => download.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ProxyBody::Full(bytes) => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64))
            }
            ProxyBody::Upload(upload) => upload.size_hint(),
            ProxyBody::Download(download) => download.size_hint(),
        }
    }
}
