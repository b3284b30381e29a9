//! Reading `grpc-status` and `grpc-message` from a header map (the trailers, or the
//! headers of a trailers-only response).

use std::borrow::Cow;

use http::HeaderMap;

use super::GrpcCode;

/// The reason of a gRPC response whose trailers have no `grpc-status`.
pub const MISSING_REASON: &str = "grpc-status missing";
/// The reason of a gRPC response whose `grpc-status` is not a number.
pub const INVALID_REASON: &str = "grpc-status invalid";

/// The most bytes of `grpc-message` kept in a reason (cut on a character boundary).
pub(crate) const MESSAGE_CAP: usize = 128;

/// What a header map says of a gRPC call's status.
///
/// ```
/// use breakerbox_http::{GrpcCode, GrpcStatus};
/// use http::HeaderMap;
///
/// let mut trailers = HeaderMap::new();
/// assert_eq!(GrpcStatus::from_headers(&trailers), GrpcStatus::Missing);
/// trailers.insert("grpc-status", "14".parse()?);
/// assert_eq!(GrpcStatus::from_headers(&trailers), GrpcStatus::Code(GrpcCode::Unavailable));
/// // gRPC clients treat a number they do not know as UNKNOWN.
/// trailers.insert("grpc-status", "42".parse()?);
/// assert_eq!(GrpcStatus::from_headers(&trailers), GrpcStatus::Code(GrpcCode::Unknown));
/// trailers.insert("grpc-status", "unavailable".parse()?);
/// assert_eq!(GrpcStatus::from_headers(&trailers), GrpcStatus::Invalid);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum GrpcStatus {
    /// A status code. A number that is none of the 17 codes is [`GrpcCode::Unknown`], as
    /// gRPC clients read it.
    Code(GrpcCode),
    /// No `grpc-status` at all.
    Missing,
    /// A `grpc-status` that is not a decimal number (the wire form is the number only).
    Invalid,
}

impl GrpcStatus {
    /// The status in `headers` (the first `grpc-status` value).
    pub fn from_headers(headers: &HeaderMap) -> GrpcStatus {
        let Some(value) = headers.get("grpc-status") else {
            return GrpcStatus::Missing;
        };
        let bytes = value.as_bytes();
        if bytes.is_empty() || !bytes.iter().all(u8::is_ascii_digit) {
            return GrpcStatus::Invalid;
        }
        // All digits: only an overflow fails, and such a number is no code either.
        let code = std::str::from_utf8(bytes)
            .ok()
            .and_then(|text| text.parse::<u32>().ok())
            .and_then(GrpcCode::from_number)
            .unwrap_or(GrpcCode::Unknown);
        GrpcStatus::Code(code)
    }

    /// Whether `headers` carry a `grpc-status` (a trailers-only response does in its head).
    pub fn is_in(headers: &HeaderMap) -> bool {
        headers.contains_key("grpc-status")
    }
}

/// The reason for `code`: `grpc UNAVAILABLE`, followed by `: ` and the decoded
/// `grpc-message` when `headers` carry a non-empty one (at most [`MESSAGE_CAP`] bytes).
pub(crate) fn code_reason(code: GrpcCode, headers: &HeaderMap) -> Cow<'static, str> {
    let message = headers
        .get("grpc-message")
        .map(|value| decode_message(value.as_bytes()))
        .filter(|message| !message.is_empty());
    match message {
        Some(message) => format!("{}: {message}", code.reason()).into(),
        None => code.reason().into(),
    }
}

/// `grpc-message` is percent-encoded UTF-8; invalid escapes are kept as written, invalid
/// UTF-8 replaced, control characters shown as spaces, and the text cut at the cap.
fn decode_message(raw: &[u8]) -> String {
    let mut bytes = Vec::with_capacity(raw.len().min(MESSAGE_CAP * 3));
    // Each step takes at least one byte off `rest`, so the loop ends whatever the input.
    let mut rest = raw;
    while let Some((&byte, tail)) = rest.split_first() {
        let escaped = match (byte, tail) {
            (b'%', [hi, lo, ..]) => hex(*hi).zip(hex(*lo)).map(|(h, l)| h * 16 + l),
            _ => None,
        };
        match escaped {
            Some(decoded) => {
                bytes.push(decoded);
                rest = tail.get(2..).unwrap_or_default();
            }
            None => {
                bytes.push(byte);
                rest = tail;
            }
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    let mut out = String::with_capacity(text.len().min(MESSAGE_CAP));
    for c in text.chars() {
        if out.len() + c.len_utf8() > MESSAGE_CAP {
            break;
        }
        out.push(if c.is_control() { ' ' } else { c });
    }
    out.trim().to_owned()
}

fn hex(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(name: &'static str, value: &'static [u8]) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert(
            name,
            http::HeaderValue::from_bytes(value).unwrap_or_else(|_| panic!("{value:?}")),
        );
        map
    }

    #[test]
    fn malformed_statuses_are_invalid() {
        for bad in [&b""[..], b" 14", b"-1", b"1.0", b"0x0e", b"UNAVAILABLE"] {
            assert_eq!(
                GrpcStatus::from_headers(&with("grpc-status", bad)),
                GrpcStatus::Invalid,
                "{bad:?}"
            );
        }
        let huge = with("grpc-status", b"99999999999999999999999");
        assert_eq!(
            GrpcStatus::from_headers(&huge),
            GrpcStatus::Code(GrpcCode::Unknown)
        );
    }

    #[test]
    fn the_message_is_decoded_and_capped() {
        let headers = with("grpc-message", b"no%20backend%3A%20db-1%zz");
        assert_eq!(
            code_reason(GrpcCode::Unavailable, &headers),
            "grpc UNAVAILABLE: no backend: db-1%zz"
        );
        let headers = with("grpc-message", b"caf%C3%A9%0Aok");
        assert_eq!(
            code_reason(GrpcCode::Internal, &headers),
            "grpc INTERNAL: caf\u{e9} ok"
        );
        let long = "x".repeat(1000);
        let mut headers = HeaderMap::new();
        headers.insert("grpc-message", long.parse().unwrap_or_else(|_| panic!()));
        let reason = code_reason(GrpcCode::Internal, &headers);
        assert_eq!(reason.len(), "grpc INTERNAL: ".len() + MESSAGE_CAP);
        assert_eq!(code_reason(GrpcCode::Ok, &HeaderMap::new()), "grpc OK");
        assert_eq!(
            code_reason(GrpcCode::Ok, &with("grpc-message", b"")),
            "grpc OK"
        );
    }
}
