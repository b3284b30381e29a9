//! A gRPC call's own deadline (`grpc-timeout`), and what a `DEADLINE_EXCEEDED` that comes
//! once it has passed says of the server.
//!
//! A gRPC client sends its deadline with the call; the server gives up when it passes and
//! answers `DEADLINE_EXCEEDED`. That answer is a failure by default (the server did not
//! answer in time), but when it comes at or after the caller's own deadline, it says only
//! that the server was slower than *this caller* was willing to wait: a client with a
//! deadline of one nanosecond would otherwise fail every call and trip the breaker of a
//! healthy server. Such an answer is judged as a call of the deadline's length instead: a
//! failure when the deadline is over the slow-call threshold that applies (the server was
//! too slow by the dependency's own measure), else ignored, like a call the caller gave up
//! on. A `DEADLINE_EXCEEDED` that comes *before* the caller's deadline is the server's own
//! (a deadline of its downstream): judged as configured.

use std::time::Duration;

use breakerbox::Verdict;
use http::HeaderMap;

use super::{GrpcCode, GrpcStatus};
use crate::{HumanDuration, Judgement};

/// The deadline a gRPC request carries in its `grpc-timeout` header: 1 to 8 ASCII digits
/// and a unit (`H`ours, `M`inutes, `S`econds, `m`illiseconds, `u` microseconds, `n`
/// nanoseconds), as gRPC over HTTP/2 defines it. `None` without one, or when it is not of
/// that form (a server ignores a malformed deadline too).
///
/// ```
/// use breakerbox_http::caller_deadline;
/// use http::HeaderMap;
/// use std::time::Duration;
///
/// let mut request = HeaderMap::new();
/// assert_eq!(caller_deadline(&request), None);
/// request.insert("grpc-timeout", "250m".parse()?);
/// assert_eq!(caller_deadline(&request), Some(Duration::from_millis(250)));
/// request.insert("grpc-timeout", "1n".parse()?);
/// assert_eq!(caller_deadline(&request), Some(Duration::from_nanos(1)));
/// request.insert("grpc-timeout", "123456789S".parse()?); // 9 digits
/// assert_eq!(caller_deadline(&request), None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn caller_deadline(headers: &HeaderMap) -> Option<Duration> {
    let bytes = headers.get("grpc-timeout")?.as_bytes();
    let (unit, digits) = bytes.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    // At most 8 digits: below 10^8, so no unit below overflows.
    let value = digits
        .iter()
        .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    Some(match unit {
        b'H' => Duration::from_secs(value * 3600),
        b'M' => Duration::from_secs(value * 60),
        b'S' => Duration::from_secs(value),
        b'm' => Duration::from_millis(value),
        b'u' => Duration::from_micros(value),
        b'n' => Duration::from_nanos(value),
        _ => return None,
    })
}

/// When the call ended with the server's `DEADLINE_EXCEEDED` (`trailers`) at or after the
/// caller's `deadline` (`ended` after admission) and it was judged a failure: a failure
/// only when `deadline` is over `threshold` (the slow-call threshold that applies), else
/// ignored with the reason `grpc DEADLINE_EXCEEDED after the caller's deadline of D`.
pub(crate) fn judge_past_deadline(
    judgement: &mut Judgement,
    trailers: Option<&HeaderMap>,
    deadline: Option<Duration>,
    ended: Duration,
    threshold: Option<Duration>,
) {
    let Some(deadline) = deadline else {
        return;
    };
    let exceeded = trailers.map(GrpcStatus::from_headers)
        == Some(GrpcStatus::Code(GrpcCode::DeadlineExceeded));
    if judgement.verdict != Verdict::Failure || !exceeded || ended < deadline {
        return;
    }
    if threshold.is_some_and(|threshold| deadline > threshold) {
        return;
    }
    judgement.verdict = Verdict::Ignore;
    judgement.reason = format!(
        "grpc DEADLINE_EXCEEDED after the caller's deadline of {}",
        HumanDuration(deadline)
    )
    .into();
    judgement.retry_after = None;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeout(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Ok(value) = value.parse() {
            headers.insert("grpc-timeout", value);
        }
        headers
    }

    #[test]
    fn every_unit_of_grpc_timeout_is_read() {
        for (text, expected) in [
            ("2H", Duration::from_secs(7200)),
            ("3M", Duration::from_secs(180)),
            ("4S", Duration::from_secs(4)),
            ("5m", Duration::from_millis(5)),
            ("6u", Duration::from_micros(6)),
            ("7n", Duration::from_nanos(7)),
            ("0m", Duration::ZERO),
            ("00000010S", Duration::from_secs(10)),
            ("99999999H", Duration::from_secs(99_999_999 * 3600)),
        ] {
            assert_eq!(caller_deadline(&timeout(text)), Some(expected), "{text}");
        }
    }

    #[test]
    fn a_malformed_grpc_timeout_is_no_deadline() {
        for text in [
            "",
            "S",
            "5",
            "5s",
            "5 S",
            " 5S",
            "-5S",
            "+5S",
            "5.0S",
            "123456789n",
            "5SS",
            "5h",
            "٣S",
        ] {
            assert_eq!(caller_deadline(&timeout(text)), None, "{text:?}");
        }
        assert_eq!(caller_deadline(&HeaderMap::new()), None);
    }
}
