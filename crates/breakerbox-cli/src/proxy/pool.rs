//! Keep-alive connections to upstreams, one pool per worker thread: a request takes an
//! idle connection (or opens one), and the connection goes back when the response body
//! has been read to its end. No task per request, no lock contention (the lock is only
//! ever taken by its own thread). Requests without a body go through the inline client
//! ([`super::h1`]), the others through hyper's; each keeps its own idle connections.

use std::sync::{Arc, Mutex};

use http::uri::Authority;
use http::{Request, Response};
use http_body::Body as _;
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;

use super::body::{BoxError, ProxyBody};
use super::h1::{self, Conn, H1Error, InlineBody, UpstreamIo};
use super::in_place;
use super::tls::UpstreamTls;
use super::upstream_body::UpstreamBody;

/// How many idle connections to keep per upstream and thread.
const MAX_IDLE: usize = 1024;

/// Why no response came back.
#[derive(Debug)]
pub enum SendError {
    /// The connection could not be opened.
    Connect(std::io::Error),
    /// The exchange failed (reset, protocol error...).
    Http(hyper::Error),
    /// The exchange failed on the inline client (reset, closed, invalid response...).
    Inline(H1Error),
    /// The exchange failed on a reused connection, after the request was written, in a
    /// way that cannot be told from the upstream closing the idle connection at the same
    /// moment, and the request could not be retried (not idempotent, or its body is
    /// gone): not the upstream's fault as far as anyone can tell.
    Race(BoxError),
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Connect(e) => write!(f, "connect: {e}"),
            SendError::Http(e) => chain(f, e),
            SendError::Inline(e) => chain(f, e),
            SendError::Race(e) => chain(f, &**e),
        }
    }
}

impl SendError {
    /// How the judge sees it.
    pub fn transport(&self) -> breakerbox_http::TransportError {
        use breakerbox_http::TransportError;
        match self {
            SendError::Connect(_) => TransportError::Connect,
            SendError::Http(e) => TransportError::classify(e),
            SendError::Inline(e) => e.transport(),
            SendError::Race(e) => TransportError::classify(&**e),
        }
    }
}

/// `error` and its sources, `: ` between them.
fn chain(
    f: &mut std::fmt::Formatter<'_>,
    error: &(dyn std::error::Error + 'static),
) -> std::fmt::Result {
    write!(f, "{error}")?;
    let mut source = error.source();
    while let Some(s) = source {
        write!(f, ": {s}")?;
        source = s.source();
    }
    Ok(())
}

/// Whether `request` may be sent again after it was written: an idempotent method and
/// no body (so nothing of it is lost).
fn replayable(request: &Request<ProxyBody>) -> bool {
    request.method().is_idempotent() && request.body().is_end_stream()
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

/// The idle connections of one worker, per upstream (by index), and how to open new
/// ones (plain TCP, or TLS for an `https://` upstream).
pub struct Pool {
    idle: Vec<Arc<Idle>>,
    tls: Vec<Option<Arc<UpstreamTls>>>,
}

/// One upstream's idle connections on one worker, under the identity of where they go
/// ([`Pool::renew`] hands them to the next config when that identity is kept).
struct Idle {
    id: u64,
    senders: Mutex<Vec<SendRequest<ProxyBody>>>,
    /// The inline client's.
    inline: Mutex<Vec<Conn>>,
}

/// Where an inline connection goes back at the end of its response body.
pub struct Home {
    idle: Arc<Idle>,
}

impl Home {
    /// Keeps `conn` for the next request (up to the idle limit).
    pub fn put(self, conn: Conn) {
        if let Ok(mut idle) = self.idle.inline.lock() {
            if idle.len() < MAX_IDLE {
                idle.push(conn);
            }
        }
    }
}

/// One upstream as a pool sees it: the identity of its connections (the same identity,
/// the same place and TLS settings) and its TLS settings.
pub type Destination = (u64, Option<Arc<UpstreamTls>>);

/// A connection lent to one exchange; give it back with [`Pool::put`].
pub struct Lent {
    pub(crate) pool: Arc<Pool>,
    pub(crate) slot: usize,
    pub(crate) sender: SendRequest<ProxyBody>,
}

impl Lent {
    /// Returns the connection to its pool (when its response is fully read).
    pub fn give_back(self) {
        self.pool.put(self.slot, self.sender);
    }
}

impl Pool {
    /// A pool for these upstreams (one entry per upstream, by index).
    pub fn new(destinations: Vec<Destination>) -> Pool {
        Pool::renew_from(&[], destinations)
    }

    /// The pool of the next config (a reload): an upstream whose identity this pool
    /// knows gets its idle connections (the very same list, so a connection lent under
    /// the old config comes back to it), the others start empty. Connections of an
    /// identity the next config lacks close when this pool and its loans are gone.
    pub fn renew(&self, destinations: Vec<Destination>) -> Pool {
        Pool::renew_from(&self.idle, destinations)
    }

    fn renew_from(old: &[Arc<Idle>], destinations: Vec<Destination>) -> Pool {
        let (ids, tls): (Vec<u64>, Vec<_>) = destinations.into_iter().unzip();
        let idle = ids
            .into_iter()
            .map(|id| match old.iter().find(|i| i.id == id) {
                Some(kept) => kept.clone(),
                None => Arc::new(Idle {
                    id,
                    senders: Mutex::new(Vec::new()),
                    inline: Mutex::new(Vec::new()),
                }),
            })
            .collect();
        Pool { idle, tls }
    }

    fn take(&self, slot: usize) -> Option<SendRequest<ProxyBody>> {
        self.idle.get(slot)?.senders.lock().ok()?.pop()
    }

    fn put(&self, slot: usize, sender: SendRequest<ProxyBody>) {
        if sender.is_closed() {
            return;
        }
        if let Some(Ok(mut idle)) = self.idle.get(slot).map(|i| i.senders.lock()) {
            if idle.len() < MAX_IDLE {
                idle.push(sender);
            }
        }
    }

    /// Sends `request` (its URI in origin-form: path and query) to upstream `slot` at
    /// `authority`, on an idle connection when one is usable, else on a new one. The
    /// response comes with the lent connection.
    ///
    /// A request that fails on a reused connection is retried once on a fresh one when
    /// nothing of it was written (any method), or when it is idempotent with no body and
    /// no response came back; a failure on a fresh connection is the upstream's. The
    /// connection comes back with hyper's client (the inline one's body gives it back).
    pub async fn send(
        self: &Arc<Self>,
        slot: usize,
        authority: &Authority,
        request: Request<ProxyBody>,
    ) -> Result<(Response<UpstreamBody>, Option<Lent>), SendError> {
        if h1::wants_inline(&request) {
            // Encoded here, so the request is not moved into the exchange's future.
            let head = h1::encode_head(&request);
            let is_head = request.method() == http::Method::HEAD;
            let idempotent = request.method().is_idempotent();
            drop(request);
            return self
                .send_inline(slot, authority, &head, is_head, idempotent)
                .await;
        }
        let (response, lent) =
            in_place::pinned(|| self.send_hyper(slot, authority, request)).await?;
        Ok((response.map(UpstreamBody::Hyper), Some(lent)))
    }

    /// [`Pool::send`] for a body-less request whose encoded `head` is all there is to
    /// send, on the inline client.
    async fn send_inline(
        &self,
        slot: usize,
        authority: &Authority,
        head: &[u8],
        is_head: bool,
        idempotent: bool,
    ) -> Result<(Response<UpstreamBody>, Option<Lent>), SendError> {
        let idle = self.idle.get(slot).ok_or_else(no_slot)?;
        if let Some(conn) = self.take_inline(idle) {
            match h1::exchange(conn, head, is_head).await {
                Ok((response, framing, conn)) => {
                    let home = Home { idle: idle.clone() };
                    let body = UpstreamBody::Inline(InlineBody::new(conn, framing, home));
                    return Ok((response.map(|()| body), None));
                }
                // Nothing written, or nothing answered to a request that may go twice:
                // once more on a fresh connection.
                Err(failed) if !failed.wrote || (idempotent && !failed.answered) => {}
                // Written and unanswered, not to be sent twice: maybe the upstream
                // closed the idle connection as it went; not judged.
                Err(failed) if !failed.answered => {
                    return Err(SendError::Race(Box::new(failed.error)));
                }
                Err(failed) => return Err(SendError::Inline(failed.error)),
            }
        }
        let conn = self.connect_inline(slot, authority).await?;
        match h1::exchange(conn, head, is_head).await {
            Ok((response, framing, conn)) => {
                let home = Home { idle: idle.clone() };
                let body = UpstreamBody::Inline(InlineBody::new(conn, framing, home));
                Ok((response.map(|()| body), None))
            }
            Err(failed) => Err(SendError::Inline(failed.error)),
        }
    }

    /// An idle inline connection that still looks usable, if any.
    fn take_inline(&self, idle: &Idle) -> Option<Conn> {
        let mut conns = idle.inline.lock().ok()?;
        while let Some(mut conn) = conns.pop() {
            if conn.idle_usable() {
                return Some(conn);
            }
        }
        None
    }

    /// A new inline connection to upstream `slot`.
    async fn connect_inline(&self, slot: usize, authority: &Authority) -> Result<Conn, SendError> {
        let tls = self.tls.get(slot).and_then(Option::as_ref);
        let stream = tcp_connect(authority, tls.is_some()).await?;
        let io = match tls {
            None => UpstreamIo::Plain(stream),
            Some(tls) => UpstreamIo::Tls(Box::new(
                tls.connect(stream).await.map_err(SendError::Connect)?,
            )),
        };
        Ok(Conn::new(io))
    }

    /// [`Pool::send`] on hyper's client.
    async fn send_hyper(
        self: &Arc<Self>,
        slot: usize,
        authority: &Authority,
        request: Request<ProxyBody>,
    ) -> Result<(Response<Incoming>, Lent), SendError> {
        // A fresh connection is the rare path: boxed, so that the common one's state (moved
        // as it starts) stays small.
        let Some(mut sender) = self.take_ready(slot).await else {
            return Box::pin(self.send_fresh(slot, authority, request)).await;
        };
        let replay = replayable(&request).then(|| copy_head(&request));
        match sender.try_send_request(request).await {
            Ok(response) => Ok((response, self.lend(slot, sender))),
            Err(mut failed) => {
                let retry = failed.take_message().or_else(|| {
                    let error = failed.error();
                    (!error.is_parse() && !error.is_user())
                        .then_some(replay)
                        .flatten()
                });
                match retry {
                    Some(request) => Box::pin(self.send_fresh(slot, authority, request)).await,
                    None if failed.error().is_parse() => Err(SendError::Http(failed.into_error())),
                    None => Err(SendError::Race(Box::new(failed.into_error()))),
                }
            }
        }
    }

    /// `sender` on loan to one exchange; it comes back to `slot` when the exchange ends.
    fn lend(self: &Arc<Self>, slot: usize, sender: SendRequest<ProxyBody>) -> Lent {
        Lent {
            pool: self.clone(),
            slot,
            sender,
        }
    }

    /// An idle connection that still looks usable, if any.
    async fn take_ready(&self, slot: usize) -> Option<SendRequest<ProxyBody>> {
        loop {
            let mut sender = self.take(slot)?;
            if !sender.is_closed() && sender.ready().await.is_ok() {
                return Some(sender);
            }
        }
    }

    /// Sends `request` on a new connection.
    async fn send_fresh(
        self: &Arc<Self>,
        slot: usize,
        authority: &Authority,
        request: Request<ProxyBody>,
    ) -> Result<(Response<Incoming>, Lent), SendError> {
        let mut sender = self.connect(slot, authority).await?;
        match sender.send_request(request).await {
            Ok(response) => Ok((response, self.lend(slot, sender))),
            Err(e) => Err(SendError::Http(e)),
        }
    }

    async fn connect(
        &self,
        slot: usize,
        authority: &Authority,
    ) -> Result<SendRequest<ProxyBody>, SendError> {
        let tls = self.tls.get(slot).and_then(Option::as_ref);
        let stream = tcp_connect(authority, tls.is_some()).await?;
        match tls {
            None => handshake(stream).await,
            Some(tls) => handshake(tls.connect(stream).await.map_err(SendError::Connect)?).await,
        }
    }
}

/// A TCP connection (no delay) to `authority`, on its port or the scheme's default (443
/// with `tls`, else 80); an IPv6 literal is dialled without its brackets.
pub(crate) async fn tcp_connect(
    authority: &Authority,
    tls: bool,
) -> Result<tokio::net::TcpStream, SendError> {
    let port = authority.port_u16().unwrap_or(if tls { 443 } else { 80 });
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    let stream = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(SendError::Connect)?;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// HTTP/1.1 over `io`, its connection driven by a task of its own.
async fn handshake<T>(io: T) -> Result<SendRequest<ProxyBody>, SendError>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let (sender, connection) = hyper::client::conn::http1::Builder::new()
        // As for the answers to clients (see `server::serve`): one buffer, plain writes.
        .writev(false)
        .handshake(TokioIo::new(io))
        .await
        .map_err(SendError::Http)?;
    tokio::spawn(async move {
        // With upgrades: a 101 hands the connection over to a tunnel.
        let _ = connection.with_upgrades().await;
    });
    Ok(sender)
}

/// A slot the pool does not have (never, for a request routed by the same config).
fn no_slot() -> SendError {
    SendError::Connect(std::io::Error::other(
        "no such upstream in this worker's pool",
    ))
}
