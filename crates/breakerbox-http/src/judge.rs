//! The HTTP judge.

mod builder;

pub use builder::HttpJudgeBuilder;

use std::time::Duration;

use breakerbox::{Judge, Verdict};
use http::{HeaderMap, StatusCode};

use crate::business::BusinessRule;
use crate::grpc::{is_grpc_response, GrpcJudge};
use crate::status::{status_reason, StatusTable};
use crate::{HttpJudgeConfig, HttpJudgeError, HumanDuration, Judgement, TransportError};

/// The default body cap: 64 KiB.
pub const DEFAULT_BODY_CAP: usize = 64 * 1024;

/// Judges HTTP exchanges: status rules, business codes in the body, latency and transport
/// errors. Build it once (from code with [`HttpJudge::builder`] or from a
/// [`HttpJudgeConfig`]) and share it; judging does no I/O and, without business codes,
/// allocates nothing.
///
/// The order of the rules:
/// 1. the status rule (code > range > class; defaults: 5xx, 408 and 429 fail, other 4xx
///    and other 1xx are ignored, 2xx, 3xx and 101 (an upgrade's handshake) succeed);
/// 2. business codes, when configured for this status and the body is given: a failure
///    code fails even a 200, a success code succeeds;
/// 3. latency: a success slower than the threshold (the probe threshold for half-open
///    probes) fails. Ignored responses stay ignored.
///
/// With gRPC rules ([`HttpJudgeBuilder::grpc`], config key `grpc`), a gRPC response (a
/// 200 of content type `application/grpc`, [`crate::is_grpc_response`]) is judged by its
/// `grpc-status` instead of rules 1 and 2 ([`GrpcJudge`]), then by latency (a slow `OK`
/// fails); any other status is judged by the HTTP rules.
///
/// ```
/// use breakerbox_http::HttpJudge;
/// use breakerbox::Verdict;
/// use http::{HeaderMap, StatusCode};
/// use std::time::Duration;
///
/// let judge = HttpJudge::builder()
///     .client_errors(Verdict::Failure)
///     .business_pointer("/error_code")
///     .business_failure_codes(["E001", "E002"])
///     .slow_threshold(Duration::from_millis(800))
///     .build()?;
/// let headers = HeaderMap::new();
/// let fast = Duration::from_millis(20);
///
/// let j = judge.judge_response(StatusCode::OK, &headers, Some(br#"{"error_code":"E001"}"#), fast, false);
/// assert_eq!((j.verdict, j.reason.as_ref()), (Verdict::Failure, "business code E001"));
///
/// let j = judge.judge_status(StatusCode::OK, &headers, Duration::from_millis(1200), false);
/// assert_eq!((j.verdict, j.reason.as_ref()), (Verdict::Failure, "slow 1.2s > 800ms"));
///
/// let j = judge.judge_status(StatusCode::NOT_FOUND, &headers, fast, false);
/// assert_eq!(j.verdict, Verdict::Failure);
/// # Ok::<(), breakerbox_http::HttpJudgeError>(())
/// ```
#[derive(Clone, Debug)]
pub struct HttpJudge {
    table: StatusTable,
    business: Option<BusinessRule>,
    slow: Option<Duration>,
    probe_slow: Option<Duration>,
    honor_retry_after: bool,
    body_cap: usize,
    grpc: Option<GrpcJudge>,
}

impl Default for HttpJudge {
    /// The defaults: status rules only, no latency rule, no business codes.
    fn default() -> Self {
        HttpJudge {
            table: StatusTable::new(&Default::default()),
            business: None,
            slow: None,
            probe_slow: None,
            honor_retry_after: false,
            body_cap: DEFAULT_BODY_CAP,
            grpc: None,
        }
    }
}

impl HttpJudge {
    /// A builder starting from the defaults.
    pub fn builder() -> HttpJudgeBuilder {
        HttpJudgeBuilder::default()
    }

    /// A judge from a config; errors name the offending key and value.
    pub fn from_config(config: HttpJudgeConfig) -> Result<HttpJudge, HttpJudgeError> {
        let mut rules = config.status;
        for (class, verdict) in [(4, config.client_errors), (5, config.server_errors)] {
            if let Some(verdict) = verdict {
                rules
                    .entry(crate::StatusSelector::Class(class))
                    .or_insert(verdict);
            }
        }
        for (key, value) in [
            ("slow_threshold", config.slow_threshold),
            ("probe_slow_threshold", config.probe_slow_threshold),
        ] {
            if value == Some(Duration::ZERO) {
                return Err(HttpJudgeError::new(
                    key,
                    "0s",
                    "must be more than zero (leave it out to judge no latency)",
                ));
            }
        }
        if let (Some(slow), Some(probe)) = (config.slow_threshold, config.probe_slow_threshold) {
            if probe > slow {
                let probe = HumanDuration(probe).to_string();
                return Err(HttpJudgeError::new(
                    "probe_slow_threshold",
                    probe.clone(),
                    format!(
                        "{probe} is more lenient than slow_threshold {} (a probe threshold must be stricter)",
                        HumanDuration(slow)
                    ),
                ));
            }
        }
        let body_cap = config.body_cap.unwrap_or(DEFAULT_BODY_CAP);
        if body_cap == 0 {
            return Err(HttpJudgeError::new(
                "body_cap",
                "0",
                "must be at least 1 byte",
            ));
        }
        let business = config.business.map(BusinessRule::new).transpose()?;
        Ok(HttpJudge {
            table: StatusTable::new(&rules),
            business,
            slow: config.slow_threshold,
            probe_slow: config.probe_slow_threshold,
            honor_retry_after: config.honor_retry_after,
            body_cap,
            grpc: config.grpc.as_ref().map(GrpcJudge::new),
        })
    }

    /// The verdict of the status rules alone.
    #[inline]
    pub fn status_verdict(&self, status: StatusCode) -> Verdict {
        self.table.verdict(status.as_u16())
    }

    /// Judges a response from its status, headers and latency, without its body.
    /// `probe` says whether the call was a half-open probe (stricter latency threshold).
    #[inline]
    pub fn judge_status(
        &self,
        status: StatusCode,
        headers: &HeaderMap,
        latency: Duration,
        probe: bool,
    ) -> Judgement {
        self.judge_response(status, headers, None, latency, probe)
    }

    /// Judges a response. `body` holds the body when it was read (at most
    /// [`HttpJudge::body_cap`] bytes); `None` when it was not read, was bigger than the cap
    /// or could not be read: the response is then judged without it.
    ///
    /// A gRPC response (with gRPC rules) is judged by the `grpc-status` of its headers: a
    /// trailers-only response carries it there; one whose status comes in its trailers is
    /// judged `grpc-status missing` here, so give the trailers to [`HttpJudge::judge_grpc`]
    /// or drive an [`Exchange`](crate::Exchange), which waits for them.
    ///
    /// This judges a whole exchange in one call; adapters that do I/O drive an
    /// [`Exchange`](crate::Exchange) instead ([`HttpJudge::exchange`]), which reads the
    /// body only when a rule needs it and settles latency and body errors the same way
    /// for every adapter.
    pub fn judge_response(
        &self,
        status: StatusCode,
        headers: &HeaderMap,
        body: Option<&[u8]>,
        latency: Duration,
        probe: bool,
    ) -> Judgement {
        if self.is_grpc(status, headers) {
            return self.judge_grpc(Some(headers), latency, probe);
        }
        let retry_after = self.retry_hint(status, headers);
        self.judge_parts(status, retry_after, body, latency, probe)
    }

    /// The gRPC rules, when gRPC responses are judged by their `grpc-status`.
    #[inline]
    pub fn grpc(&self) -> Option<&GrpcJudge> {
        self.grpc.as_ref()
    }

    /// Whether a response with this head is judged by its `grpc-status`: the judge has
    /// gRPC rules and the response is a gRPC one ([`crate::is_grpc_response`]).
    #[inline]
    pub fn is_grpc(&self, status: StatusCode, headers: &HeaderMap) -> bool {
        self.grpc.is_some() && is_grpc_response(status, headers)
    }

    /// Judges a gRPC call that ended with `trailers` (the headers of a trailers-only
    /// response; `None` when the stream ended without trailers) and whose head came after
    /// `latency`: the code's verdict ([`GrpcJudge::judge_trailers`], with the judge's gRPC
    /// rules or else the defaults), then the latency rule (a slow `OK` fails).
    ///
    /// ```
    /// use breakerbox_http::HttpJudge;
    /// use breakerbox::Verdict;
    /// use http::HeaderMap;
    /// use std::time::Duration;
    ///
    /// let judge = HttpJudge::builder().grpc(true).slow_threshold(Duration::from_millis(500)).build()?;
    /// let mut trailers = HeaderMap::new();
    /// trailers.insert("grpc-status", "0".parse()?);
    /// let j = judge.judge_grpc(Some(&trailers), Duration::from_millis(20), false);
    /// assert_eq!((j.verdict, j.reason.as_ref()), (Verdict::Success, "grpc OK"));
    /// let j = judge.judge_grpc(Some(&trailers), Duration::from_secs(2), false);
    /// assert_eq!((j.verdict, j.reason.as_ref()), (Verdict::Failure, "slow 2s > 500ms"));
    /// trailers.insert("grpc-status", "5".parse()?);
    /// let j = judge.judge_grpc(Some(&trailers), Duration::from_millis(20), false);
    /// assert_eq!((j.verdict, j.reason.as_ref()), (Verdict::Ignore, "grpc NOT_FOUND"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn judge_grpc(
        &self,
        trailers: Option<&HeaderMap>,
        latency: Duration,
        probe: bool,
    ) -> Judgement {
        self.judge_grpc_call(trailers, latency, probe, None, latency)
    }

    /// [`HttpJudge::judge_grpc`] of a call that carried the caller's own `deadline`
    /// ([`crate::caller_deadline`]) and ended `ended` after admission: a
    /// `DEADLINE_EXCEEDED` at or after that deadline is the caller's budget running out,
    /// a failure only when the deadline is over the slow-call threshold for the call
    /// (`crate::grpc` module docs, "deadline").
    pub(crate) fn judge_grpc_call(
        &self,
        trailers: Option<&HeaderMap>,
        latency: Duration,
        probe: bool,
        deadline: Option<Duration>,
        ended: Duration,
    ) -> Judgement {
        let mut judgement = match &self.grpc {
            Some(grpc) => grpc.judge_trailers(trailers),
            None => GrpcJudge::default().judge_trailers(trailers),
        };
        crate::grpc::judge_past_deadline(
            &mut judgement,
            trailers,
            deadline,
            ended,
            self.slow_threshold_for(probe),
        );
        if self.honor_retry_after && judgement.verdict == Verdict::Failure {
            judgement.retry_after = trailers.and_then(retry_pushback);
        }
        self.judge_latency(&mut judgement, latency, probe);
        judgement
    }

    /// Rule 3: a success slower than the threshold fails.
    fn judge_latency(&self, judgement: &mut Judgement, latency: Duration, probe: bool) {
        if judgement.verdict == Verdict::Success {
            if let Some(threshold) = self.slow_threshold_for(probe) {
                if latency > threshold {
                    judgement.verdict = Verdict::Failure;
                    judgement.reason = format!(
                        "slow {} > {}",
                        HumanDuration(latency),
                        HumanDuration(threshold)
                    )
                    .into();
                }
            }
        }
    }

    /// The judgement of a response from what the judge keeps of its head (status and
    /// retry hint), its body if read, and its latency.
    pub(crate) fn judge_parts(
        &self,
        status: StatusCode,
        retry_after: Option<Duration>,
        body: Option<&[u8]>,
        latency: Duration,
        probe: bool,
    ) -> Judgement {
        let code = status.as_u16();
        let mut judgement = Judgement::new(self.table.verdict(code), status_reason(code));
        if let (Some(rule), Some(body)) = (&self.business, body) {
            if body.len() <= self.body_cap && rule.applies_to(code) {
                if let Some((verdict, reason)) = rule.judge(body) {
                    judgement.verdict = verdict;
                    judgement.reason = reason;
                }
            }
        }
        self.judge_latency(&mut judgement, latency, probe);
        judgement.retry_after = retry_after;
        judgement
    }

    /// The server's `Retry-After` on a 429 or 503, when the judge honours it.
    pub(crate) fn retry_hint(&self, status: StatusCode, headers: &HeaderMap) -> Option<Duration> {
        let code = status.as_u16();
        if self.honor_retry_after && (code == 429 || code == 503) {
            retry_after(headers)
        } else {
            None
        }
    }

    /// Judges a call that got no usable response: always a failure, with the error's
    /// reason ([`TransportError::reason`]).
    pub fn judge_transport(&self, error: TransportError, _latency: Duration) -> Judgement {
        Judgement::new(Verdict::Failure, error.reason())
    }

    /// Whether the body of a response with `status` would be judged: true only when
    /// business codes are configured for this status. Adapters read bodies only then.
    #[inline]
    pub fn wants_body(&self, status: StatusCode) -> bool {
        self.business
            .as_ref()
            .is_some_and(|rule| rule.applies_to(status.as_u16()))
    }

    /// Whether any rule may need a response body (business codes are configured). When
    /// false, every exchange is judged from its head.
    #[inline]
    pub fn reads_bodies(&self) -> bool {
        self.business.is_some()
    }

    /// Starts judging one exchange, as a half-open probe when `probe` is true: the
    /// sans-IO state object every adapter drives (head, then the body only if a rule
    /// needs it). See [`Exchange`](crate::Exchange).
    #[inline]
    pub fn exchange(&self, probe: bool) -> crate::Exchange<&HttpJudge> {
        crate::Exchange::new(self, probe)
    }

    /// How many bytes of body to read at most (default 64 KiB).
    #[inline]
    pub fn body_cap(&self) -> usize {
        self.body_cap
    }

    /// The latency threshold for a normal call (`probe == false`) or a half-open probe.
    #[inline]
    pub fn slow_threshold_for(&self, probe: bool) -> Option<Duration> {
        if probe {
            self.probe_slow.or(self.slow)
        } else {
            self.slow
        }
    }

    /// Whether any latency rule is configured.
    pub fn uses_latency(&self) -> bool {
        self.slow.is_some() || self.probe_slow.is_some()
    }
}

/// `Retry-After` in delta-seconds. An HTTP-date is not understood: the judge has no wall
/// clock (library code reads time only from a breaker's `Clock`, which is monotonic).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    unsigned_header(headers, http::header::RETRY_AFTER.as_str()).map(Duration::from_secs)
}

/// `grpc-retry-pushback-ms` (gRPC's A6: milliseconds, a non-negative integer), gRPC's
/// `Retry-After`. A negative or malformed value (gRPC's "do not retry") gives no hint: a
/// breaker has no "never" to stay open for.
fn retry_pushback(trailers: &HeaderMap) -> Option<Duration> {
    unsigned_header(trailers, "grpc-retry-pushback-ms").map(Duration::from_millis)
}

/// Header `name` as a plain unsigned integer: digits only (no sign, no fraction), spaces
/// around them allowed.
fn unsigned_header(headers: &HeaderMap, name: &str) -> Option<u64> {
    let text = headers.get(name)?.to_str().ok()?.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<u64>().ok()
}

/// A response is judged from its status and the latency (no body, not as a probe); an
/// error is a failure. A gRPC response whose status comes in its trailers cannot be
/// judged from the response alone (`grpc-status missing`): use the tower layer's HTTP
/// form, which waits for the trailers. Adapters that know more (body, probe, transport kind) call the
/// `judge_*` methods instead.
impl<B, E> Judge<http::Response<B>, E> for HttpJudge {
    fn judge(&self, outcome: &Result<http::Response<B>, E>, latency: Duration) -> Verdict {
        match outcome {
            Ok(response) => {
                self.judge_status(response.status(), response.headers(), latency, false)
                    .verdict
            }
            Err(_) => Verdict::Failure,
        }
    }

    fn uses_latency(&self) -> bool {
        HttpJudge::uses_latency(self)
    }
}
