//! The admin listener: `/status`, `/metrics`, the dashboard at `/`, and the trip and reset
//! actions, under the rules of [`Access`].

mod access;

use std::net::SocketAddr;
use std::sync::Arc;

use breakerbox::contract::Breaker;
use http::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE, WWW_AUTHENTICATE};
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::json;

use super::body::ProxyBody;
use super::forward::Proxy;
use super::{metrics, reply, status};

pub use access::{Access, Denied};

/// The dashboard page: no external assets, refreshes itself from `/status`.
const DASHBOARD: &str = include_str!("admin/dashboard.html");

/// The admin endpoints.
pub struct Admin {
    proxy: Arc<Proxy>,
    access: Access,
}

impl Admin {
    /// Admin endpoints over `proxy`, guarded by `access`.
    pub fn new(proxy: Arc<Proxy>, access: Access) -> Admin {
        Admin { proxy, access }
    }

    /// Handles one admin request from `peer`.
    pub async fn handle(
        &self,
        request: Request<Incoming>,
        peer: SocketAddr,
    ) -> Response<ProxyBody> {
        if let Err(why) = self.access.check_host(request.headers()) {
            return denied(why);
        }
        let path = request.uri().path();
        let method = request.method();
        match (method, path) {
            (&Method::GET, "/") | (&Method::GET, "/index.html") => text(
                StatusCode::OK,
                "text/html; charset=utf-8",
                DASHBOARD.to_string(),
            ),
            (&Method::GET, "/status") => {
                let mut r = reply::json(StatusCode::OK, &status::status(&self.proxy).await);
                r.headers_mut()
                    .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
                r
            }
            (&Method::GET, "/metrics") => {
                let phases: Vec<(&str, breakerbox::Phase)> = self
                    .proxy
                    .upstreams
                    .iter()
                    .map(|u| (u.config.name.as_str(), u.breaker.phase()))
                    .collect();
                text(
                    StatusCode::OK,
                    "text/plain; version=0.0.4; charset=utf-8",
                    metrics::render(&self.proxy.recorder, &phases),
                )
            }
            (_, p) if p.starts_with("/breakers/") => self.action(&request, peer).await,
            (_, "/" | "/status" | "/metrics") => reply::error(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                None,
                None,
            ),
            _ => reply::error(StatusCode::NOT_FOUND, "not_found", None, Some(path)),
        }
    }

    /// `POST /breakers/{name}/trip` and `POST /breakers/{name}/reset`.
    async fn action(&self, request: &Request<Incoming>, peer: SocketAddr) -> Response<ProxyBody> {
        let rest = &request.uri().path()["/breakers/".len()..];
        let Some((name, action)) = rest.split_once('/') else {
            return reply::error(StatusCode::NOT_FOUND, "not_found", None, None);
        };
        if !matches!(action, "trip" | "reset") {
            return reply::error(
                StatusCode::NOT_FOUND,
                "not_found",
                None,
                Some("actions: trip, reset"),
            );
        }
        if request.method() != Method::POST {
            return reply::error(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                None,
                Some("use POST"),
            );
        }
        if let Err(why) = self.access.check_action(request.headers(), peer.ip()) {
            return denied(why);
        }
        let Some(upstream) = self.proxy.upstreams.iter().find(|u| u.config.name == name) else {
            return reply::error(StatusCode::NOT_FOUND, "unknown_breaker", Some(name), None);
        };
        let done = match action {
            "trip" => super::guard::trip(&upstream.breaker).await,
            _ => super::guard::reset(&upstream.breaker).await,
        };
        match done {
            Ok(()) => reply::json(
                StatusCode::OK,
                &json!({ "ok": true, "breaker": name, "action": action, "phase": upstream.breaker.phase().as_str() }),
            ),
            Err(error) => reply::error(
                StatusCode::BAD_GATEWAY,
                "action_failed",
                Some(name),
                Some(&error),
            ),
        }
    }
}

/// The answer to a refused request: 401 with a challenge, or 403.
fn denied(denied: Denied) -> Response<ProxyBody> {
    match denied {
        Denied::Unauthorized(why) => {
            let mut r = reply::error(StatusCode::UNAUTHORIZED, "unauthorized", None, Some(why));
            r.headers_mut().insert(
                WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"breakerbox admin\""),
            );
            r
        }
        Denied::Forbidden(why) => reply::error(StatusCode::FORBIDDEN, "forbidden", None, Some(why)),
    }
}

fn text(status: StatusCode, content_type: &'static str, body: String) -> Response<ProxyBody> {
    let mut r = Response::new(ProxyBody::full(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}
