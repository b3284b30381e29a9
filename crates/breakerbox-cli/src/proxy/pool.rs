//! Keep-alive connections to upstreams, one pool per worker thread: a request takes an
//! idle connection (or opens one), and the connection goes back when the response body
//! has been read to its end. No task per request, no lock contention (the lock is only
//! ever taken by its own thread).

use std::sync::{Arc, Mutex};

use http::uri::Authority;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;

use super::body::ProxyBody;

/// How many idle connections to keep per upstream and thread.
const MAX_IDLE: usize = 1024;

/// Why no response came back.
#[derive(Debug)]
pub enum SendError {
    /// The connection could not be opened.
    Connect(std::io::Error),
    /// The exchange failed (reset, protocol error...).
    Http(hyper::Error),
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Connect(e) => write!(f, "connect: {e}"),
            SendError::Http(e) => {
                write!(f, "{e}")?;
                let mut source = std::error::Error::source(e);
                while let Some(s) = source {
                    write!(f, ": {s}")?;
                    source = s.source();
                }
                Ok(())
            }
        }
    }
}

/// The idle connections of one worker, per upstream (by index).
pub struct Pool {
    idle: Vec<Mutex<Vec<SendRequest<ProxyBody>>>>,
}

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
    /// A pool for `upstreams` upstreams.
    pub fn new(upstreams: usize) -> Pool {
        Pool {
            idle: (0..upstreams).map(|_| Mutex::new(Vec::new())).collect(),
        }
    }

    fn take(&self, slot: usize) -> Option<SendRequest<ProxyBody>> {
        self.idle.get(slot)?.lock().ok()?.pop()
    }

    fn put(&self, slot: usize, sender: SendRequest<ProxyBody>) {
        if sender.is_closed() {
            return;
        }
        if let Some(Ok(mut idle)) = self.idle.get(slot).map(|m| m.lock()) {
            if idle.len() < MAX_IDLE {
                idle.push(sender);
            }
        }
    }

    /// Sends `request` (its URI in origin-form: path and query) to upstream `slot` at
    /// `authority`, on an idle connection when one is usable, else on a new one. The
    /// response comes with the lent connection.
    pub async fn send(
        self: &Arc<Self>,
        slot: usize,
        authority: &Authority,
        request: Request<ProxyBody>,
    ) -> Result<(Response<Incoming>, Lent), SendError> {
        let mut sender = loop {
            match self.take(slot) {
                Some(mut sender) => {
                    if sender.is_closed() || sender.ready().await.is_err() {
                        continue;
                    }
                    break sender;
                }
                None => break self.connect(authority).await?,
            }
        };
        match sender.send_request(request).await {
            Ok(response) => Ok((
                response,
                Lent {
                    pool: self.clone(),
                    slot,
                    sender,
                },
            )),
            Err(e) => Err(SendError::Http(e)),
        }
    }

    async fn connect(&self, authority: &Authority) -> Result<SendRequest<ProxyBody>, SendError> {
        let port = authority.port_u16().unwrap_or(80);
        let stream = tokio::net::TcpStream::connect((authority.host(), port))
            .await
            .map_err(SendError::Connect)?;
        let _ = stream.set_nodelay(true);
        let (sender, connection) = hyper::client::conn::http1::Builder::new()
            .handshake(TokioIo::new(stream))
            .await
            .map_err(SendError::Http)?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(sender)
    }
}
