//! HTTP/2 through `breakerbox proxy`: clients with prior knowledge (h2c) on the plain
//! listener and by ALPN on the TLS listener, to HTTP/1.1 upstreams as before; HTTP/2 to
//! upstreams (`protocol = "http2"`: h2c, or ALPN over TLS), bodies streamed both ways.

#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

#[path = "../../breakerbox-redis/tests/support/certificates.rs"]
mod certificates;
#[path = "support/proxy_harness.rs"]
mod harness;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use harness::{check, get, listeners, runtime, temp_dir, ProxyProcess};
use http_body_util::{BodyExt, Empty, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};

fn file(dir: &Path, name: &str) -> String {
    dir.join(name).to_string_lossy().into_owned()
}

/// An HTTP/2 client (prior knowledge) over `io`.
async fn h2_client<T>(io: T) -> hyper::client::conn::http2::SendRequest<Empty<Bytes>>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .handshake(TokioIo::new(io))
        .await
        .unwrap();
    tokio::spawn(connection);
    sender
}

async fn h2_get(
    sender: &mut hyper::client::conn::http2::SendRequest<Empty<Bytes>>,
    uri: &str,
) -> (http::Response<()>, Bytes) {
    let request = http::Request::get(uri).body(Empty::new()).unwrap();
    let response = sender.send_request(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    (http::Response::from_parts(parts, ()), body)
}

#[test]
fn an_h2c_client_is_served_through_to_an_http1_upstream() {
    let upstream = harness::Upstream::start();
    let dir = temp_dir("h2c-client");
    let config = format!(
        "{}[[upstream]]\nname = \"plain\"\nroute = \"/\"\nurl = \"{}\"\n",
        listeners(),
        upstream.url()
    );
    let proxy = ProxyProcess::start(&dir, &config);
    let rt = runtime();
    rt.block_on(async {
        let tcp = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
        let mut sender = h2_client(tcp).await;
        for i in 0..3 {
            let (head, body) = h2_get(&mut sender, &format!("http://app.test/pay/{i}")).await;
            assert_eq!(head.status(), 200);
            assert_eq!(head.version(), http::Version::HTTP_2);
            assert_eq!(&body[..], b"ok");
        }
    });
    assert_eq!(upstream.count(), 3);
    // The upstream got HTTP/1.1 with the client's authority as its Host.
    let seen = upstream.last();
    assert_eq!(seen.target, "/pay/2");
    assert_eq!(
        seen.headers.get("host").map(String::as_str),
        Some("app.test")
    );
    // HTTP/1.1 on the same listener is served as before.
    assert_eq!(get(proxy.addr, "/pay").status, 200);
    assert_eq!(upstream.count(), 4);
    assert_eq!(proxy.status()["breakers"]["plain"]["calls"]["success"], 4);
}

#[test]
fn a_tls_client_that_chooses_h2_by_alpn_is_served_over_http2() {
    let certs = certificates::certificates("proxy-alpn", "IP:127.0.0.1");
    let upstream = harness::Upstream::start();
    let dir = temp_dir("alpn-h2");
    let config = format!(
        "{}[tls]\ncert = \"{}\"\nkey = \"{}\"\n[[upstream]]\nname = \"plain\"\nroute = \"/\"\nurl = \"{}\"\n",
        listeners(),
        file(&certs, "server.crt"),
        file(&certs, "server.key"),
        upstream.url()
    );
    let proxy = ProxyProcess::start(&dir, &config);
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_file_iter(certs.join("ca.crt")).unwrap() {
        roots.add(ca.unwrap()).unwrap();
    }
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(tls));
    let rt = runtime();
    rt.block_on(async {
        let tcp = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let stream = connector.connect(name, tcp).await.unwrap();
        assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        let mut sender = h2_client(stream).await;
        let (head, body) = h2_get(&mut sender, "https://127.0.0.1/pay").await;
        assert_eq!(head.status(), 200);
        assert_eq!(head.version(), http::Version::HTTP_2);
        assert_eq!(&body[..], b"ok");
    });
    assert_eq!(upstream.count(), 1);
}

/// An HTTP/2 server on loopback (h2c, or TLS offering only `h2` when `tls` is given)
/// that echoes each request body chunk by chunk as it arrives, after a head naming the
/// version it was asked in; counts its connections.
fn echo_server(tls: Option<Arc<rustls::ServerConfig>>) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                counted.fetch_add(1, Ordering::SeqCst);
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(echo);
                    let http = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
                    match acceptor {
                        None => {
                            let _ = http.serve_connection(TokioIo::new(tcp), service).await;
                        }
                        Some(acceptor) => {
                            if let Ok(tls) = acceptor.accept(tcp).await {
                                let _ = http.serve_connection(TokioIo::new(tls), service).await;
                            }
                        }
                    }
                });
            }
        });
    });
    (addr, connections)
}

async fn echo(
    request: http::Request<Incoming>,
) -> Result<
    http::Response<
        StreamBody<tokio_stream::wrappers::ReceiverStream<Result<Frame<Bytes>, Infallible>>>,
    >,
    Infallible,
> {
    let version = format!("{:?}", request.version());
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let mut body = request.into_body();
    tokio::spawn(async move {
        while let Some(Ok(frame)) = body.frame().await {
            if let Ok(data) = frame.into_data() {
                // Skip the empty frame that may carry the end of the stream.
                if data.is_empty() {
                    continue;
                }
                if tx.send(Ok(Frame::data(data))).await.is_err() {
                    return;
                }
            }
        }
    });
    let response = http::Response::builder()
        .header("x-version", version)
        .body(StreamBody::new(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        ))
        .unwrap();
    Ok(response)
}

/// Through the proxy to the echo server: each chunk sent comes back before the next is
/// sent (streaming both ways, nothing buffered whole).
fn ping_pong(proxy: SocketAddr, rounds: usize) {
    let rt = runtime();
    rt.block_on(async {
        let tcp = tokio::net::TcpStream::connect(proxy).await.unwrap();
        let (mut sender, connection) =
            hyper::client::conn::http2::Builder::new(TokioExecutor::new())
                .handshake::<_, StreamBody<tokio_stream::wrappers::ReceiverStream<Result<Frame<Bytes>, Infallible>>>>(TokioIo::new(tcp))
                .await
                .unwrap();
        tokio::spawn(connection);
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let request = http::Request::post("http://echo.test/echo")
            .body(StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(rx)))
            .unwrap();
        tx.send(Ok(Frame::data(Bytes::from("chunk-0")))).await.unwrap();
        let response = tokio::time::timeout(Duration::from_secs(5), sender.send_request(request))
            .await
            .expect("the head came before the request body ended")
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["x-version"], "HTTP/2.0");
        let mut body = response.into_body();
        for i in 0..rounds {
            let frame = tokio::time::timeout(Duration::from_secs(5), body.frame())
                .await
                .expect("the echo of the chunk came back before the next was sent")
                .unwrap()
                .unwrap();
            assert_eq!(frame.into_data().unwrap(), format!("chunk-{i}"));
            if i + 1 < rounds {
                tx.send(Ok(Frame::data(Bytes::from(format!("chunk-{}", i + 1)))))
                    .await
                    .unwrap();
            }
        }
        drop(tx);
        // The answer ends with the request (an empty last frame may carry its end).
        let rest = body.collect().await.unwrap().to_bytes();
        assert!(rest.is_empty(), "{rest:?}");
    });
}

fn h2_upstream_config(url: &str, tls: &str) -> String {
    format!(
        "listen = \"127.0.0.1:0\"\nworkers = 1\n[admin]\nlisten = \"127.0.0.1:0\"\n\
         [[upstream]]\nname = \"echo\"\nroute = \"/\"\nurl = \"{url}\"\nprotocol = \"http2\"\n\
         [upstream.breaker]\nconsecutive_failures = 2\n{tls}"
    )
}

#[test]
fn an_h2c_upstream_streams_both_ways_over_one_shared_connection() {
    let (server, connections) = echo_server(None);
    let dir = temp_dir("h2c-upstream");
    let proxy = ProxyProcess::start(&dir, &h2_upstream_config(&format!("http://{server}"), ""));
    ping_pong(proxy.addr, 3);
    ping_pong(proxy.addr, 2);
    assert_eq!(
        connections.load(Ordering::SeqCst),
        1,
        "one connection, shared"
    );
    assert_eq!(proxy.status()["breakers"]["echo"]["calls"]["success"], 2);
}

fn tls_server_config(certs: &Path, alpn: &[&[u8]]) -> Arc<rustls::ServerConfig> {
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(certs.join("server.crt"))
            .unwrap()
            .map(Result::unwrap)
            .collect();
    let key = PrivateKeyDer::from_pem_file(certs.join("server.key")).unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .unwrap();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

#[test]
fn an_https_upstream_speaks_http2_when_it_chooses_h2_by_alpn() {
    let certs = certificates::certificates("proxy-h2-upstream", "IP:127.0.0.1");
    let (server, _) = echo_server(Some(tls_server_config(&certs, &[b"h2"])));
    let dir = temp_dir("h2-tls-upstream");
    let tls = format!("[upstream.tls]\nca_file = \"{}\"\n", file(&certs, "ca.crt"));
    let proxy = ProxyProcess::start(
        &dir,
        &h2_upstream_config(&format!("https://{server}"), &tls),
    );
    ping_pong(proxy.addr, 2);
    assert_eq!(proxy.status()["breakers"]["echo"]["calls"]["success"], 1);

    // An upstream that chooses no protocol (it knows nothing of ALPN, as many HTTP/1.1
    // servers): a connect failure with its reason.
    let (old, _) = echo_server(Some(tls_server_config(&certs, &[])));
    let dir = temp_dir("h2-tls-upstream-refused");
    let proxy = ProxyProcess::start(&dir, &h2_upstream_config(&format!("https://{old}"), &tls));
    let reply = get(proxy.addr, "/echo");
    assert_eq!(reply.status, 502, "{reply:?}");
    assert!(
        reply.body.contains("did not choose HTTP/2"),
        "{}",
        reply.body
    );
    let b = &proxy.status()["breakers"]["echo"];
    assert_eq!(b["calls"]["failure"], 1, "{b}");
    assert_eq!(
        b["last_judgement"]["reason"], "transport: connect failed",
        "{b}"
    );
}

#[test]
fn a_protocol_other_than_http1_or_http2_is_refused_with_its_key() {
    let dir = temp_dir("h2-config");
    let with = |protocol: &str| {
        format!(
            "{}[[upstream]]\nname = \"a\"\nroute = \"/\"\nurl = \"http://127.0.0.1:9\"\nprotocol = {protocol}\n",
            listeners()
        )
    };
    let (ok, stderr) = check(&dir, "h3.toml", &with("\"http3\""));
    assert!(!ok);
    assert!(
        stderr.contains(
            "upstream[0].protocol: invalid value \"http3\": expected \"http1\" or \"http2\""
        ),
        "{stderr}"
    );
    let (ok, stderr) = check(&dir, "num.toml", &with("2"));
    assert!(!ok);
    assert!(
        stderr.contains("upstream[0].protocol: invalid value 2"),
        "{stderr}"
    );
    for good in ["\"http1\"", "\"http2\""] {
        let (ok, stderr) = check(&dir, "good.toml", &with(good));
        assert!(ok, "{good}: {stderr}");
    }
}
