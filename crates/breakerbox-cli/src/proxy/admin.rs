//! The admin listener: `/status`, `/metrics`, the dashboard at `/`, and the trip and reset
//! actions (loopback only, or with the configured token from anyone).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use http::header::{HeaderValue, AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE};
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::json;

use super::body::ProxyBody;
use super::forward::Proxy;
use super::{metrics, reply, status};

/// The dashboard page: no external assets, refreshes itself from `/status`.
const DASHBOARD: &str = include_str!("admin/dashboard.html");

/// The admin endpoints.
pub struct Admin {
    proxy: Arc<Proxy>,
    token: Option<String>,
}

impl Admin {
    /// Admin endpoints over `proxy`; with a `token`, actions need `Authorization: Bearer TOKEN`.
    pub fn new(proxy: Arc<Proxy>, token: Option<String>) -> Admin {
        Admin { proxy, token }
    }

    /// Handles one admin request from `peer`.
    pub async fn handle(
        &self,
        request: Request<Incoming>,
        peer: SocketAddr,
    ) -> Response<ProxyBody> {
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
                    .map(|u| (u.config.name.as_str(), u.guard.phase()))
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
        if let Err(why) = self.authorize(request, peer) {
            return reply::error(StatusCode::FORBIDDEN, "forbidden", None, Some(why));
        }
        let Some(upstream) = self.proxy.upstreams.iter().find(|u| u.config.name == name) else {
            return reply::error(StatusCode::NOT_FOUND, "unknown_breaker", Some(name), None);
        };
        let done = match action {
            "trip" => upstream.guard.trip().await,
            _ => upstream.guard.reset().await,
        };
        match done {
            Ok(()) => reply::json(
                StatusCode::OK,
                &json!({ "ok": true, "breaker": name, "action": action, "phase": upstream.guard.phase().as_str() }),
            ),
            Err(error) => reply::error(
                StatusCode::BAD_GATEWAY,
                "action_failed",
                Some(name),
                Some(&error),
            ),
        }
    }

    /// The rule: with a token, everyone must present it; without one, loopback only.
    fn authorize(&self, request: &Request<Incoming>, peer: SocketAddr) -> Result<(), &'static str> {
        let bearer = request
            .headers()
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        authorize(self.token.as_deref(), bearer, peer.ip())
    }
}

/// Whether an admin action from `peer`, with this `Authorization` header, is allowed.
fn authorize(
    token: Option<&str>,
    authorization: Option<&str>,
    peer: IpAddr,
) -> Result<(), &'static str> {
    match token {
        Some(token) => {
            let given = authorization
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::trim);
            match given {
                Some(given) if constant_time_eq(given.as_bytes(), token.as_bytes()) => Ok(()),
                Some(_) => Err("wrong token"),
                None => Err("an admin token is configured: send Authorization: Bearer TOKEN"),
            }
        }
        None if peer.to_canonical().is_loopback() => Ok(()),
        None => Err("actions are allowed from loopback only unless [admin] token is configured"),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn text(status: StatusCode, content_type: &'static str, body: String) -> Response<ProxyBody> {
    let mut r = Response::new(ProxyBody::full(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

#[cfg(test)]
mod tests {
    use super::authorize;
    use std::net::IpAddr;

    // A documentation address (TEST-NET-3): the rule is checked without sending anything.
    const REMOTE: &str = "203.0.113.5";

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn without_a_token_only_loopback_clients_may_act() {
        assert_eq!(authorize(None, None, ip("127.0.0.1")), Ok(()));
        assert_eq!(authorize(None, None, ip("::1")), Ok(()));
        assert_eq!(authorize(None, None, ip("::ffff:127.0.0.1")), Ok(()));
        assert!(authorize(None, None, ip(REMOTE)).is_err());
        assert!(authorize(None, Some("Bearer anything"), ip(REMOTE)).is_err());
    }

    #[test]
    fn with_a_token_everyone_must_present_it() {
        let token = Some("t0ken");
        assert_eq!(authorize(token, Some("Bearer t0ken"), ip(REMOTE)), Ok(()));
        assert_eq!(
            authorize(token, Some("Bearer t0ken"), ip("127.0.0.1")),
            Ok(())
        );
        assert_eq!(
            authorize(token, Some("Bearer nope"), ip(REMOTE)),
            Err("wrong token")
        );
        assert!(authorize(token, None, ip("127.0.0.1")).is_err());
        assert!(authorize(token, Some("t0ken"), ip(REMOTE)).is_err());
    }
}
