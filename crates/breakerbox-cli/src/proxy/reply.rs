//! The proxy's own answers: small JSON bodies.

use breakerbox::CircuitOpen;
use http::header::{HeaderValue, CONNECTION, CONTENT_TYPE, RETRY_AFTER};
use http::{Response, StatusCode};
use serde_json::json;

use super::body::ProxyBody;
use super::config::Limits;
use super::grpc_reply::OwnReply;
use super::server::Hangup;
use super::upload::ClientFault;

/// A JSON response with `status`, marked as the proxy's own.
pub fn json(status: StatusCode, value: &serde_json::Value) -> Response<ProxyBody> {
    let mut response = Response::new(ProxyBody::full(value.to_string()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    // A gRPC client gets it as a gRPC answer (`grpc_reply::adapt`).
    response.extensions_mut().insert(OwnReply);
    response
}

/// `{"error": error, "upstream": name, ...}` with `status`.
pub fn error(
    status: StatusCode,
    error: &str,
    upstream: Option<&str>,
    detail: Option<&str>,
) -> Response<ProxyBody> {
    let mut body = json!({ "error": error });
    if let Some(upstream) = upstream {
        body["upstream"] = json!(upstream);
    }
    if let Some(detail) = detail {
        body["detail"] = json!(detail);
    }
    json(status, &body)
}

/// 503 while a breaker is open (or, rule 23, ramping up after a recovery: `reason`
/// `ramp`): `Retry-After` in whole seconds (rounded up) when known.
pub fn circuit_open(upstream: &str, open: &CircuitOpen) -> Response<ProxyBody> {
    let retry_after = open.retry_after();
    let ms = retry_after.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let mut response = json(
        StatusCode::SERVICE_UNAVAILABLE,
        &json!({
            "error": "circuit_open",
            "upstream": upstream,
            "retry_after_ms": ms,
            "reason": open.reason().as_str(),
        }),
    );
    if let Some(d) = retry_after {
        let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(secs.max(1)));
    }
    response
}

/// 400 for a malformed request, closing the connection.
pub fn bad_request(why: &str) -> Response<ProxyBody> {
    let mut response = error(StatusCode::BAD_REQUEST, "bad_request", None, Some(why));
    response
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

/// The answer to a request its client spoiled; `Hangup` when the client is gone.
pub fn client_fault(
    fault: ClientFault,
    upstream: &str,
    limits: &Limits,
) -> Result<Response<ProxyBody>, Hangup> {
    match fault {
        ClientFault::Gone => Err(Hangup),
        _ => Ok(client_fault_response(fault, Some(upstream), limits)),
    }
}

/// The answer to a request its client spoiled (400, 408 or 413), closing the connection.
pub fn client_fault_response(
    fault: ClientFault,
    upstream: Option<&str>,
    limits: &Limits,
) -> Response<ProxyBody> {
    let (status, detail) = match fault {
        ClientFault::Stalled => (
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request body stalled (client_body_timeout is {:?})",
                limits.client_body_timeout
            ),
        ),
        ClientFault::TooLarge => (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body exceeds {} bytes", limits.max_body_bytes),
        ),
        ClientFault::Malformed | ClientFault::Gone => (
            StatusCode::BAD_REQUEST,
            "malformed request body".to_string(),
        ),
    };
    let mut response = error(status, fault.as_str(), upstream, Some(&detail));
    // The rest of the request body is unread: this connection cannot carry another.
    response
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    response
}
