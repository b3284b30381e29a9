//! Judging one HTTP exchange step by step, without I/O: the state object every adapter
//! (tower, reqwest, the proxy) drives, so they cannot judge the same exchange differently.

use std::borrow::Borrow;
use std::fmt;
use std::time::Duration;

use breakerbox::Verdict;
use http::{HeaderMap, StatusCode};

use crate::{HttpJudge, Judgement, TransportError};

/// One HTTP exchange being judged: the sans-IO steps every adapter follows, in the spirit
/// of tower-http's classifiers.
///
/// 1. [`Exchange::on_head`] with the response head and its latency. The answer is either
///    the final [`Judgement`] ([`AfterHead::Judged`]) or a request for the body
///    ([`AfterHead::ReadBody`]), when a business-code rule applies to this status.
/// 2. Only then, read the body up to `cap` bytes and call [`Exchange::on_body`]: with the
///    bytes when the whole body fitted, with `None` when it is bigger than the cap (by its
///    `Content-Length` or as it streams). A body that is not JSON, or holds no listed
///    code, is judged by its head.
/// 3. If reading the body fails, call [`Exchange::on_body_error`] instead.
///
/// When no response head arrives at all, call [`Exchange::on_transport_error`].
///
/// # gRPC
///
/// With gRPC rules ([`HttpJudge::grpc`]), a gRPC response (a 200 of content type
/// `application/grpc`) whose headers carry its `grpc-status` (a trailers-only response)
/// is judged at its head. One whose headers do not is judged at the **end of its body**:
/// [`Exchange::on_head`] answers [`AfterHead::AwaitTrailers`]; the adapter lets the body
/// stream on (to its caller) and calls [`Exchange::on_trailers`] with the trailers when
/// they come, or with `None` when the body ends without them (a failure, `grpc-status
/// missing`). A body that fails before its end is a failure ([`Exchange::on_body_error`]).
/// A body dropped before its end (its caller stopped reading) is judged by nobody: the
/// adapter releases the permit unrecorded, as for any call its caller abandoned (a probe
/// frees its slot), since the caller's choice says nothing about the server.
///
/// ```
/// use breakerbox::Verdict;
/// use breakerbox_http::{AfterHead, HttpJudge};
/// use http::{HeaderMap, StatusCode};
/// use std::time::Duration;
///
/// let judge = HttpJudge::builder().grpc(true).build()?;
/// let mut head = HeaderMap::new();
/// head.insert("content-type", "application/grpc".parse()?);
/// let mut exchange = judge.exchange(false);
/// let after = exchange.on_head(StatusCode::OK, &head, Duration::from_millis(5));
/// assert_eq!(after, AfterHead::AwaitTrailers);
/// let mut trailers = HeaderMap::new();
/// trailers.insert("grpc-status", "14".parse()?);
/// let judgement = exchange.on_trailers(Some(&trailers));
/// assert_eq!((judgement.verdict, judgement.reason.as_ref()), (Verdict::Failure, "grpc UNAVAILABLE"));
///
/// // A trailers-only response: judged at its head.
/// head.insert("grpc-status", "5".parse()?);
/// let mut exchange = judge.exchange(false);
/// let after = exchange.on_head(StatusCode::OK, &head, Duration::from_millis(5));
/// assert!(matches!(after, AfterHead::Judged(j) if j.verdict == Verdict::Ignore && j.reason == "grpc NOT_FOUND"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # The latency point
///
/// Latency is **the time to the response head, measured from admission** (the moment the
/// breaker granted the permit), read from the breaker's clock by the adapter and given to
/// [`Exchange::on_head`]. Reading the body for business codes does not count: a large
/// body on a slow client link says nothing about the dependency's health. For an exchange
/// that got no head, it is the time until the transport error, as given to
/// [`Exchange::on_transport_error`]. [`Exchange::latency`] is the value to record with the
/// verdict; the slow-call thresholds (the probe threshold for a half-open probe) judge it.
///
/// # The body-error rule
///
/// A body that fails after its head is a **failure**, whatever the head said, with the
/// reason `transport: body read failed` (`timeout: body read` when the adapter's time
/// budget ran out, [`TransportError::body_reason`]). A `Retry-After` hint from the head
/// is kept. Tower and reqwest record the head's judgement when no rule needs the body
/// (the body is then the caller's to read); the proxy, which streams the body itself and
/// records at its end, reports a later body failure through the same call.
///
/// ```
/// use breakerbox::Verdict;
/// use breakerbox_http::{AfterHead, HttpJudge, TransportError};
/// use http::{HeaderMap, StatusCode};
/// use std::time::Duration;
///
/// let judge = HttpJudge::builder()
///     .business_pointer("/error_code")
///     .business_failure_codes(["E001"])
///     .build()?;
/// let mut exchange = judge.exchange(false);
/// let cap = match exchange.on_head(StatusCode::OK, &HeaderMap::new(), Duration::from_millis(20)) {
///     AfterHead::ReadBody { cap } => cap,
///     other => unreachable!("business codes need the body: {other:?}"),
/// };
/// assert_eq!(cap, 64 * 1024);
/// let judgement = exchange.on_body(Some(br#"{"error_code":"E001"}"#));
/// assert_eq!((judgement.verdict, judgement.reason.as_ref()), (Verdict::Failure, "business code E001"));
/// assert_eq!(exchange.latency(), Duration::from_millis(20));
///
/// // The same head, but the body breaks while it is read.
/// let mut exchange = judge.exchange(false);
/// exchange.on_head(StatusCode::OK, &HeaderMap::new(), Duration::from_millis(20));
/// let judgement = exchange.on_body_error(TransportError::Reset);
/// assert_eq!((judgement.verdict, judgement.reason.as_ref()), (Verdict::Failure, "transport: body read failed"));
///
/// // No head at all.
/// let mut exchange = judge.exchange(false);
/// let judgement = exchange.on_transport_error(TransportError::Connect, Duration::from_millis(3));
/// assert_eq!(judgement.reason, "transport: connect failed");
/// # Ok::<(), breakerbox_http::HttpJudgeError>(())
/// ```
///
/// # The caller's deadline
///
/// A gRPC request carries its caller's deadline (`grpc-timeout`). Give the request's
/// headers to [`Exchange::on_request`] before the call: a `DEADLINE_EXCEEDED` that comes at
/// or after that deadline is then the caller's budget running out, not the server failing
/// (a failure only when the deadline is over the slow-call threshold), so a client cannot
/// trip a healthy server's breaker with tiny deadlines. Streamed answers end with
/// [`Exchange::on_trailers_after`], which says when they ended.
///
/// ```
/// use breakerbox::Verdict;
/// use breakerbox_http::{AfterHead, HttpJudge};
/// use http::{HeaderMap, StatusCode};
/// use std::time::Duration;
///
/// let judge = HttpJudge::builder().grpc(true).build()?;
/// let mut request = HeaderMap::new();
/// request.insert("grpc-timeout", "1n".parse()?);
/// let mut answer = HeaderMap::new();
/// answer.insert("content-type", "application/grpc".parse()?);
/// answer.insert("grpc-status", "4".parse()?);
/// let mut exchange = judge.exchange(false);
/// exchange.on_request(&request);
/// let after = exchange.on_head(StatusCode::OK, &answer, Duration::from_millis(1));
/// assert!(matches!(after, AfterHead::Judged(j) if j.verdict == Verdict::Ignore));
///
/// // The same answer without the caller's deadline: the server's own failure.
/// let mut exchange = judge.exchange(false);
/// let after = exchange.on_head(StatusCode::OK, &answer, Duration::from_millis(1));
/// assert!(matches!(after, AfterHead::Judged(j) if j.verdict == Verdict::Failure));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// The steps never panic. Out of order, they still answer: [`Exchange::on_body`] or
/// [`Exchange::on_body_error`] before any head judge as a transport error with no
/// response, and a second head replaces the first.
#[derive(Clone)]
pub struct Exchange<J: Borrow<HttpJudge>> {
    judge: J,
    probe: bool,
    latency: Duration,
    head: Option<Head>,
    /// The caller's own deadline, from the request's `grpc-timeout`.
    deadline: Option<Duration>,
}

/// What the judge keeps of a response head: no headers, only what they decided.
#[derive(Copy, Clone, Debug)]
struct Head {
    status: StatusCode,
    retry_after: Option<Duration>,
    /// A gRPC response whose status comes in its trailers.
    grpc: bool,
}

/// What to do once the head is judged ([`Exchange::on_head`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "the judgement is final, or the body must be read"]
pub enum AfterHead {
    /// The head decides: this is the final judgement (no rule reads this body).
    Judged(Judgement),
    /// A business-code rule applies to this status: read the body, at most `cap` bytes,
    /// and give it to [`Exchange::on_body`] (or `None` when it is bigger than `cap`).
    ReadBody {
        /// The most bytes to read ([`HttpJudge::body_cap`]).
        cap: usize,
    },
    /// A gRPC response whose `grpc-status` comes in its trailers: let the body stream to
    /// its end, then give the trailers to [`Exchange::on_trailers`] (`None` when the body
    /// ended without them).
    AwaitTrailers,
}

impl<J: Borrow<HttpJudge>> Exchange<J> {
    /// Starts judging an exchange with `judge` (a `&HttpJudge`, an `Arc<HttpJudge>`, or
    /// anything that borrows one), as a half-open probe when `probe` is true (the stricter
    /// latency threshold applies). [`HttpJudge::exchange`] is the short way with a borrow.
    pub fn new(judge: J, probe: bool) -> Self {
        Exchange {
            judge,
            probe,
            latency: Duration::ZERO,
            head: None,
            deadline: None,
        }
    }

    /// The judge.
    pub fn judge(&self) -> &HttpJudge {
        self.judge.borrow()
    }

    /// Whether the exchange is judged as a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.probe
    }

    /// The latency to record with the verdict: the time to the response head given to
    /// [`Exchange::on_head`], or the time to the transport error (zero before either).
    pub fn latency(&self) -> Duration {
        self.latency
    }

    /// The request about to be sent, by its headers: keeps the caller's deadline
    /// (`grpc-timeout`, [`crate::caller_deadline`]) to judge a gRPC `DEADLINE_EXCEEDED`
    /// by. Optional; without it, every `DEADLINE_EXCEEDED` is judged as configured.
    pub fn on_request(&mut self, headers: &HeaderMap) {
        self.set_caller_deadline(crate::caller_deadline(headers));
    }

    /// The caller's deadline, read already ([`Exchange::on_request`] reads it from the
    /// request): for an adapter that no longer has the request when the exchange starts.
    pub fn set_caller_deadline(&mut self, deadline: Option<Duration>) {
        self.deadline = deadline;
    }

    /// The response head arrived after `latency` (from admission, through the breaker's
    /// clock). Answers the final judgement, or asks for the body when a business-code
    /// rule applies to `status`.
    pub fn on_head(
        &mut self,
        status: StatusCode,
        headers: &HeaderMap,
        latency: Duration,
    ) -> AfterHead {
        self.on_head_at(status, headers, latency, latency)
    }

    /// [`Exchange::on_head`] for an adapter whose `latency` leaves out time it does not
    /// charge to the server (the proxy's waits on a client's upload): `elapsed` is all the
    /// time since admission, which a caller's own deadline runs in
    /// ([`Exchange::on_request`]). At least `latency`.
    pub fn on_head_at(
        &mut self,
        status: StatusCode,
        headers: &HeaderMap,
        latency: Duration,
        elapsed: Duration,
    ) -> AfterHead {
        let judge = self.judge.borrow();
        let grpc = judge.is_grpc(status, headers);
        let head = Head {
            status,
            retry_after: judge.retry_hint(status, headers),
            grpc: grpc && !crate::GrpcStatus::is_in(headers),
        };
        self.head = Some(head);
        self.latency = latency;
        if head.grpc {
            AfterHead::AwaitTrailers
        } else if grpc {
            // Trailers-only: the status is in the head.
            AfterHead::Judged(judge.judge_grpc_call(
                Some(headers),
                latency,
                self.probe,
                self.deadline,
                elapsed.max(latency),
            ))
        } else if judge.wants_body(status) {
            AfterHead::ReadBody {
                cap: judge.body_cap(),
            }
        } else {
            AfterHead::Judged(judge.judge_parts(
                status,
                head.retry_after,
                None,
                latency,
                self.probe,
            ))
        }
    }

    /// The body was read: `Some` with all of it when it fitted the cap, `None` when it is
    /// bigger (it is then judged by its head). Gives the final judgement. After a head
    /// that needed no body, this is the head's judgement again; after
    /// [`AfterHead::AwaitTrailers`], a body that ended without trailers
    /// (`grpc-status missing`).
    pub fn on_body(&mut self, body: Option<&[u8]>) -> Judgement {
        match self.head {
            Some(head) if head.grpc => self.on_trailers(None),
            Some(head) => self.judge.borrow().judge_parts(
                head.status,
                head.retry_after,
                body,
                self.latency,
                self.probe,
            ),
            None => Judgement::new(Verdict::Failure, TransportError::NoResponse.reason()),
        }
    }

    /// The body ended, with `trailers` (`None` when it had none): after
    /// [`AfterHead::AwaitTrailers`], the judgement of the gRPC status they carry (a
    /// failure when none or a malformed one, `grpc-status missing` or `grpc-status
    /// invalid`), with the latency rule on the time to the head. After any other head,
    /// the trailers say nothing: this is [`Exchange::on_body`] without a body.
    pub fn on_trailers(&mut self, trailers: Option<&HeaderMap>) -> Judgement {
        self.on_trailers_after(trailers, self.latency)
    }

    /// [`Exchange::on_trailers`] for a body that ended `ended` after admission (through
    /// the breaker's clock, as the head's latency): what a `DEADLINE_EXCEEDED` in them is
    /// judged by when the request carried the caller's deadline ([`Exchange::on_request`]).
    /// The latency rule still judges the time to the head.
    pub fn on_trailers_after(
        &mut self,
        trailers: Option<&HeaderMap>,
        ended: Duration,
    ) -> Judgement {
        match self.head {
            Some(head) if head.grpc => self.judge.borrow().judge_grpc_call(
                trailers,
                self.latency,
                self.probe,
                self.deadline,
                ended.max(self.latency),
            ),
            _ => self.on_body(None),
        }
    }

    /// Reading the body failed after its head: a failure, whatever the head said, with the
    /// reason [`TransportError::body_reason`] (`transport: body read failed`, or
    /// `timeout: body read`). The head's `Retry-After` hint is kept.
    pub fn on_body_error(&mut self, error: TransportError) -> Judgement {
        match self.head {
            Some(head) => Judgement {
                verdict: Verdict::Failure,
                reason: error.body_reason().into(),
                retry_after: head.retry_after,
            },
            None => Judgement::new(Verdict::Failure, TransportError::NoResponse.reason()),
        }
    }

    /// No usable response head arrived (connect failure, reset, timeout, connection
    /// closed), `latency` after admission: a failure with the error's reason.
    pub fn on_transport_error(&mut self, error: TransportError, latency: Duration) -> Judgement {
        self.head = None;
        self.latency = latency;
        self.judge.borrow().judge_transport(error, latency)
    }
}

impl<J: Borrow<HttpJudge>> fmt::Debug for Exchange<J> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Exchange")
            .field("probe", &self.probe)
            .field("latency", &self.latency)
            .field("status", &self.head.map(|h| h.status))
            .finish_non_exhaustive()
    }
}
