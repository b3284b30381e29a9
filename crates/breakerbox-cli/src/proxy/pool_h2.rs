//! HTTP/2 to upstreams (`protocol = "http2"`): one connection per upstream and worker
//! thread, shared by all of the thread's requests to it (each a stream), opened when first
//! needed and again when it has closed: h2c (prior knowledge) for an `http://` url, ALPN
//! `h2` for an `https://` one (an upstream that does not choose `h2` is a connect failure).
//!
//! Each connection is pinged every `keepalive_interval` (30 s by default) and closed when
//! an answer takes over `keepalive_timeout` (10 s): a connection that died silently is
//! replaced before a request is lost on it.
//!
//! A request the connection could not take (it closed before the request was written) is
//! sent again on a new connection. One the upstream refused unprocessed (`REFUSED_STREAM`,
//! as after a GOAWAY) is sent again when it has no body and is idempotent, else answered
//! 502 unjudged, like a keep-alive race over HTTP/1.1. Any other failure of a stream is
//! the upstream's: over HTTP/2 the protocol says which requests were not processed, so
//! there is no race to forgive.

use std::sync::Arc;

use http::header::{HeaderValue, HOST, TE};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Request, Response, Uri, Version};
use http_body::Body as _;
use hyper::body::Incoming;
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};

use super::body::ProxyBody;
use super::config::{Keepalive, Protocol};
use super::forward::Upstream;
use super::pool::{tcp_connect, SendError};
use super::tls::UpstreamTls;

/// The HTTP/2 connections of one worker, per upstream (by index; `None` for an HTTP/1.1
/// upstream).
pub struct H2Pool {
    slots: Vec<Option<Arc<H2Upstream>>>,
}

/// One HTTP/2 upstream's connection on one worker, under the identity of where it goes
/// ([`H2Pool::renew`] hands it to the next config when that identity is kept).
pub struct H2Upstream {
    id: u64,
    tls: Option<Arc<UpstreamTls>>,
    keepalive: Option<Keepalive>,
    /// The shared connection; the lock is held while a new one opens, so concurrent
    /// requests wait for that one instead of opening their own.
    sender: tokio::sync::Mutex<Option<SendRequest<ProxyBody>>>,
}

impl H2Pool {
    /// The connections for `upstreams` (none open yet).
    pub fn new(upstreams: &[Upstream]) -> H2Pool {
        H2Pool::renew_from(&[], upstreams)
    }

    /// The pool of the next config (a reload): an HTTP/2 upstream whose connection
    /// identity this pool knows keeps its connection.
    pub fn renew(&self, upstreams: &[Upstream]) -> H2Pool {
        H2Pool::renew_from(&self.slots, upstreams)
    }

    fn renew_from(old: &[Option<Arc<H2Upstream>>], upstreams: &[Upstream]) -> H2Pool {
        let slots = upstreams
            .iter()
            .map(|u| {
                (u.config.protocol == Protocol::Http2).then(|| {
                    old.iter()
                        .flatten()
                        .find(|o| o.id == u.conn)
                        .cloned()
                        .unwrap_or_else(|| {
                            H2Upstream::standalone(u.conn, u.config.tls.clone(), u.config.keepalive)
                        })
                })
            })
            .collect();
        H2Pool { slots }
    }

    /// Upstream `slot`'s connection, when it speaks HTTP/2.
    pub fn get(&self, slot: usize) -> Option<&H2Upstream> {
        self.slots.get(slot)?.as_deref()
    }
}

impl H2Upstream {
    /// A connection of its own (none open yet) to the upstream whose connection identity is
    /// `id`, pinged as `keepalive` says; the worker threads' pools hold one each, and so
    /// does a sender outside them (the health checker).
    pub fn standalone(
        id: u64,
        tls: Option<Arc<UpstreamTls>>,
        keepalive: Option<Keepalive>,
    ) -> Arc<H2Upstream> {
        Arc::new(H2Upstream {
            id,
            tls,
            keepalive,
            sender: tokio::sync::Mutex::new(None),
        })
    }

    /// Sends `request` (its URI in origin-form, its `Host` the client's) to the upstream
    /// at `authority` as a stream of the shared connection.
    pub async fn send(
        &self,
        authority: &Authority,
        request: Request<ProxyBody>,
    ) -> Result<Response<Incoming>, SendError> {
        let request = http2_request(request, self.tls.is_some(), authority);
        let replay = (request.method().is_idempotent() && request.body().is_end_stream())
            .then(|| copy_head(&request));
        let (mut sender, fresh) = self.sender(authority, false).await?;
        let failed = match sender.try_send_request(request).await {
            Ok(response) => return Ok(response),
            Err(failed) => failed,
        };
        let refused = refused_stream(failed.error());
        let mut failed = failed;
        let retry = match failed.take_message() {
            // Never written: the connection had closed.
            Some(request) => request,
            None if refused => match replay {
                Some(request) => request,
                None => return Err(SendError::Race(Box::new(failed.into_error()))),
            },
            None => return Err(SendError::Http(failed.into_error())),
        };
        let (mut sender, _) = if fresh {
            (sender, true)
        } else {
            self.sender(authority, true).await?
        };
        sender.send_request(retry).await.map_err(SendError::Http)
    }

    /// The shared connection, opened when there is none, it has closed or `renew` asks
    /// for a new one (the last one failed a request); `true` when it is new.
    async fn sender(
        &self,
        authority: &Authority,
        renew: bool,
    ) -> Result<(SendRequest<ProxyBody>, bool), SendError> {
        let mut held = self.sender.lock().await;
        if let Some(sender) = held.as_ref() {
            if !sender.is_closed() && !renew {
                return Ok((sender.clone(), false));
            }
        }
        *held = None;
        let sender = connect(authority, self.tls.as_deref(), self.keepalive).await?;
        *held = Some(sender.clone());
        Ok((sender, true))
    }
}

/// `request` as HTTP/2 wants it: an absolute URI (`:scheme`, `:authority` from the
/// client's `Host`, else the upstream's), no `Host` header, and `te: trailers` for gRPC
/// (the proxy relays trailers; gRPC clients send it to say so, and it is hop-by-hop).
fn http2_request(
    mut request: Request<ProxyBody>,
    https: bool,
    upstream: &Authority,
) -> Request<ProxyBody> {
    let authority = request
        .headers_mut()
        .remove(HOST)
        .and_then(|host| Authority::try_from(host.as_bytes()).ok())
        .unwrap_or_else(|| upstream.clone());
    let mut parts = request.uri().clone().into_parts();
    parts.scheme = Some(if https { Scheme::HTTPS } else { Scheme::HTTP });
    parts.authority = Some(authority);
    if parts.path_and_query.is_none() {
        parts.path_and_query = Some(PathAndQuery::from_static("/"));
    }
    if let Ok(uri) = Uri::from_parts(parts) {
        *request.uri_mut() = uri;
    }
    *request.version_mut() = Version::HTTP_2;
    if breakerbox_http::is_grpc_content_type(request.headers()) {
        request
            .headers_mut()
            .insert(TE, HeaderValue::from_static("trailers"));
    }
    request
}

/// A copy of a body-less request.
fn copy_head(request: &Request<ProxyBody>) -> Request<ProxyBody> {
    let mut copy = Request::new(ProxyBody::empty());
    *copy.method_mut() = request.method().clone();
    *copy.uri_mut() = request.uri().clone();
    *copy.version_mut() = request.version();
    *copy.headers_mut() = request.headers().clone();
    copy
}

/// Whether the upstream refused the stream before processing it.
fn refused_stream(error: &hyper::Error) -> bool {
    let mut source = std::error::Error::source(error);
    while let Some(s) = source {
        if let Some(h2) = s.downcast_ref::<h2::Error>() {
            return h2.reason() == Some(h2::Reason::REFUSED_STREAM);
        }
        source = s.source();
    }
    false
}

/// A new HTTP/2 connection to `authority`, its connection driven by a task of its own.
async fn connect(
    authority: &Authority,
    tls: Option<&UpstreamTls>,
    keepalive: Option<Keepalive>,
) -> Result<SendRequest<ProxyBody>, SendError> {
    let stream = tcp_connect(authority, tls.is_some()).await?;
    match tls {
        None => handshake(stream, keepalive).await,
        Some(tls) => {
            let stream = tls.connect(stream).await.map_err(SendError::Connect)?;
            if stream.get_ref().1.alpn_protocol() != Some(b"h2") {
                return Err(SendError::Connect(std::io::Error::other(format!(
                    "tls handshake with {authority}: the upstream did not choose HTTP/2 \
                     (ALPN h2) and the upstream's protocol is http2"
                ))));
            }
            handshake(stream, keepalive).await
        }
    }
}

async fn handshake<T>(
    io: T,
    keepalive: Option<Keepalive>,
) -> Result<SendRequest<ProxyBody>, SendError>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let mut builder = hyper::client::conn::http2::Builder::new(TokioExecutor::new());
    builder.timer(TokioTimer::new());
    if let Some(keepalive) = keepalive {
        // Idle connections too: a dead one is found before a request is lost on it.
        builder
            .keep_alive_interval(keepalive.interval)
            .keep_alive_timeout(keepalive.timeout)
            .keep_alive_while_idle(true);
    }
    let (sender, connection) = builder
        .handshake(TokioIo::new(io))
        .await
        .map_err(SendError::Http)?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}
