//! One health check: a request to the health path, judged by the upstream's judge
//! ([`breakerbox_http::Exchange`], the proxy's one judging step) as a half-open probe.

use std::sync::Arc;
use std::time::Duration;

use breakerbox::contract::{Breaker, DynBreaker};
use breakerbox::Clock;
use breakerbox_http::{AfterHead, Exchange, HttpJudge, Judgement, TransportError};
use http::header::{self, HeaderValue};
use http::uri::Authority;
use http::{Request, Uri};
use http_body_util::BodyExt;

use super::super::body::ProxyBody;
use super::super::config::HealthConfig;
use super::super::config::Protocol;
use super::super::pool::{Lent, Pool, SendError};
use super::super::pool_h2::H2Upstream;
use super::super::upstream_body::UpstreamBody;

/// The checker's own connection to its upstream, in the protocol the upstream speaks.
pub enum Connection {
    /// HTTP/1.1: a one-slot pool.
    Http1(Arc<Pool>),
    /// HTTP/2: one shared connection.
    Http2(Arc<H2Upstream>),
}

impl Connection {
    /// The protocol it speaks.
    pub fn protocol(&self) -> Protocol {
        match self {
            Connection::Http1(_) => Protocol::Http1,
            Connection::Http2(_) => Protocol::Http2,
        }
    }

    async fn send(
        &self,
        authority: &Authority,
        request: Request<ProxyBody>,
    ) -> Result<(hyper::Response<UpstreamBody>, Option<Lent>), SendError> {
        match self {
            Connection::Http1(pool) => pool.send(0, authority, request).await,
            Connection::Http2(upstream) => Ok((
                upstream
                    .send(authority, request)
                    .await?
                    .map(UpstreamBody::Hyper),
                None,
            )),
        }
    }
}

/// What a check found.
pub struct Checked {
    /// The judgement.
    pub judgement: Judgement,
    /// The response status, when a head came.
    pub status: Option<u16>,
    /// The time charged to the check, from sending to its judgement.
    pub latency: Duration,
}

/// Checks `health` on `authority` through `pool`, within `timeout` (the whole
/// exchange, head and body), judged by `judge` as a probe; latency on `breaker`'s clock.
pub async fn check(
    pool: &Connection,
    authority: &Authority,
    health: &HealthConfig,
    judge: &HttpJudge,
    breaker: &DynBreaker,
    timeout: Duration,
) -> Checked {
    let clock = breaker.clock();
    let started = clock.stamp();
    let elapsed = || clock.elapsed_since(started).as_duration();
    let mut exchange = Exchange::new(judge, true);
    let mut status = None;
    let judged = tokio::time::timeout(
        timeout,
        exchange_once(
            pool,
            authority,
            health,
            &mut exchange,
            &mut status,
            &elapsed,
        ),
    )
    .await;
    let judgement = match judged {
        Ok(judgement) => judgement,
        Err(_) => {
            status = None;
            exchange.on_transport_error(TransportError::Timeout, elapsed())
        }
    };
    Checked {
        judgement,
        status,
        latency: exchange.latency(),
    }
}

async fn exchange_once(
    pool: &Connection,
    authority: &Authority,
    health: &HealthConfig,
    exchange: &mut Exchange<&HttpJudge>,
    status: &mut Option<u16>,
    elapsed: &impl Fn() -> Duration,
) -> Judgement {
    let mut request = Request::new(ProxyBody::empty());
    *request.method_mut() = health.method.clone();
    *request.uri_mut() = Uri::from(health.path.clone());
    if let Ok(host) = HeaderValue::from_str(authority.as_str()) {
        request.headers_mut().insert(header::HOST, host);
    }
    request.headers_mut().insert(
        header::USER_AGENT,
        HeaderValue::from_static("breakerbox-health"),
    );
    let (response, lent) = match pool.send(authority, request).await {
        Ok(sent) => sent,
        Err(error) => {
            return exchange.on_transport_error(error.transport(), elapsed());
        }
    };
    *status = Some(response.status().as_u16());
    let (parts, mut body) = response.into_parts();
    let after = exchange.on_head(parts.status, &parts.headers, elapsed());
    // The body is read to its end either way (the connection goes back to the pool),
    // keeping at most the cap `on_head` asked for (a business-code rule; none otherwise).
    let cap = match after {
        AfterHead::ReadBody { cap } => cap,
        AfterHead::Judged(_) | AfterHead::AwaitTrailers => 0,
    };
    let mut kept = Vec::new();
    let mut oversized = false;
    let mut trailers = None;
    while let Some(frame) = body.frame().await {
        let frame = match frame {
            Ok(frame) => frame,
            Err(e) => {
                // A broken body fails the check whatever its head said.
                return exchange.on_body_error(TransportError::classify(&*e));
            }
        };
        match frame.into_data() {
            Ok(data) => {
                if !oversized && kept.len() + data.len() <= cap {
                    kept.extend_from_slice(&data);
                } else {
                    oversized = true;
                    kept.clear();
                }
            }
            Err(frame) => trailers = frame.into_trailers().ok(),
        }
    }
    if let Some(lent) = lent {
        lent.give_back();
    }
    match after {
        AfterHead::Judged(judgement) => judgement,
        AfterHead::AwaitTrailers => exchange.on_trailers(trailers.as_ref()),
        AfterHead::ReadBody { .. } => exchange.on_body((!oversized).then_some(kept.as_slice())),
    }
}
