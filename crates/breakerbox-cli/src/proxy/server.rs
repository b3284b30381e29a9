//! Accept loops with graceful shutdown: stop accepting, let connections finish the
//! requests they are serving up to a grace period, and close at once the ones serving
//! none (idle, or still sending a request head).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::server::conn::http1::UpgradeableConnection;
use hyper::service::{service_fn, HttpService};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsAcceptor;

use super::balance::{Balance, Handoff, Load, Target};
use super::body::{BoxError, ProxyBody};
use super::grpc_reply;
use super::h2_server::{self, Sniffed};
use super::in_place;
use super::requests::{Active, Requests};

/// A handler's way to close a connection without answering (its client is gone).
#[derive(Debug)]
pub struct Hangup;

impl std::fmt::Display for Hangup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the client went away")
    }
}

impl std::error::Error for Hangup {}

/// A response body that counts as a request in flight on its connection until hyper
/// has written it (or dropped it).
pub struct Tracked {
    inner: ProxyBody,
    _active: Active,
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Serves HTTP/1.1 (and HTTP/2: [`h2_server`]) on `listener` with `handler` until `stop` turns true, then waits up to
/// `grace` for open connections to finish the requests they are serving (connections
/// serving none close at once). With a `limit`, at most its permits' worth of
/// connections are open at once. With a `balance`, a connection goes to the worker
/// serving the fewest (this one, or another it is handed to), and connections handed
/// over by other workers are served here. Returns how many connections were cut at the
/// end of the grace period (0 when all finished).
#[allow(clippy::too_many_arguments)]
pub async fn serve<H, F>(
    listener: TcpListener,
    handler: Arc<H>,
    call: fn(Arc<H>, Request<Incoming>, SocketAddr) -> F,
    max_buf_size: usize,
    idle: Duration,
    mut stop: watch::Receiver<bool>,
    grace: Duration,
    limit: Option<Arc<Semaphore>>,
    mut balance: Option<Balance>,
    tls: Option<TlsAcceptor>,
) -> usize
where
    H: Send + Sync + 'static,
    F: Future<Output = Result<Response<ProxyBody>, Hangup>> + Send + 'static,
{
    let mut http = hyper::server::conn::http1::Builder::new();
    // Heads and body chunks are copied into one buffer and sent with plain writes, not
    // gathered by vectored writes: for the small answers a proxy mostly relays, the copy
    // costs less than `writev` (about 5 % less CPU per proxied request, measured on
    // loopback with wrk).
    http.timer(TokioTimer::new())
        .writev(false)
        .keep_alive(true)
        .max_buf_size(max_buf_size.max(8192))
        .header_read_timeout(idle);
    // Every connection task holds a sender: the channel closes when the last one ends.
    let (open_tx, mut open_rx) = mpsc::channel::<()>(1);
    let connections = Connections {
        http,
        handler,
        call,
        stop: stop.clone(),
        open_tx,
        open: Arc::new(AtomicUsize::new(0)),
        tls,
        h2: h2_server::builder(max_buf_size),
        idle,
    };
    // A place under the connection limit, taken before accepting.
    let mut permit = None;
    loop {
        // At the connection limit, stop accepting: new clients wait in the backlog.
        if let (Some(limit), None) = (&limit, &permit) {
            tokio::select! {
                taken = limit.clone().acquire_owned() => permit = taken.ok(),
                Some(handed) = handed_over(&mut balance) => {
                    connections.serve_handed(handed);
                    continue;
                }
                _ = stop.changed() => break,
            }
        }
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(pair) => pair,
                    Err(_) => {
                        // Out of file descriptors and the like: back off a little.
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let permit = permit.take();
                match balance.as_ref().map(Balance::pick) {
                    None => connections.spawn(stream, peer, permit, None),
                    Some(Target::Here(load)) => {
                        connections.spawn(stream, peer, permit, Some(load));
                    }
                    Some(Target::There(load)) => {
                        if let (Some(balance), Ok(stream)) = (&balance, stream.into_std()) {
                            balance.hand_over(Handoff { stream, peer, permit, load });
                        }
                    }
                }
            }
            Some(handed) = handed_over(&mut balance) => connections.serve_handed(handed),
            _ = stop.changed() => break,
        }
    }
    drop(listener);
    // Connections handed over but not yet served are closed with the inbox.
    drop(balance);
    let open = connections.open.clone();
    drop(connections);
    match tokio::time::timeout(grace, open_rx.recv()).await {
        Ok(_) => 0,
        Err(_) => open.load(Ordering::Acquire),
    }
}

/// The next connection another worker handed over (never, without a balance).
async fn handed_over(balance: &mut Option<Balance>) -> Option<Handoff> {
    match balance {
        Some(balance) => balance.received().await,
        None => std::future::pending().await,
    }
}

/// What serving a connection needs, the same for every connection of a listener.
struct Connections<H, F> {
    http: hyper::server::conn::http1::Builder,
    handler: Arc<H>,
    call: fn(Arc<H>, Request<Incoming>, SocketAddr) -> F,
    stop: watch::Receiver<bool>,
    open_tx: mpsc::Sender<()>,
    open: Arc<AtomicUsize>,
    /// With `[tls]`: the handshake each connection starts with.
    tls: Option<TlsAcceptor>,
    /// HTTP/2, for clients that start with its preface or choose it by ALPN.
    h2: hyper::server::conn::http2::Builder<TokioExecutor>,
    /// How long a connection may go without a request in flight.
    idle: Duration,
}

impl<H, F> Connections<H, F>
where
    H: Send + Sync + 'static,
    F: Future<Output = Result<Response<ProxyBody>, Hangup>> + Send + 'static,
{
    /// Serves a connection another worker accepted, on this worker's runtime.
    fn serve_handed(&self, handed: Handoff) {
        if let Ok(stream) = tokio::net::TcpStream::from_std(handed.stream) {
            self.spawn(stream, handed.peer, handed.permit, Some(handed.load));
        }
    }

    /// Serves `stream` from `peer` on a task of its own; `permit` and `load` are held
    /// until it closes.
    fn spawn(
        &self,
        stream: tokio::net::TcpStream,
        peer: SocketAddr,
        permit: Option<OwnedSemaphorePermit>,
        load: Option<Load>,
    ) {
        let handler = self.handler.clone();
        let call = self.call;
        let requests = Requests::new();
        let counted = requests.clone();
        let service = service_fn(move |request| {
            let tracked = Active::new(&counted);
            // gRPC clients get the proxy's own answers as gRPC ones.
            let grpc = grpc_reply::is_grpc(&request);
            // Boxed once here: hyper moves the service's future several times
            // per request, and the handler's state machine is kilobytes large.
            let handler = handler.clone();
            let response = in_place::pinned(move || call(handler, request, peer));
            async move {
                let response = response.await?;
                let response = if grpc {
                    grpc_reply::adapt(response)
                } else {
                    response
                };
                Ok::<_, Hangup>(response.map(|inner| Tracked {
                    inner,
                    _active: tracked,
                }))
            }
        });
        let http = self.http.clone();
        let h2 = self.h2.clone();
        let idle = self.idle;
        let tls = self.tls.clone();
        let mut stop = self.stop.clone();
        let open_tx = self.open_tx.clone();
        let open = self.open.clone();
        open.fetch_add(1, Ordering::AcqRel);
        tokio::spawn(async move {
            match tls {
                None => match h2_server::sniff(&stream, &mut stop, idle).await {
                    Sniffed::Http1 => {
                        let connection = http
                            .serve_connection(TokioIo::new(stream), service)
                            .with_upgrades();
                        drive(connection, &mut stop, &requests).await;
                    }
                    Sniffed::Http2 => {
                        h2_server::drive(&h2, stream, service, &mut stop, &requests, idle).await
                    }
                    Sniffed::Nothing => {}
                },
                Some(acceptor) => {
                    // A client that does not finish its handshake in time is closed, as
                    // one that does not send its head; shutdown closes it at once (it is
                    // serving no request).
                    let handshake =
                        tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream));
                    let accepted = tokio::select! {
                        accepted = handshake => accepted.ok().and_then(Result::ok),
                        _ = stop.wait_for(|s| *s) => None,
                    };
                    match accepted {
                        // ALPN chose HTTP/2.
                        Some(tls) if tls.get_ref().1.alpn_protocol() == Some(b"h2") => {
                            h2_server::drive(&h2, tls, service, &mut stop, &requests, idle).await;
                        }
                        Some(tls_stream) => {
                            let connection = http
                                .serve_connection(TokioIo::new(tls_stream), service)
                                .with_upgrades();
                            drive(connection, &mut stop, &requests).await;
                        }
                        None => {}
                    }
                }
            }
            open.fetch_sub(1, Ordering::AcqRel);
            drop(load);
            drop(permit);
            drop(open_tx);
        });
    }
}

/// How long a client may take over its TLS handshake.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `connection` until it ends, or until shutdown: then a connection serving no
/// request (idle, or a head still arriving) closes at once, one serving requests finishes
/// them (the grace period is the caller's).
async fn drive<I, S, B>(
    connection: UpgradeableConnection<I, S>,
    stop: &mut watch::Receiver<bool>,
    requests: &Requests,
) where
    S: HttpService<Incoming, ResBody = B>,
    S::Error: Into<BoxError>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    B: Body + 'static,
    B::Error: Into<BoxError>,
{
    tokio::pin!(connection);
    let stopped = tokio::select! {
        _ = connection.as_mut() => false,
        _ = stop.wait_for(|s| *s) => true,
    };
    // Serving no request (idle, or a head still arriving): close now.
    if stopped && requests.in_flight() > 0 {
        connection.as_mut().graceful_shutdown();
        let _ = connection.await;
    }
}
