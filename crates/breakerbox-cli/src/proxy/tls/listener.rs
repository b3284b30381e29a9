//! The listener's certificate (`[tls]`), held so a reload can replace it: every TLS
//! handshake asks [`ListenerCert`] for the certificate of the moment, and a reload that
//! reads renewed `cert` and `key` files swaps them in. Connections already open keep
//! the certificate they were made with; the next handshake gets the new one.

use std::fmt;
use std::sync::{Arc, RwLock};

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// The listener's TLS: the rustls server config its acceptor uses, and the certificate
/// behind it.
#[derive(Clone, Debug)]
pub struct ListenerTls {
    /// The server config (ALPN `h2` and `http/1.1`), resolving its certificate through
    /// [`ListenerTls::cert`].
    pub server: Arc<rustls::ServerConfig>,
    /// The certificate every handshake presents, replaceable.
    pub cert: Arc<ListenerCert>,
}

/// The certificate and key presented by the listener, replaced by a reload.
pub struct ListenerCert {
    current: RwLock<Arc<CertifiedKey>>,
}

impl ListenerCert {
    /// Presents `key` (a chain and its signing key, checked to fit) from now on.
    pub fn new(key: Arc<CertifiedKey>) -> ListenerCert {
        ListenerCert {
            current: RwLock::new(key),
        }
    }

    /// The certificate presented now.
    pub fn current(&self) -> Arc<CertifiedKey> {
        match self.current.read() {
            Ok(key) => key.clone(),
            // A writer that panicked left a whole value behind (a swap is one store).
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Presents `next`'s certificate from the next handshake on.
    pub fn replace_with(&self, next: &ListenerCert) {
        let key = next.current();
        match self.current.write() {
            Ok(mut current) => *current = key,
            Err(poisoned) => *poisoned.into_inner() = key,
        }
    }
}

impl ResolvesServerCert for ListenerCert {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

impl fmt::Debug for ListenerCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListenerCert")
            .field("chain_len", &self.current().cert.len())
            .finish()
    }
}
