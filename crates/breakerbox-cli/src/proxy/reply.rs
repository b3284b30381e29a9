//! The proxy's own answers: small JSON bodies.

use std::time::Duration;

use http::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use http::{Response, StatusCode};
use serde_json::json;

use super::body::ProxyBody;

/// A JSON response with `status`.
pub fn json(status: StatusCode, value: &serde_json::Value) -> Response<ProxyBody> {
    let mut response = Response::new(ProxyBody::full(value.to_string()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
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

/// 503 while a breaker is open: `Retry-After` in whole seconds (rounded up) when known.
pub fn circuit_open(upstream: &str, retry_after: Option<Duration>) -> Response<ProxyBody> {
    let ms = retry_after.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let mut response = json(
        StatusCode::SERVICE_UNAVAILABLE,
        &json!({ "error": "circuit_open", "upstream": upstream, "retry_after_ms": ms }),
    );
    if let Some(d) = retry_after {
        let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(secs.max(1)));
    }
    response
}
