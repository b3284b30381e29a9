//! The loopback upstream in this process: a fixed 200 JSON answer over HTTP/1.1 with
//! keep-alive, plain or behind TLS (rustls, a certificate from a private CA made with
//! `openssl`), on its own 2-thread runtime. It counts the connections it accepts (and,
//! behind TLS, the handshakes that resumed a session), so the bench can show that every
//! proxy reuses its upstream connections.

use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

pub const BODY: &[u8] = b"{\"ok\":true,\"payload\":\"hello from the upstream\"}";

/// What an upstream has seen so far.
#[derive(Default)]
pub struct Counters {
    /// Connections accepted (behind TLS: handshakes completed).
    pub connections: AtomicU64,
    /// TLS handshakes that resumed an earlier session.
    pub resumed: AtomicU64,
    /// The TLS version and cipher suite of the last handshake.
    pub suite: Mutex<String>,
}

impl Counters {
    /// (connections, resumed) now.
    pub fn read(&self) -> (u64, u64) {
        (
            self.connections.load(Ordering::Relaxed),
            self.resumed.load(Ordering::Relaxed),
        )
    }
}

/// A running upstream: where it listens and what it has counted.
pub struct Upstream {
    pub addr: SocketAddr,
    pub counters: Arc<Counters>,
}

async fn serve<I>(io: I)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(|_req: Request<hyper::body::Incoming>| async {
        let mut r = Response::new(Full::new(Bytes::from_static(BODY)));
        r.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        Ok::<_, Infallible>(r)
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(io), service)
        .await;
}

/// The TLS settings of the upstream: the server certificate and key in `certs`.
fn server_config(certs: &Path) -> Arc<rustls::ServerConfig> {
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(certs.join("server.crt"))
            .expect("read server.crt")
            .map(|c| c.expect("a certificate"))
            .collect();
    let key = PrivateKeyDer::from_pem_file(certs.join("server.key")).expect("read server.key");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("server certificate");
    Arc::new(config)
}

/// Starts the upstream: plain HTTP/1.1, or HTTPS with the certificate in `tls`.
pub fn start(tls: Option<&Path>) -> Upstream {
    let std_listener = TcpListener::bind("127.0.0.1:0").expect("bind upstream");
    std_listener.set_nonblocking(true).expect("nonblocking");
    let addr = std_listener.local_addr().expect("addr");
    let acceptor = tls.map(|dir| tokio_rustls::TlsAcceptor::from(server_config(dir)));
    let counters = Arc::new(Counters::default());
    let seen = counters.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(std_listener).expect("listener");
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let (acceptor, seen) = (acceptor.clone(), seen.clone());
                tokio::spawn(async move {
                    let Some(acceptor) = acceptor else {
                        seen.connections.fetch_add(1, Ordering::Relaxed);
                        return serve(stream).await;
                    };
                    let Ok(tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let connection = tls.get_ref().1;
                    seen.connections.fetch_add(1, Ordering::Relaxed);
                    if connection.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
                        seen.resumed.fetch_add(1, Ordering::Relaxed);
                    }
                    if let (Some(version), Some(suite)) = (
                        connection.protocol_version(),
                        connection.negotiated_cipher_suite(),
                    ) {
                        if let Ok(mut last) = seen.suite.lock() {
                            *last = format!("{version:?} {:?}", suite.suite());
                        }
                    }
                    serve(tls).await;
                });
            }
        });
    });
    Upstream { addr, counters }
}
