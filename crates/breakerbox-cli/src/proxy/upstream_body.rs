//! An upstream's response body: from the inline HTTP/1.1 client, or from hyper's
//! clients (uploads, upgrades, HTTP/2).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

use super::body::BoxError;
use super::h1::InlineBody;

/// An upstream's response body.
pub enum UpstreamBody {
    /// Read by the inline HTTP/1.1 client.
    Inline(InlineBody),
    /// Read by hyper.
    Hyper(Incoming),
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            UpstreamBody::Inline(body) => Pin::new(body).poll_frame(cx),
            UpstreamBody::Hyper(body) => Pin::new(body)
                .poll_frame(cx)
                .map(|frame| frame.map(|f| f.map_err(BoxError::from))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            UpstreamBody::Inline(body) => body.is_end_stream(),
            UpstreamBody::Hyper(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            UpstreamBody::Inline(body) => body.size_hint(),
            UpstreamBody::Hyper(body) => body.size_hint(),
        }
    }
}
