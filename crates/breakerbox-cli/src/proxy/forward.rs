//! Forwarding one request: route, limits, breaker, upstream call, judgement.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::Arc;

use breakerbox::contract::{Breaker, BreakerPermit, DynBreaker};
use breakerbox_http::{AfterHead, Exchange, TransportError};
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body::Body;
use hyper::body::Incoming;

use super::body::ProxyBody;
use super::concurrency::Limit;
use super::config::{Limits, UpstreamConfig};
use super::download::{BodyFault, Download, Hold, Outcome, UpstreamJudge};
use super::exchange::{self, Failed};
use super::headers::{forwarded_for, header_bytes, strip_hop_by_hop};
use super::health;
use super::in_place;
use super::metrics::{Recorder, UpstreamError};
use super::pool::{Pool, SendError};
use super::pool_h2::H2Pool;
use super::reply;
use super::server::Hangup;
use super::target::{normalize_path, request_host, target_uri};
use super::tunnel::Requested;
use super::upload::{ClientFault, Upload, UploadState};

/// One upstream with its breaker and judge.
pub struct Upstream {
    /// Its config.
    pub config: UpstreamConfig,
    /// Its breaker (the engine chosen by the config).
    pub breaker: DynBreaker,
    /// Whether the breaker's state is shared through Redis.
    pub shared: bool,
    /// Its concurrency limits, when configured (shared with the configs before and
    /// after a reload that keeps them).
    pub limit: Option<Limit>,
    /// The identity of its connections: the same while its address and TLS settings are
    /// (a reload keeps the idle connections of an identity it keeps).
    pub conn: u64,
}

/// The proxy: upstreams, limits and counters, shared by every worker thread.
pub struct Proxy {
    /// The upstreams, in file order.
    pub upstreams: Vec<Upstream>,
    /// Counters and recent transitions.
    pub recorder: Arc<Recorder>,
    limits: Limits,
}

/// One worker thread's view: the shared proxy and the thread's own connection pool, so
/// a request and its upstream connection stay on one thread.
pub struct Worker {
    /// The shared proxy.
    pub proxy: Arc<Proxy>,
    pool: Arc<Pool>,
    /// The thread's HTTP/2 upstream connections.
    h2: H2Pool,
}

impl Worker {
    /// A worker over `proxy`, with an empty pool.
    pub fn new(proxy: Arc<Proxy>) -> Worker {
        let pool = Arc::new(Pool::new(proxy.destinations()));
        let h2 = H2Pool::new(&proxy.upstreams);
        Worker { proxy, pool, h2 }
    }

    /// This thread's worker over the next config (a reload), keeping the idle
    /// connections of the upstreams whose connection identity it keeps.
    pub fn renew(&self, proxy: Arc<Proxy>) -> Worker {
        let pool = Arc::new(self.pool.renew(proxy.destinations()));
        let h2 = self.h2.renew(&proxy.upstreams);
        Worker { proxy, pool, h2 }
    }

    /// Handles one request from `peer`; `Hangup` closes the connection unanswered. The
    /// worker is the calling thread's: a response body holds it (not the proxy, whose
    /// reference count every thread would touch). One future for the whole request (no
    /// wrapper around another): hyper's service moves it as it starts.
    pub async fn handle(
        self: Arc<Self>,
        mut request: Request<Incoming>,
        peer: SocketAddr,
    ) -> Result<Response<ProxyBody>, Hangup> {
        let worker = &self;
        let proxy: &Proxy = &self.proxy;
        if header_bytes(&request) > proxy.limits.max_header_bytes {
            return Ok(reply::error(
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "headers_too_large",
                None,
                Some(&format!(
                    "request line and headers exceed {} bytes",
                    proxy.limits.max_header_bytes
                )),
            ));
        }
        if request.method() == Method::CONNECT {
            let mut response = reply::error(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                None,
                Some("CONNECT is not supported"),
            );
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            return Ok(response);
        }
        let host = match request_host(&request) {
            Ok(host) => host,
            Err(why) => return Ok(reply::bad_request(why)),
        };
        let path = match normalize_path(request.uri().path()) {
            Ok(path) => path,
            Err(why) => return Ok(reply::bad_request(why)),
        };
        let Some((slot, upstream)) = proxy.route(host, &path) else {
            return Ok(reply::error(
                StatusCode::NOT_FOUND,
                "no_route",
                None,
                Some(&path),
            ));
        };
        let rewritten = match &path {
            Cow::Borrowed(_) => None,
            Cow::Owned(p) => Some(p.as_str()),
        };
        let uri = match target_uri(&upstream.config, request.uri(), rewritten) {
            Some(uri) => uri,
            None => return Ok(reply::bad_request("invalid path")),
        };
        let absolute = request.uri().authority().cloned();
        let name = upstream.config.name.as_str();
        let stats = proxy.recorder.stats(name);

        let upgrade = Requested::take(&mut request);
        let (mut parts, incoming) = request.into_parts();
        let (body, upload) = match proxy.request_body(incoming) {
            Ok(body) => body,
            Err(response) => return Ok(response),
        };

        // A place under the concurrency limits comes before the breaker: an overloaded
        // request is no call, takes no probe slot and is never judged.
        let mut place = match &upstream.limit {
            None => None,
            Some(limit) => match limit.admit().await {
                Ok(place) => Some(place),
                Err(overloaded) => {
                    if let Some(s) = stats {
                        s.overloaded();
                    }
                    return Ok(reply::error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "overloaded",
                        Some(name),
                        Some(overloaded.reason()),
                    ));
                }
            },
        };
        // Rule 24: while a health check probes, real requests take no probe permit.
        if health::probing(upstream) {
            return Ok(health::rejection(upstream, &proxy.recorder));
        }
        let ticket = match upstream.breaker.acquire_now_or_later().await {
            Ok(ticket) if health::reserved(upstream, &ticket) => {
                drop(ticket);
                return Ok(health::rejection(upstream, &proxy.recorder));
            }
            Ok(ticket) => ticket,
            Err(open) => {
                if let Some(s) = stats {
                    s.rejected(open.reason());
                }
                return Ok(reply::circuit_open(name, &open));
            }
        };

        parts.uri = uri;
        if let Some(authority) = absolute {
            // RFC 9112 §3.2.2: the target's authority replaces any Host header.
            if let Ok(host) = HeaderValue::from_str(authority.as_str()) {
                parts.headers.insert(header::HOST, host);
            }
        }
        parts.version = http::Version::HTTP_11;
        strip_hop_by_hop(&mut parts.headers);
        if let Some(upgrade) = &upgrade {
            upgrade.ask_upstream(&mut parts.headers);
        }
        forwarded_for(&mut parts.headers, peer);
        if !parts.headers.contains_key(header::HOST) {
            if let Ok(host) = HeaderValue::from_str(upstream.config.authority.as_str()) {
                parts.headers.insert(header::HOST, host);
            }
        }
        let outgoing = Request::from_parts(parts, body);

        // One exchange judges the call, as in tower and reqwest; the probe flag is the
        // permit's, taken now (the exchange may give a probe permit back early).
        let mut exchange =
            Exchange::new(UpstreamJudge::new(worker.clone(), slot), ticket.is_probe());
        // A gRPC caller's own deadline: a DEADLINE_EXCEEDED past it is not the upstream's.
        exchange.on_request(outgoing.headers());
        // Rule 22: the upstream's own time to the head is bounded by the permit's deadline
        // (`probe_timeout` for a probe, `call_timeout` otherwise) when it is shorter than
        // `request_timeout`; time spent waiting on the client is not counted (issue 9).
        let timeout = ticket
            .deadline()
            .map_or(proxy.limits.request_timeout, |deadline| {
                deadline.min(proxy.limits.request_timeout)
            });
        // The exchange may give a probe permit back early (its client stalls): then
        // nothing is judged.
        let mut ticket = Some(ticket);
        // Boxed: the exchange's state is most of a request's, and the request's own future
        // is moved (copied) as it starts.
        let sent = in_place::pinned(|| {
            exchange::send(
                &worker.pool,
                &worker.h2,
                slot,
                &upstream.config.authority,
                outgoing,
                upload.as_deref(),
                timeout,
                &mut ticket,
            )
        })
        .await;
        let (judgement, response) = match sent {
            Err(Failed::Client(fault)) => {
                // The client's doing: the permit goes back unjudged (a probe frees its slot).
                drop(ticket);
                if let Some(s) = stats {
                    s.client_fault(fault);
                }
                return reply::client_fault(fault, name, &proxy.limits);
            }
            Err(Failed::Timeout) => {
                let mut exchange = exchange;
                let j = exchange.on_transport_error(TransportError::Timeout, timeout);
                if let Some(ticket) = ticket {
                    ticket
                        .record_with_retry_hint(j.verdict, exchange.latency(), j.retry_after)
                        .await;
                }
                if let Some(s) = stats {
                    s.upstream_error(UpstreamError::Timeout);
                }
                (
                    j,
                    reply::error(
                        StatusCode::GATEWAY_TIMEOUT,
                        "upstream_timeout",
                        Some(name),
                        None,
                    ),
                )
            }
            Err(Failed::Race(error)) => {
                // Not judged: the permit goes back (a probe frees its slot).
                drop(ticket);
                return Ok(reply::error(
                    StatusCode::BAD_GATEWAY,
                    "bad_gateway",
                    Some(name),
                    Some(&error.to_string()),
                ));
            }
            Err(Failed::Upstream(error, latency)) => {
                let mut exchange = exchange;
                let kind = match &error {
                    SendError::Connect(_) => UpstreamError::Connect,
                    _ => UpstreamError::Other,
                };
                let transport = error.transport();
                let j = exchange.on_transport_error(transport, latency);
                if let Some(ticket) = ticket {
                    ticket
                        .record_with_retry_hint(j.verdict, exchange.latency(), j.retry_after)
                        .await;
                }
                if let Some(s) = stats {
                    s.upstream_error(kind);
                }
                let detail = error.to_string();
                (
                    j,
                    reply::error(
                        StatusCode::BAD_GATEWAY,
                        "bad_gateway",
                        Some(name),
                        Some(&detail),
                    ),
                )
            }
            Ok(mut head) => {
                let mut exchange = exchange;
                let switched = head.response.status() == StatusCode::SWITCHING_PROTOCOLS;
                // An upgrade the upstream accepted: judged on its head, then a tunnel.
                let tunnel = upgrade.filter(|_| switched).map(|upgrade| {
                    let mut headers = HeaderMap::new();
                    upgrade.open(&mut head.response, &mut headers, place.take());
                    headers
                });
                let (mut parts, incoming) = head.response.into_parts();
                let (judged, read_up_to) = match exchange.on_head_at(
                    parts.status,
                    &parts.headers,
                    head.latency,
                    head.elapsed,
                ) {
                    AfterHead::Judged(judgement) => (Some(judgement), None),
                    AfterHead::ReadBody { cap } => (None, Some(cap)),
                    // gRPC with its status in the trailers: judged at the body's end.
                    AfterHead::AwaitTrailers => (None, None),
                };
                // A tunnel took the place (if any) already.
                let outcome = Outcome {
                    worker: worker.clone(),
                    slot,
                    hold: Hold::new(ticket),
                    exchange,
                    judged,
                    upload,
                    _place: place,
                };
                if let Some(tunnel_headers) = tunnel {
                    // The body a rule may want is the tunnel's first bytes: the head decides.
                    outcome.complete(None);
                    strip_hop_by_hop(&mut parts.headers);
                    parts.headers.extend(tunnel_headers);
                    return Ok(Response::from_parts(parts, ProxyBody::empty()));
                }
                // Boxed now, in place: the download is large, and the body keeps it boxed.
                let mut download = in_place::boxed(|| {
                    Download::new(
                        incoming,
                        head.lent,
                        head.latency,
                        head.elapsed,
                        proxy.limits.request_timeout,
                        outcome,
                    )
                });
                let body = match read_up_to {
                    Some(cap) => match download.read_for_judging(cap).await {
                        Ok(Some(all)) => ProxyBody::full(all),
                        Ok(None) => ProxyBody::Download(download),
                        Err(fault) => {
                            let (status, error) = match fault {
                                BodyFault::Timeout => {
                                    (StatusCode::GATEWAY_TIMEOUT, "upstream_timeout")
                                }
                                BodyFault::Truncated => (StatusCode::BAD_GATEWAY, "bad_gateway"),
                            };
                            return Ok(reply::error(
                                status,
                                error,
                                Some(name),
                                Some(fault.reason()),
                            ));
                        }
                    },
                    None => ProxyBody::Download(download),
                };
                strip_hop_by_hop(&mut parts.headers);
                return Ok(Response::from_parts(parts, body));
            }
        };
        if let Some(s) = stats {
            s.judged(judgement);
        }
        Ok(response)
    }
}

impl Proxy {
    /// A proxy over `upstreams`.
    pub fn new(upstreams: Vec<Upstream>, recorder: Arc<Recorder>, limits: Limits) -> Proxy {
        Proxy {
            upstreams,
            recorder,
            limits,
        }
    }

    /// Each upstream's connection identity and TLS settings, for a worker's pool.
    fn destinations(&self) -> Vec<super::pool::Destination> {
        self.upstreams
            .iter()
            .map(|u| (u.conn, u.config.tls.clone()))
            .collect()
    }

    /// The request limits.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The upstream for a request: its `Host` and path against each upstream's `host` and
    /// `route`; a host match beats none, then the longest route prefix wins.
    fn route(&self, host: Option<&str>, path: &str) -> Option<(usize, &Upstream)> {
        let mut best: Option<(usize, (bool, usize))> = None;
        for (i, u) in self.upstreams.iter().enumerate() {
            if let Some(want) = &u.config.host {
                if !host.is_some_and(|h| h.eq_ignore_ascii_case(want)) {
                    continue;
                }
            }
            let len = match &u.config.route {
                Some(prefix) if path.starts_with(prefix.as_str()) => prefix.len(),
                Some(prefix) if prefix.ends_with('/') && path == &prefix[..prefix.len() - 1] => {
                    prefix.len() - 1
                }
                Some(_) => continue,
                None => 0,
            };
            let score = (u.config.host.is_some(), len);
            if best.as_ref().is_none_or(|(_, s)| score > *s) {
                best = Some((i, score));
            }
        }
        best.map(|(i, _)| (i, &self.upstreams[i]))
    }

    /// The request body to forward, streamed: 413 at once when its declared length is
    /// too big; a chunked body is counted as it streams.
    #[allow(clippy::result_large_err)]
    fn request_body(
        &self,
        incoming: Incoming,
    ) -> Result<(ProxyBody, Option<Arc<UploadState>>), Response<ProxyBody>> {
        let max = self.limits.max_body_bytes;
        if incoming.size_hint().exact().is_some_and(|len| len > max) {
            return Err(reply::client_fault_response(
                ClientFault::TooLarge,
                None,
                &self.limits,
            ));
        }
        if incoming.is_end_stream() {
            return Ok((ProxyBody::empty(), None));
        }
        let state = Arc::new(UploadState::default());
        let upload = Upload::new(
            incoming,
            self.limits.client_body_timeout,
            max,
            state.clone(),
        );
        Ok((ProxyBody::Upload(upload), Some(state)))
    }
}
