//! HTTPS to upstreams: rustls (the ring provider), the system's root certificates plus an
//! optional private CA, SNI, and an optional client certificate. Built once when the
//! config is read, so `--check` finds an unreadable or malformed file; a handshake that
//! fails (a certificate the roots do not vouch for, a wrong name, a refused client
//! certificate) is a connect failure of the upstream, with rustls's reason.

mod listener;

pub use listener::{ListenerCert, ListenerTls};

use std::sync::Arc;

use rustls_pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// How the proxy speaks TLS to one upstream.
#[derive(Clone)]
pub struct UpstreamTls {
    connector: TlsConnector,
    server_name: ServerName<'static>,
}

impl std::fmt::Debug for UpstreamTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamTls")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl UpstreamTls {
    /// TLS with `config`, checking the upstream's certificate against `server_name` (also
    /// sent as SNI when it is a DNS name).
    pub fn new(config: rustls::ClientConfig, server_name: ServerName<'static>) -> UpstreamTls {
        UpstreamTls {
            connector: TlsConnector::from(Arc::new(config)),
            server_name,
        }
    }

    /// The TLS handshake over `tcp`; an error says why, naming the server.
    pub async fn connect(&self, tcp: TcpStream) -> std::io::Result<TlsStream<TcpStream>> {
        self.connector
            .connect(self.server_name.clone(), tcp)
            .await
            .map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("tls handshake with {}: {e}", self.server_name.to_str()),
                )
            })
    }
}
