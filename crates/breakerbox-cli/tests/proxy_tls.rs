//! `breakerbox proxy` in front of HTTPS upstreams: a real TLS server on loopback with
//! certificates made for the test (a private CA), SNI, client certificates, and
//! certificates the proxy must refuse (a transport failure with its reason).

#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

#[path = "../../breakerbox-redis/tests/support/certificates.rs"]
mod certificates;
#[path = "support/proxy_harness.rs"]
mod harness;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use harness::{check, eventually, get, listeners, temp_dir, ProxyProcess};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// An HTTPS server on a free loopback port with the certificate in `dir`, answering 200
/// "secure" and recording the SNI name each handshake sent; with `client_auth`, it
/// requires a client certificate from the test CA.
fn https_server(dir: &Path, client_auth: bool) -> (SocketAddr, Arc<Mutex<Vec<Option<String>>>>) {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(dir.join("server.crt"))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_file(dir.join("server.key")).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = if client_auth {
        let mut roots = rustls::RootCertStore::empty();
        for ca in CertificateDer::pem_file_iter(dir.join("ca.crt")).unwrap() {
            roots.add(ca.unwrap()).unwrap();
        }
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .unwrap();
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let config = Arc::new(builder.with_single_cert(chain, key).unwrap());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let names = Arc::new(Mutex::new(Vec::new()));
    let seen = names.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let acceptor = tokio_rustls::TlsAcceptor::from(config);
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let (acceptor, seen) = (acceptor.clone(), seen.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let sni = tls.get_ref().1.server_name().map(str::to_string);
                    seen.lock().unwrap().push(sni);
                    let service = service_fn(|_req: hyper::Request<hyper::body::Incoming>| async {
                        Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from_static(
                            b"secure",
                        ))))
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
    });
    (addr, names)
}

fn config(url: &str, tls: &str) -> String {
    format!(
        "{}[[upstream]]\nname = \"secure\"\nroute = \"/\"\nurl = \"{url}\"\n\
         [upstream.breaker]\nconsecutive_failures = 2\n{tls}",
        listeners()
    )
}

fn file(dir: &Path, name: &str) -> String {
    dir.join(name).to_string_lossy().into_owned()
}

#[test]
fn an_https_upstream_with_a_private_ca_is_served_with_sni() {
    let certs = certificates::certificates("proxy-sni", "DNS:upstream.test,IP:127.0.0.1");
    let (server, names) = https_server(&certs, false);
    let dir = temp_dir("tls-sni");
    let tls = format!(
        "[upstream.tls]\nca_file = \"{}\"\nserver_name = \"upstream.test\"\n",
        file(&certs, "ca.crt")
    );
    // One worker: its pool serves every request (pools are per worker thread).
    let config = format!(
        "workers = 1\n{}",
        config(&format!("https://{server}"), &tls)
    );
    let proxy = ProxyProcess::start(&dir, &config);
    for _ in 0..3 {
        let reply = get(proxy.addr, "/pay");
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(reply.body, "secure");
    }
    // One pooled TLS connection for the three requests, its handshake naming the
    // configured server.
    let names = names.lock().unwrap().clone();
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(
        names.iter().all(|n| n.as_deref() == Some("upstream.test")),
        "{names:?}"
    );
    let status = proxy.status();
    assert_eq!(
        status["breakers"]["secure"]["upstream"],
        format!("https://{server}"),
        "{status}"
    );
    assert_eq!(status["breakers"]["secure"]["calls"]["success"], 3);
}

#[test]
fn a_certificate_the_proxy_cannot_trust_is_a_transport_failure_with_its_reason() {
    let certs = certificates::certificates("proxy-untrusted", "IP:127.0.0.1");
    let (server, _) = https_server(&certs, false);
    let dir = temp_dir("tls-untrusted");
    // The system's roots only: they do not vouch for the test CA.
    let proxy = ProxyProcess::start(&dir, &config(&format!("https://{server}"), ""));
    for _ in 0..2 {
        let reply = get(proxy.addr, "/pay");
        assert_eq!(reply.status, 502, "{reply:?}");
        let detail = reply.json()["detail"].as_str().unwrap().to_string();
        assert!(
            detail.contains("tls handshake with 127.0.0.1") && detail.contains("certificate"),
            "{detail}"
        );
    }
    assert!(eventually(std::time::Duration::from_secs(5), || proxy
        .phase("secure")
        == "open"));
    let judgement = &proxy.status()["breakers"]["secure"]["last_judgement"];
    assert_eq!(judgement["verdict"], "failure");
    assert_eq!(judgement["reason"], "transport: connect failed");

    // The right CA but the wrong name is refused as well.
    let dir = temp_dir("tls-wrong-name");
    let tls = format!(
        "[upstream.tls]\nca_file = \"{}\"\nserver_name = \"other.test\"\n",
        file(&certs, "ca.crt")
    );
    let proxy = ProxyProcess::start(&dir, &config(&format!("https://{server}"), &tls));
    let reply = get(proxy.addr, "/pay");
    assert_eq!(reply.status, 502, "{reply:?}");
    assert!(
        reply.body.contains("not valid for name \\\"other.test\\\""),
        "{}",
        reply.body
    );
}

#[test]
fn a_client_certificate_is_sent_when_configured() {
    let certs = certificates::certificates("proxy-mtls", "IP:127.0.0.1");
    let (server, _) = https_server(&certs, true);
    let url = format!("https://{server}");
    let ca = format!("[upstream.tls]\nca_file = \"{}\"\n", file(&certs, "ca.crt"));
    // Without one, the server refuses the handshake.
    let dir = temp_dir("tls-no-client-cert");
    let proxy = ProxyProcess::start(&dir, &config(&url, &ca));
    assert_eq!(get(proxy.addr, "/pay").status, 502);
    drop(proxy);
    let dir = temp_dir("tls-client-cert");
    let tls = format!(
        "{ca}client_cert = \"{}\"\nclient_key = \"{}\"\n",
        file(&certs, "client.crt"),
        file(&certs, "client.key")
    );
    let proxy = ProxyProcess::start(&dir, &config(&url, &tls));
    let reply = get(proxy.addr, "/pay");
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.body, "secure");
}

#[test]
fn tls_settings_are_checked_and_name_their_key() {
    let certs = certificates::certificates("proxy-config", "IP:127.0.0.1");
    let dir = temp_dir("tls-config");
    let ca = file(&certs, "ca.crt");
    let key = file(&certs, "client.key");
    let cases = [
        (
            "http://127.0.0.1:9".to_string(),
            format!("[upstream.tls]\nca_file = \"{ca}\"\n"),
            "upstream[0].tls: needs an https:// url",
        ),
        (
            "https://127.0.0.1:9".to_string(),
            "[upstream.tls]\nca_file = \"/nonexistent/ca.pem\"\n".to_string(),
            "upstream[0].tls.ca_file: cannot read",
        ),
        (
            "https://127.0.0.1:9".to_string(),
            format!("[upstream.tls]\nca_file = \"{key}\"\n"),
            "upstream[0].tls.ca_file:",
        ),
        (
            "https://127.0.0.1:9".to_string(),
            format!(
                "[upstream.tls]\nclient_cert = \"{}\"\n",
                file(&certs, "client.crt")
            ),
            "upstream[0].tls.client_key: missing",
        ),
        (
            "https://127.0.0.1:9".to_string(),
            format!(
                "[upstream.tls]\nclient_cert = \"{}\"\nclient_key = \"{}\"\n",
                file(&certs, "client.crt"),
                file(&certs, "server.key")
            ),
            "upstream[0].tls.client_key: does not fit client_cert",
        ),
        (
            "https://127.0.0.1:9".to_string(),
            "[upstream.tls]\nserver_name = \"not a name!\"\n".to_string(),
            "upstream[0].tls.server_name: invalid value",
        ),
        (
            "https://127.0.0.1:9".to_string(),
            "[upstream.tls]\nsni = \"x\"\n".to_string(),
            "upstream[0].tls.sni: unknown key",
        ),
        (
            "ftp://127.0.0.1:9".to_string(),
            String::new(),
            "expected an http:// or https:// URL",
        ),
    ];
    for (i, (url, tls, expected)) in cases.iter().enumerate() {
        let (ok, stderr) = check(&dir, &format!("bad{i}.toml"), &config(url, tls));
        assert!(!ok, "{tls:?} passed --check");
        assert!(stderr.contains(expected), "{tls:?}: {stderr}");
    }
}

/// `GET path` over TLS to `addr`, trusting the CA in `certs`: the raw answer.
fn https_get(addr: SocketAddr, certs: &Path, path: &str) -> std::io::Result<String> {
    use std::io::{Read as _, Write as _};
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_file_iter(certs.join("ca.crt")).unwrap() {
        roots.add(ca.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let connection = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let tcp = std::net::TcpStream::connect(addr)?;
    tcp.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    let mut tls = rustls::StreamOwned::new(connection, tcp);
    write!(
        tls,
        "GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n"
    )?;
    let mut answer = String::new();
    match tls.read_to_string(&mut answer) {
        Ok(_) => Ok(answer),
        // A peer that closes without close_notify still sent its whole answer.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !answer.is_empty() => Ok(answer),
        Err(e) => Err(e),
    }
}

#[test]
fn a_tls_listener_serves_https_clients_and_nothing_else() {
    let certs = certificates::certificates("proxy-listener", "IP:127.0.0.1");
    let upstream = harness::Upstream::start();
    let dir = temp_dir("tls-listener");
    let config = format!(
        "{}[tls]\ncert = \"{}\"\nkey = \"{}\"\n[[upstream]]\nname = \"plain\"\nroute = \"/\"\nurl = \"{}\"\n",
        listeners(),
        file(&certs, "server.crt"),
        file(&certs, "server.key"),
        upstream.url()
    );
    let proxy = ProxyProcess::start(&dir, &config);
    assert!(proxy.stderr().contains(", https"), "{}", proxy.stderr());
    let answer = https_get(proxy.addr, &certs, "/pay").unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("ok"), "{answer}");
    assert_eq!(upstream.count(), 1);
    // Plain HTTP on the TLS port is no request: nothing reaches the upstream.
    let plain = harness::try_request(proxy.addr, "GET", "/pay", &[], b"");
    assert!(
        plain.as_ref().map_or(true, |r| r.status != 200),
        "{plain:?}"
    );
    assert_eq!(upstream.count(), 1);
    // The admin listener stays plain HTTP on loopback.
    assert_eq!(get(proxy.admin, "/status").status, 200);
}

#[test]
fn a_tls_listener_needs_a_readable_certificate_and_key() {
    let certs = certificates::certificates("proxy-listener-config", "IP:127.0.0.1");
    let dir = temp_dir("tls-listener-config");
    // A `[tls]` table goes after the other tables' keys; a plain `tls = ...` key before them.
    let with = |tls: &str| {
        let (before, after) = if tls.starts_with('[') {
            ("", tls)
        } else {
            (tls, "")
        };
        format!(
            "{before}{}{after}[[upstream]]\nname = \"a\"\nroute = \"/\"\nurl = \"http://127.0.0.1:9\"\n",
            listeners()
        )
    };
    let cases = [
        (
            format!("[tls]\ncert = \"{}\"\n", file(&certs, "server.crt")),
            "tls.key: missing",
        ),
        (
            "[tls]\ncert = \"/nonexistent.pem\"\nkey = \"/nonexistent.key\"\n".to_string(),
            "tls.cert: cannot read",
        ),
        (
            format!(
                "[tls]\ncert = \"{}\"\nkey = \"{}\"\n",
                file(&certs, "server.crt"),
                file(&certs, "client.key")
            ),
            "tls.key: does not fit tls.cert",
        ),
        ("tls = \"on\"\n".to_string(), "tls: expected a table"),
    ];
    for (i, (tls, expected)) in cases.iter().enumerate() {
        let (ok, stderr) = check(&dir, &format!("bad{i}.toml"), &with(tls));
        assert!(!ok, "{tls:?} passed --check");
        assert!(stderr.contains(expected), "{tls:?}: {stderr}");
    }
}

/// Certificate rotation: a reload reads the listener's `cert` and `key` again (renewed in
/// place, as certbot does) and the next handshake presents the new certificate, with no
/// restart; a reload whose key does not fit is refused and the old certificate stays;
/// the listener cannot stop speaking HTTPS on a reload.
#[test]
fn a_reload_presents_the_listeners_renewed_certificate() {
    let old = certificates::certificates("proxy-rotate-old", "IP:127.0.0.1");
    let new = certificates::certificates("proxy-rotate-new", "IP:127.0.0.1");
    let upstream = harness::Upstream::start();
    let dir = temp_dir("tls-rotate");
    let (cert, key) = (dir.join("listener.crt"), dir.join("listener.key"));
    let install = |from: &Path, crt: &str, k: &str| {
        std::fs::copy(from.join(crt), &cert).unwrap();
        std::fs::copy(from.join(k), &key).unwrap();
    };
    install(&old, "server.crt", "server.key");
    let config = format!(
        "{}[tls]\ncert = \"{}\"\nkey = \"{}\"\n[[upstream]]\nname = \"plain\"\nroute = \"/\"\nurl = \"{}\"\n",
        listeners(),
        cert.display(),
        key.display(),
        upstream.url()
    );
    let proxy = ProxyProcess::start(&dir, &config);
    assert!(https_get(proxy.addr, &old, "/a")
        .unwrap()
        .starts_with("HTTP/1.1 200"));
    assert!(
        https_get(proxy.addr, &new, "/a").is_err(),
        "not the new one yet"
    );

    // Renewed in place: the next handshake presents the new certificate.
    install(&new, "server.crt", "server.key");
    let reply = harness::admin_post(proxy.admin, "/reload", &[]);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let answer = https_get(proxy.addr, &new, "/b").unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let refused = https_get(proxy.addr, &old, "/b");
    assert!(
        refused.is_err(),
        "the old CA vouches for nothing now: {refused:?}"
    );

    // A key that does not fit: refused, the running certificate stays.
    install(&old, "server.crt", "client.key");
    let reply = harness::admin_post(proxy.admin, "/reload", &[]);
    assert_eq!(reply.status, 422, "{}", reply.body);
    assert!(
        reply.body.contains("tls.key: does not fit tls.cert"),
        "{}",
        reply.body
    );
    assert!(https_get(proxy.addr, &new, "/c")
        .unwrap()
        .starts_with("HTTP/1.1 200"));

    // HTTPS cannot be turned off by a reload.
    let plain = config.replace(
        &format!(
            "[tls]\ncert = \"{}\"\nkey = \"{}\"\n",
            cert.display(),
            key.display()
        ),
        "",
    );
    std::fs::write(dir.join("proxy.toml"), plain).unwrap();
    let reply = harness::admin_post(proxy.admin, "/reload", &[]);
    assert_eq!(reply.status, 422, "{}", reply.body);
    assert!(
        reply.body.contains("tls: cannot change on reload"),
        "{}",
        reply.body
    );
    assert!(https_get(proxy.addr, &new, "/d")
        .unwrap()
        .starts_with("HTTP/1.1 200"));
    assert_eq!(upstream.count(), 4);
}
