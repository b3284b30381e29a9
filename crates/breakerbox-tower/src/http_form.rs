//! The HTTP form: a service of `http::Request<_>` to `http::Response<_>` judged by
//! [`HttpJudge`].

mod body;
mod future;

pub use body::ReplayBody;
pub use future::HttpResponseFuture;

use std::error::Error;
use std::fmt;
use std::io;
use std::sync::Arc;
use std::task::{Context, Poll};

use breakerbox_http::{HttpJudge, TransportError};
use http_body::Body;
use tower_service::Service;

use crate::error::BoxError;
use crate::gate::GatedFuture;
use crate::select::Select;
use crate::service::CircuitBreakerService;

/// Judges HTTP exchanges with an [`HttpJudge`] (see
/// [`CircuitBreakerLayer::http`](crate::CircuitBreakerLayer::http)):
///
/// - an error from the inner service (no response: connect refused, reset, timeout) is a
///   failure;
/// - a response is judged from its status, headers and latency when its head arrives,
///   unless the judge has business-code rules for its status
///   ([`HttpJudge::wants_body`]): then the body is read, up to [`HttpJudge::body_cap`]
///   bytes, and judged with the head once complete. A body bigger than the cap (by its
///   `Content-Length` or as it streams) is judged by the head alone. Either way the caller
///   receives the full, unchanged body ([`ReplayBody`]: the bytes read, then the rest);
///   memory held is at most the cap plus one frame;
/// - latency runs from the call to the judgement, through the breaker's clock; a half-open
///   probe is judged with the judge's probe threshold.
#[derive(Clone)]
pub struct Http {
    judge: Arc<HttpJudge>,
}

impl Http {
    /// Judging with `judge`.
    pub fn new(judge: impl Into<Arc<HttpJudge>>) -> Self {
        Http {
            judge: judge.into(),
        }
    }

    /// The judge.
    pub fn judge(&self) -> &HttpJudge {
        &self.judge
    }
}

impl fmt::Debug for Http {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Http").field(&self.judge).finish()
    }
}

/// What kind of transport failure `error` is, from the `std::io::Error` found in its
/// source chain (hyper, reqwest and tokio errors wrap one); [`TransportError::Other`] when
/// none says more.
pub(crate) fn transport_kind(error: &(dyn Error + 'static)) -> TransportError {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(io) = error.downcast_ref::<io::Error>() {
            return match io.kind() {
                io::ErrorKind::ConnectionRefused
                | io::ErrorKind::NotConnected
                | io::ErrorKind::AddrNotAvailable
                | io::ErrorKind::HostUnreachable
                | io::ErrorKind::NetworkUnreachable => TransportError::Connect,
                io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::BrokenPipe => TransportError::Reset,
                io::ErrorKind::UnexpectedEof => TransportError::NoResponse,
                io::ErrorKind::TimedOut => TransportError::Timeout,
                _ => TransportError::Other,
            };
        }
        next = error.source();
    }
    TransportError::Other
}

impl<S, ReqBody, ResBody, Sel> Service<http::Request<ReqBody>>
    for CircuitBreakerService<S, Sel, Http>
where
    S: Service<http::Request<ReqBody>, Response = http::Response<ResBody>> + Clone,
    S::Error: Into<BoxError>,
    ResBody: Body,
    ResBody::Error: Into<BoxError>,
    Sel: Select<http::Request<ReqBody>>,
{
    type Response = http::Response<ReplayBody<ResBody>>;
    type Error = BoxError;
    type Future = GatedFuture<
        S,
        http::Request<ReqBody>,
        Sel::Breaker,
        Http,
        HttpResponseFuture<S::Future, ResBody, Sel::Breaker>,
    >;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.poll_ready_with::<http::Request<ReqBody>>(cx)
    }

    #[inline]
    fn call(&mut self, request: http::Request<ReqBody>) -> Self::Future {
        let timed = self.mode.judge.uses_latency();
        self.admit_and_call(request, timed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Wrapper(io::Error);
    impl fmt::Display for Wrapper {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("client error")
        }
    }
    impl Error for Wrapper {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn transport_kind_is_read_from_the_io_error_in_the_source_chain() {
        let refused = Wrapper(io::Error::from(io::ErrorKind::ConnectionRefused));
        assert_eq!(transport_kind(&refused), TransportError::Connect);
        let reset = Wrapper(io::Error::from(io::ErrorKind::ConnectionReset));
        assert_eq!(transport_kind(&reset), TransportError::Reset);
        let timeout = io::Error::from(io::ErrorKind::TimedOut);
        assert_eq!(transport_kind(&timeout), TransportError::Timeout);
        let other = std::fmt::Error;
        assert_eq!(transport_kind(&other), TransportError::Other);
    }
}
