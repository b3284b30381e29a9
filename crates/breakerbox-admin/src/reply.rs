//! The service's answers: small JSON bodies, text, the page. None is cached.

use bytes::Bytes;
use http::header::{
    HeaderValue, ALLOW, CACHE_CONTROL, CONTENT_TYPE, WWW_AUTHENTICATE, X_CONTENT_TYPE_OPTIONS,
};
use http::{Response, StatusCode};
use http_body_util::Full;
use serde_json::{json, Value};

use crate::access::Denied;
use crate::AdminBody;

/// A response with `status`, `content_type` and `body`.
pub(crate) fn text(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<AdminBody> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

/// A JSON response with `status`.
pub(crate) fn json(status: StatusCode, value: &Value) -> Response<AdminBody> {
    text(status, "application/json", value.to_string())
}

/// `{"error": error, "breaker": name, "detail": ...}` with `status`.
pub(crate) fn error(
    status: StatusCode,
    error: &str,
    breaker: Option<&str>,
    detail: Option<&str>,
) -> Response<AdminBody> {
    let mut body = json!({ "error": error });
    if let Some(breaker) = breaker {
        body["breaker"] = json!(breaker);
    }
    if let Some(detail) = detail {
        body["detail"] = json!(detail);
    }
    json(status, &body)
}

/// 400 naming the request parameter that was wrong.
pub(crate) fn bad_parameter(parameter: &str, detail: &str) -> Response<AdminBody> {
    json(
        StatusCode::BAD_REQUEST,
        &json!({
            "error": "bad_request",
            "parameter": parameter,
            "detail": format!("{parameter}: {detail}"),
        }),
    )
}

/// 405 with the methods the resource takes.
pub(crate) fn method_not_allowed(allow: &'static str) -> Response<AdminBody> {
    let mut response = error(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        None,
        Some(&format!("use {allow}")),
    );
    response
        .headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    response
}

/// The answer to a refused request: 401 with a challenge, or 403.
pub(crate) fn denied(denied: Denied) -> Response<AdminBody> {
    match denied {
        Denied::Unauthorized(why) => {
            let mut response = error(StatusCode::UNAUTHORIZED, "unauthorized", None, Some(why));
            response.headers_mut().insert(
                WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"breakerbox admin\""),
            );
            response
        }
        Denied::Forbidden(why) => error(StatusCode::FORBIDDEN, "forbidden", None, Some(why)),
    }
}

/// 404 for a path the service does not serve.
pub(crate) fn not_found(path: &str) -> Response<AdminBody> {
    error(StatusCode::NOT_FOUND, "not_found", None, Some(path))
}
