//! The admin listener: `breakerbox-admin`'s service over the proxy's upstreams (status,
//! metrics, the dashboard, trip, disable and reset, under its rules of access), each
//! breaker's status entry with its route and the proxy's own counters, always those of
//! the running config (a reload changes what it lists). `POST /reload` is the proxy's
//! own route, under the same rules of access as the service's actions.

use std::sync::Arc;

use breakerbox::contract::Breaker;
use breakerbox::Verdict;
use breakerbox_admin::{AdminService, BreakerSource, Listed};
use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use serde_json::{json, Value};

use super::body::ProxyBody;
use super::reload::Reloader;

use super::config::AdminConfig;
use super::forward::Upstream;
use super::live::Live;
use super::metrics;

/// The admin service of the running config, with the `[admin]` table's token and host
/// names.
pub fn service(live: Arc<Live>, config: &AdminConfig) -> anyhow::Result<AdminService> {
    let mut builder = AdminService::builder()
        .source(Upstreams(live.clone()))
        .transitions(live.current().recorder.transitions().clone())
        .title("breakerbox proxy");
    if let Some(token) = &config.token {
        builder = builder.token(token.clone());
    }
    for host in &config.hosts {
        builder = builder.allow_host(host.clone());
    }
    let draining = live.clone();
    builder = builder.status_section("draining", move || draining.draining.status());
    builder = builder.metrics(move || {
        let proxy = live.current();
        let phases: Vec<(&str, breakerbox::Phase)> = proxy
            .upstreams
            .iter()
            .map(|u| (u.config.name.as_str(), u.breaker.phase()))
            .collect();
        metrics::render(&proxy.recorder, &phases, live.reloads())
    });
    builder
        .build()
        .map_err(|error| anyhow::anyhow!("admin: {error}"))
}

/// The running config's upstreams' breakers, in file order.
struct Upstreams(Arc<Live>);

impl BreakerSource for Upstreams {
    fn breakers(&self) -> Vec<Listed> {
        let proxy = self.0.current();
        proxy
            .upstreams
            .iter()
            .map(|u| listed(&proxy.recorder, u))
            .collect()
    }

    fn breaker(&self, name: &str) -> Option<Listed> {
        let proxy = self.0.current();
        proxy
            .upstreams
            .iter()
            .find(|u| u.config.name == name)
            .map(|u| listed(&proxy.recorder, u))
    }
}

/// `upstream`'s breaker, with where it routes and what the proxy counted.
fn listed(recorder: &metrics::Recorder, upstream: &Upstream) -> Listed {
    let c = &upstream.config;
    let mut listed = Listed::new(upstream.breaker.clone())
        .with_detail("upstream", c.url())
        .with_detail("route", json!(c.route))
        .with_detail("host", json!(c.host))
        .with_detail("shared", upstream.shared)
        .with_detail(
            "concurrency",
            match &upstream.limit {
                Some(limit) => {
                    let config = limit.config();
                    json!({
                        "in_flight": limit.in_flight(),
                        "pending": limit.pending(),
                        "max_in_flight": config.max_in_flight,
                        "max_pending": config.max_pending,
                    })
                }
                None => Value::Null,
            },
        );
    if let Some(stats) = recorder.stats(&c.name) {
        listed = listed
                .with_detail(
                    "calls",
                    json!({
                        "success": stats.calls(Verdict::Success),
                        "failure": stats.calls(Verdict::Failure),
                        "ignore": stats.calls(Verdict::Ignore),
                    }),
                )
                .with_detail(
                    "last_judgement",
                    match stats.last_judgement() {
                        Some(j) => json!({
                            "verdict": j.verdict.as_str(),
                            "reason": j.reason,
                            "retry_after_ms": j.retry_after.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
                        }),
                        None => Value::Null,
                    },
                )
                .with_detail("health", super::health::status(c, &stats.health))
                .with_detail("rejections", stats.rejections())
                .with_detail("overloaded", stats.overloads())
                .with_detail("stale_results", stats.stale());
    }
    listed
}

/// The admin listener: the admin service, and the proxy's own `POST /reload`.
pub struct Front {
    service: AdminService,
    reloader: Arc<Reloader>,
}

impl Front {
    /// The admin listener's handler over `service`, reloading with `reloader`.
    pub fn new(service: AdminService, reloader: Arc<Reloader>) -> Front {
        Front { service, reloader }
    }

    /// Answers one admin request.
    pub async fn handle(&self, request: Request<Incoming>) -> Response<ProxyBody> {
        if request.uri().path() == "/reload" {
            return self.reload(request).await;
        }
        let (parts, body) = self.service.handle(request).await.into_parts();
        let body = match body.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(never) => match never {},
        };
        Response::from_parts(parts, ProxyBody::full(body))
    }

    /// `POST /reload`, under the rules of access of the service's actions: 200 with what
    /// changed, or 422 with every error (the running config stays).
    async fn reload(&self, request: Request<Incoming>) -> Response<ProxyBody> {
        if request.method() != Method::POST {
            let mut response = json(
                StatusCode::METHOD_NOT_ALLOWED,
                &serde_json::json!({"error": "method_not_allowed", "allow": "POST"}),
            );
            response
                .headers_mut()
                .insert(http::header::ALLOW, http::HeaderValue::from_static("POST"));
            return response;
        }
        if let Some(denied) = self.service.refuse_action(&request) {
            let (parts, body) = denied.into_parts();
            let body = match body.collect().await {
                Ok(collected) => collected.to_bytes(),
                Err(never) => match never {},
            };
            return Response::from_parts(parts, ProxyBody::full(body));
        }
        match self.reloader.reload("POST /reload").await {
            Ok(summary) => json(StatusCode::OK, &summary),
            Err(errors) => json(
                StatusCode::UNPROCESSABLE_ENTITY,
                &serde_json::json!({
                    "ok": false,
                    "error": "reload_refused",
                    "detail": "the running config stays",
                    "errors": errors,
                }),
            ),
        }
    }
}

fn json(status: StatusCode, value: &serde_json::Value) -> Response<ProxyBody> {
    let mut response = Response::new(ProxyBody::full(bytes::Bytes::from(value.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}
