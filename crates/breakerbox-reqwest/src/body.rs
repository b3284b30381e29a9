//! Reading the start of a response body for the judge, and giving the caller the whole
//! response back.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body as HttpBody, Frame, SizeHint};
use http_body_util::BodyExt;
use reqwest::ResponseBuilderExt;

/// A response whose body may have been read, and the body bytes when they fit the cap.
pub(crate) struct Peeked {
    pub(crate) response: reqwest::Response,
    /// The whole body when it is at most `cap` bytes; `None` when bigger.
    pub(crate) body: Option<Bytes>,
}

/// Reads up to `cap` bytes of `response`'s body. If the body ends within the cap, the
/// caller gets a response with exactly that body; if not, it gets a response whose body is
/// what was read followed by the rest, unread, and no body is returned for judging.
/// Status, version, headers, extensions and the URL are kept.
pub(crate) async fn peek(
    response: reqwest::Response,
    cap: usize,
) -> Result<Peeked, reqwest::Error> {
    if response
        .content_length()
        .is_some_and(|len| len > cap as u64)
    {
        return Ok(Peeked {
            response,
            body: None,
        });
    }
    let url = response.url().clone();
    let (mut parts, mut body) = http::Response::<reqwest::Body>::from(response).into_parts();
    // `From<Response> for http::Response` drops the URL: put it back the public way.
    if let Ok(marker) = http::Response::builder().url(url).body(()) {
        parts.extensions.extend(marker.into_parts().0.extensions);
    }
    let mut buffer = BytesMut::new();
    let mut ended = false;
    while buffer.len() <= cap {
        match body.frame().await {
            None => {
                ended = true;
                break;
            }
            Some(Err(error)) => return Err(error),
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    buffer.extend_from_slice(&data);
                }
                // Trailers of a body that fits are dropped (HTTP/1.1 responses rarely
                // carry them); a body bigger than the cap keeps its unread rest as is.
            }
        }
    }
    let read = buffer.freeze();
    let (body, judged) = if ended {
        (reqwest::Body::from(read.clone()), Some(read))
    } else {
        (
            reqwest::Body::wrap(Prefixed {
                prefix: Some(read),
                rest: body,
            }),
            None,
        )
    };
    Ok(Peeked {
        response: reqwest::Response::from(http::Response::from_parts(parts, body)),
        body: judged,
    })
}

/// The bytes already read, then the rest of the original body.
struct Prefixed {
    prefix: Option<Bytes>,
    rest: reqwest::Body,
}

impl HttpBody for Prefixed {
    type Data = Bytes;
    type Error = reqwest::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, reqwest::Error>>> {
        if let Some(prefix) = self.prefix.take() {
            if !prefix.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(prefix))));
            }
        }
        Pin::new(&mut self.rest).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.prefix.as_ref().is_none_or(Bytes::is_empty) && self.rest.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let extra = self.prefix.as_ref().map_or(0, |p| p.len() as u64);
        let rest = self.rest.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(rest.lower().saturating_add(extra));
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper.saturating_add(extra));
        }
        hint
    }
}
