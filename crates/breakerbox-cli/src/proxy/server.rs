//! Accept loops with graceful shutdown: stop accepting, let connections finish their
//! requests in flight up to a grace period.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use super::body::ProxyBody;

/// A handler's way to close a connection without answering (its client is gone).
#[derive(Debug)]
pub struct Hangup;

impl std::fmt::Display for Hangup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the client went away")
    }
}

impl std::error::Error for Hangup {}

/// Serves HTTP/1.1 on `listener` with `handler` until `stop` turns true, then waits up to
/// `grace` for open connections to finish their requests. With a `limit`, at most its
/// permits' worth of connections are open at once. Returns whether every
/// connection finished in time.
pub async fn serve<H, F>(
    listener: TcpListener,
    handler: Arc<H>,
    call: fn(Arc<H>, Request<Incoming>, SocketAddr) -> F,
    max_buf_size: usize,
    mut stop: watch::Receiver<bool>,
    grace: Duration,
    limit: Option<Arc<Semaphore>>,
) -> bool
where
    H: Send + Sync + 'static,
    F: Future<Output = Result<Response<ProxyBody>, Hangup>> + Send + 'static,
{
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .keep_alive(true)
        .max_buf_size(max_buf_size.max(8192))
        .header_read_timeout(Duration::from_secs(30));
    loop {
        // At the connection limit, stop accepting: new clients wait in the backlog.
        let permit = match &limit {
            Some(limit) => tokio::select! {
                permit = limit.clone().acquire_owned() => permit.ok(),
                _ = stop.changed() => break,
            },
            None => None,
        };
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
                let handler = handler.clone();
                let service = service_fn(move |request| call(handler.clone(), request, peer));
                let connection = http.serve_connection(TokioIo::new(stream), service);
                let connection = graceful.watch(connection);
                tokio::spawn(async move {
                    let _ = connection.await;
                    drop(permit);
                });
            }
            _ = stop.changed() => break,
        }
    }
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => true,
        _ = tokio::time::sleep(grace) => false,
    }
}
