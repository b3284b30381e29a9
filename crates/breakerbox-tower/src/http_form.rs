//! The HTTP form: a service of `http::Request<_>` to `http::Response<_>` judged by
//! [`HttpJudge`].

mod body;
mod future;

pub use body::ReplayBody;
pub use future::HttpResponseFuture;

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use breakerbox_http::{Exchange, HttpJudge};
use http_body::Body;
use tower_service::Service;

use crate::error::BoxError;
use crate::gate::GatedFuture;
use crate::select::Select;
use crate::service::CircuitBreakerService;

/// Judges HTTP exchanges with an [`HttpJudge`] (see
/// [`CircuitBreakerLayer::http`](crate::CircuitBreakerLayer::http)), driving one
/// [`breakerbox_http::Exchange`] per call, the same steps as every other adapter:
///
/// - an error from the inner service (no response: connect refused, reset, timeout) is a
///   failure, its kind read from the error's source chain by
///   [`TransportError::classify`](breakerbox_http::TransportError::classify) (an
///   `io::Error`, a [`TransportError`](breakerbox_http::TransportError) your service
///   returns, or with the `hyper` feature a `hyper::Error`);
/// - a response is judged from its status, headers and latency when its head arrives,
///   unless the judge has business-code rules for its status
///   ([`HttpJudge::wants_body`]): then the body is read, up to [`HttpJudge::body_cap`]
///   bytes, and judged with the head once complete. A body bigger than the cap (by its
///   `Content-Length` or as it streams) is judged by the head alone; a body that fails
///   while read is a failure (`transport: body read failed`). Either way the caller
///   receives the full, unchanged body ([`ReplayBody`]: the bytes read, then the rest);
///   memory held is at most the cap plus one frame;
/// - latency is the time to the response head from admission, through the breaker's
///   clock (reading the body for business codes does not count); a half-open probe is
///   judged with the judge's probe threshold;
/// - the [`Judgement`](breakerbox_http::Judgement) is put in the response's extensions;
/// - with gRPC rules ([`HttpJudge::grpc`], for tonic channels), a gRPC response whose
///   status is in its trailers is handed on at once; its body ([`ReplayBody`]) carries
///   the permit and records the judgement of the trailers when it ends (no trailers or
///   a broken body: a failure). Dropped before its end, it releases the permit
///   unjudged. Such a response has no `Judgement` in its extensions (it comes later);
/// - with gRPC rules, a request's `grpc-timeout` (tonic's `Request::set_timeout`) is the
///   caller's deadline: a `DEADLINE_EXCEEDED` at or after it is ignored unless the
///   deadline is over the slow-call threshold
///   ([`caller_deadline`](breakerbox_http::caller_deadline)).
#[derive(Clone)]
pub struct Http {
    judge: Arc<HttpJudge>,
    /// The caller's deadline of the call being admitted (`grpc-timeout`), with gRPC rules.
    deadline: Option<Duration>,
}

impl Http {
    /// Judging with `judge`.
    pub fn new(judge: impl Into<Arc<HttpJudge>>) -> Self {
        Http {
            judge: judge.into(),
            deadline: None,
        }
    }

    /// The judge.
    pub fn judge(&self) -> &HttpJudge {
        &self.judge
    }

    /// Starts judging one call, with this handle on the judge (moved, not cloned: one
    /// reference count fewer per call).
    pub(crate) fn into_exchange(self, probe: bool) -> Exchange<Arc<HttpJudge>> {
        let mut exchange = Exchange::new(self.judge, probe);
        exchange.set_caller_deadline(self.deadline);
        exchange
    }
}

impl fmt::Debug for Http {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Http").field(&self.judge).finish()
    }
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
        // Latency is taken at the head whenever it can matter: a latency rule, or a body
        // read that must not count (untimed, the permit measures at recording).
        // A gRPC caller's own deadline (`grpc-timeout`, as tonic's `Request::set_timeout`
        // sends it): a DEADLINE_EXCEEDED past it is the caller's, judged by the time taken.
        self.mode.deadline = if self.mode.judge.grpc().is_some() {
            breakerbox_http::caller_deadline(request.headers())
        } else {
            None
        };
        let timed = self.mode.judge.uses_latency()
            || self.mode.judge.reads_bodies()
            || self.mode.deadline.is_some();
        self.admit_and_call(request, timed)
    }
}
