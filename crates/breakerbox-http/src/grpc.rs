//! Judging gRPC calls by their `grpc-status`.
//!
//! A gRPC response is an HTTP/2 response with a `content-type` of `application/grpc`
//! (or `application/grpc+proto`, ...). Its status comes in the trailers after the
//! messages, or, in a *trailers-only* response (an error before any message), in the
//! headers. The HTTP judge ([`crate::HttpJudge`], with [`crate::HttpJudgeConfig::grpc`]
//! set) judges such a response by that code, and the [`crate::Exchange`] waits for the
//! trailers when the headers have none ([`crate::AfterHead::AwaitTrailers`]).

mod code;
mod config;
mod deadline;
mod status;
mod table;

pub use code::GrpcCode;
pub(crate) use config::switch;
pub use config::GrpcConfig;
pub use deadline::caller_deadline;
pub(crate) use deadline::judge_past_deadline;
pub use status::{GrpcStatus, INVALID_REASON, MISSING_REASON};
pub use table::default_verdict;

use breakerbox::Verdict;
use http::{header, HeaderMap, StatusCode};

use crate::Judgement;
use table::GrpcTable;

/// The gRPC rules resolved: a verdict for each of the 17 codes (configured, else
/// [`default_verdict`]), and how a missing or malformed `grpc-status` counts (a failure:
/// a server that ends a call without a valid status broke the protocol).
///
/// ```
/// use breakerbox_http::{GrpcCode, GrpcConfig, GrpcJudge};
/// use breakerbox::Verdict;
/// use http::HeaderMap;
///
/// let mut config = GrpcConfig::default();
/// config.codes.insert(GrpcCode::NotFound, Verdict::Failure);
/// let judge = GrpcJudge::new(&config);
/// assert_eq!(judge.verdict(GrpcCode::NotFound), Verdict::Failure);
/// assert_eq!(judge.verdict(GrpcCode::Unavailable), Verdict::Failure);
/// assert_eq!(judge.verdict(GrpcCode::InvalidArgument), Verdict::Ignore);
///
/// let mut trailers = HeaderMap::new();
/// trailers.insert("grpc-status", "14".parse()?);
/// trailers.insert("grpc-message", "no%20backend".parse()?);
/// let j = judge.judge_trailers(Some(&trailers));
/// assert_eq!((j.verdict, j.reason.as_ref()), (Verdict::Failure, "grpc UNAVAILABLE: no backend"));
/// let j = judge.judge_trailers(None);
/// assert_eq!((j.verdict, j.reason.as_ref()), (Verdict::Failure, "grpc-status missing"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct GrpcJudge {
    table: GrpcTable,
}

impl Default for GrpcJudge {
    /// The defaults ([`default_verdict`]).
    fn default() -> Self {
        GrpcJudge::new(&GrpcConfig::default())
    }
}

impl GrpcJudge {
    /// The rules of `config` over the defaults.
    pub fn new(config: &GrpcConfig) -> GrpcJudge {
        GrpcJudge {
            table: GrpcTable::new(&config.codes),
        }
    }

    /// The verdict of `code`.
    #[inline]
    pub fn verdict(&self, code: GrpcCode) -> Verdict {
        self.table.verdict(code)
    }

    /// Judges the status in `trailers` (the headers of a trailers-only response), `None`
    /// when the call ended without trailers: the code's verdict with the reason
    /// `grpc CODE` (and `: message` when `grpc-message` says something); a failure with
    /// [`MISSING_REASON`] or [`INVALID_REASON`] when there is no valid status. Latency is
    /// not judged here ([`crate::HttpJudge::judge_grpc`] does).
    pub fn judge_trailers(&self, trailers: Option<&HeaderMap>) -> Judgement {
        let Some(trailers) = trailers else {
            return Judgement::new(Verdict::Failure, MISSING_REASON);
        };
        match GrpcStatus::from_headers(trailers) {
            GrpcStatus::Code(code) => {
                Judgement::new(self.verdict(code), status::code_reason(code, trailers))
            }
            GrpcStatus::Missing => Judgement::new(Verdict::Failure, MISSING_REASON),
            GrpcStatus::Invalid => Judgement::new(Verdict::Failure, INVALID_REASON),
        }
    }
}

/// Whether a response is a gRPC one to be judged by its `grpc-status`: HTTP status 200
/// and a `content-type` of `application/grpc` or `application/grpc+...`. Any other
/// status is judged by the HTTP rules (a proxy or load balancer answered, not the gRPC
/// server), and so is a 200 of another content type.
pub fn is_grpc_response(status: StatusCode, headers: &HeaderMap) -> bool {
    status == StatusCode::OK && is_grpc_content_type(headers)
}

/// Whether a request's or response's `content-type` is gRPC's: `application/grpc`, or
/// `application/grpc+...` / `application/grpc;...`, in any case (not `grpc-web`).
pub fn is_grpc_content_type(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE) else {
        return false;
    };
    let bytes = value.as_bytes();
    let prefix = b"application/grpc";
    bytes.len() >= prefix.len()
        && bytes[..prefix.len()].eq_ignore_ascii_case(prefix)
        && matches!(bytes.get(prefix.len()), None | Some(b'+' | b';'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(content_type: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            content_type.parse().unwrap_or_else(|_| panic!()),
        );
        headers
    }

    #[test]
    fn only_a_200_of_a_grpc_content_type_is_a_grpc_response() {
        for yes in [
            "application/grpc",
            "application/grpc+proto",
            "Application/GRPC",
            "application/grpc;charset=utf-8",
        ] {
            assert!(is_grpc_response(StatusCode::OK, &typed(yes)), "{yes}");
        }
        for no in [
            "application/grpc-web",
            "application/json",
            "application/grp",
            "text/plain",
        ] {
            assert!(!is_grpc_response(StatusCode::OK, &typed(no)), "{no}");
        }
        assert!(!is_grpc_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &typed("application/grpc")
        ));
        assert!(!is_grpc_response(StatusCode::OK, &HeaderMap::new()));
    }
}
