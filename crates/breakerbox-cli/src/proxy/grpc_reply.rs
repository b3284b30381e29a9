//! The proxy's own answers to gRPC clients (an open breaker, an overloaded or failed
//! upstream, no route...): gRPC clients read `grpc-status`, not JSON bodies, so they get
//! a trailers-only answer (HTTP 200, `content-type: application/grpc`) with the gRPC code
//! gRPC's own HTTP mapping gives the status (503, 502, 504 and 429: UNAVAILABLE; 404:
//! UNIMPLEMENTED; ...) and the JSON body, percent-encoded, as `grpc-message`; other
//! headers (`retry-after`) stay. Upstream answers are relayed untouched.

use http::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use http::{Request, Response, StatusCode, Version};
use http_body::Body as _;

use super::body::ProxyBody;

/// Marks a response as the proxy's own (see [`super::reply::json`]).
#[derive(Copy, Clone, Debug)]
pub struct OwnReply;

/// Whether `request` is a gRPC call (HTTP/2, `content-type: application/grpc...`).
pub fn is_grpc<B>(request: &Request<B>) -> bool {
    request.version() == Version::HTTP_2 && breakerbox_http::is_grpc_content_type(request.headers())
}

/// `response` for a gRPC client: the proxy's own answers become trailers-only gRPC ones.
pub fn adapt(response: Response<ProxyBody>) -> Response<ProxyBody> {
    if response.extensions().get::<OwnReply>().is_none() {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let code = code(parts.status);
    let message = match &body {
        ProxyBody::Full(Some(bytes)) => percent_encode(bytes),
        _ => percent_encode(parts.status.as_str().as_bytes()),
    };
    drop(body);
    parts.status = StatusCode::OK;
    let headers = &mut parts.headers;
    headers.remove(CONTENT_LENGTH);
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert("grpc-status", HeaderValue::from(code));
    if let Ok(value) = HeaderValue::from_str(&message) {
        headers.insert("grpc-message", value);
    }
    let response = Response::from_parts(parts, ProxyBody::empty());
    debug_assert!(response.body().is_end_stream());
    response
}

/// gRPC's code for an HTTP status (gRPC's `http-grpc-status-mapping`).
fn code(status: StatusCode) -> u16 {
    match status.as_u16() {
        400 => 13,             // INTERNAL
        401 => 16,             // UNAUTHENTICATED
        403 => 7,              // PERMISSION_DENIED
        404 => 12,             // UNIMPLEMENTED
        429 | 502..=504 => 14, // UNAVAILABLE
        _ => 2,                // UNKNOWN
    }
}

/// `grpc-message`'s encoding: printable ASCII but `%` as is, the rest as `%XX`.
fn percent_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_answers_become_trailers_only_grpc_answers_and_others_stay() {
        let mut own = super::super::reply::error(
            StatusCode::SERVICE_UNAVAILABLE,
            "circuit_open",
            Some("grpc"),
            None,
        );
        own.headers_mut()
            .insert("retry-after", HeaderValue::from(3));
        let adapted = adapt(own);
        assert_eq!(adapted.status(), 200);
        let h = adapted.headers();
        assert_eq!(h["grpc-status"], "14");
        assert_eq!(h["content-type"], "application/grpc");
        assert_eq!(h["retry-after"], "3");
        assert_eq!(
            h["grpc-message"],
            r#"{"error":"circuit_open","upstream":"grpc"}"#
        );
        assert!(adapted.body().is_end_stream());

        let relayed = Response::builder()
            .status(503)
            .body(ProxyBody::empty())
            .unwrap();
        assert_eq!(
            adapt(relayed).status(),
            503,
            "an upstream's answer is untouched"
        );
    }

    #[test]
    fn statuses_map_to_grpc_codes_and_messages_are_percent_encoded() {
        assert_eq!(code(StatusCode::NOT_FOUND), 12);
        assert_eq!(code(StatusCode::GATEWAY_TIMEOUT), 14);
        assert_eq!(code(StatusCode::PAYLOAD_TOO_LARGE), 2);
        assert_eq!(percent_encode("a%b\né".as_bytes()), "a%25b%0A%C3%A9");
    }
}
