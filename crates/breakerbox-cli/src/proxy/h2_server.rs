//! HTTP/2 from clients: prior knowledge (h2c) on the plain listener, told from HTTP/1.1 by
//! the connection preface (peeked, not read: an HTTP/1.1 connection reaches hyper's
//! HTTP/1 server untouched), and ALPN `h2` on the TLS listener. Streams are served by
//! the same handler as HTTP/1.1 requests; shutdown sends GOAWAY and lets the streams in
//! flight finish (the grace period is the caller's). A connection with no stream for
//! `limits.idle_timeout` is sent GOAWAY and closed, as an HTTP/1.1 connection that sends
//! no request head for as long is: idle connections cannot hold the proxy's connection
//! places for ever.

use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::service::HttpService;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::body::BoxError;
use super::requests::Requests;

/// The client connection preface of HTTP/2 (RFC 9113 §3.4).
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What a plain connection speaks, by its first bytes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Sniffed {
    /// HTTP/1.x (or anything that is not the HTTP/2 preface: hyper answers it).
    Http1,
    /// HTTP/2 with prior knowledge.
    Http2,
    /// Closed, silent for too long, or shutdown came first: close it.
    Nothing,
}

/// What `seen` (the first bytes so far) says: `None` while they are a strict prefix of
/// the preface.
fn classify(seen: &[u8]) -> Option<Sniffed> {
    let n = seen.len().min(PREFACE.len());
    if seen[..n] != PREFACE[..n] {
        Some(Sniffed::Http1)
    } else if n == PREFACE.len() {
        Some(Sniffed::Http2)
    } else {
        None
    }
}

/// Peeks at the first bytes of `stream` (they stay in the socket for the server that
/// serves it), for at most `idle` (as long as the HTTP/1.1 server waits for a request
/// head). A request's first byte is enough unless it is a `P`.
pub async fn sniff(
    stream: &TcpStream,
    stop: &mut watch::Receiver<bool>,
    idle: Duration,
) -> Sniffed {
    let peek = async {
        let mut buf = [0u8; PREFACE.len()];
        loop {
            match stream.peek(&mut buf).await {
                Ok(0) | Err(_) => return Sniffed::Nothing,
                Ok(n) => match classify(&buf[..n]) {
                    Some(sniffed) => return sniffed,
                    // A prefix of the preface: the rest is on its way (peeking again at
                    // once would see the same bytes).
                    None => tokio::time::sleep(Duration::from_millis(5)).await,
                },
            }
        }
    };
    tokio::select! {
        sniffed = tokio::time::timeout(idle, peek) => {
            sniffed.unwrap_or(Sniffed::Nothing)
        }
        _ = stop.wait_for(|s| *s) => Sniffed::Nothing,
    }
}

/// The HTTP/2 server settings: header lists bounded as HTTP/1.1 heads are.
pub fn builder(max_header_bytes: usize) -> hyper::server::conn::http2::Builder<TokioExecutor> {
    let mut http = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    http.timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(max_header_bytes.max(8192)).unwrap_or(u32::MAX));
    http
}

/// Serves HTTP/2 on `io` until the client closes it; until shutdown (then GOAWAY, and the
/// streams in flight finish); or until it has had no request in flight for `idle` (then
/// GOAWAY, and the connection ends once the client has seen it, or after another `idle`
/// without a request from a client that never answers).
pub async fn drive<I, S, B>(
    http: &hyper::server::conn::http2::Builder<TokioExecutor>,
    io: I,
    service: S,
    stop: &mut watch::Receiver<bool>,
    requests: &Requests,
    idle: Duration,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    S: HttpService<Incoming, ResBody = B> + Send,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let connection = http.serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    let stopped = tokio::select! {
        _ = connection.as_mut() => return,
        _ = stop.wait_for(|s| *s) => true,
        _ = requests.idle_for(idle) => false,
    };
    connection.as_mut().graceful_shutdown();
    if stopped {
        let _ = connection.await;
        return;
    }
    // Idle: the goodbye (GOAWAY, a PING to learn which streams the client had started,
    // the final GOAWAY) needs the client's answer; a client that never gives it, and
    // starts nothing, is closed after another idle stretch. Shutdown meanwhile closes
    // it at once unless a stream started in the meantime.
    let streams_to_finish = tokio::select! {
        _ = connection.as_mut() => false,
        _ = requests.idle_for(idle) => false,
        _ = stop.wait_for(|s| *s) => requests.in_flight() > 0,
    };
    if streams_to_finish {
        let _ = connection.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preface_and_its_prefixes_are_told_from_http1() {
        assert_eq!(classify(PREFACE), Some(Sniffed::Http2));
        assert_eq!(
            classify(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0"),
            Some(Sniffed::Http2)
        );
        assert_eq!(classify(b"PRI * HTTP/2.0\r\n"), None);
        assert_eq!(classify(b"P"), None);
        assert_eq!(classify(b"POST / HTTP/1.1\r\n"), Some(Sniffed::Http1));
        assert_eq!(classify(b"GET / HTTP/1.1\r\n"), Some(Sniffed::Http1));
        assert_eq!(classify(b"PRI * HTTP/1.1\r\n"), Some(Sniffed::Http1));
    }
}
