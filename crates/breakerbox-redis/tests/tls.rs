//! `rediss://` against a real TLS redis-server (run with `--features tls`).

#![cfg(feature = "tls")]
#![allow(clippy::unwrap_used)] // tests unwrap

#[path = "support/certificates.rs"]
mod certificates;
#[path = "support/redis_server.rs"]
mod redis_server;

use std::net::TcpListener;
use std::time::Duration;

use breakerbox::Config;
use breakerbox_redis::{Fallback, Mode, RedisBreaker};
use redis_server::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rediss_url_with_a_private_ca_shares_the_breaker_over_tls() {
    let dir = certificates::certificates("redis", "IP:127.0.0.1");
    let tls_port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let path = |f: &str| dir.join(f).to_string_lossy().into_owned();
    let (port, cert, key, ca) = (
        tls_port.to_string(),
        path("server.crt"),
        path("server.key"),
        path("ca.crt"),
    );
    let server = RedisServer::start_with(
        &[
            "--tls-port",
            &port,
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
            "--tls-ca-cert-file",
            &ca,
            "--tls-auth-clients",
            "no",
        ],
        None,
    );
    let client = redis::Client::build_with_tls(
        format!("rediss://127.0.0.1:{tls_port}/"),
        redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(std::fs::read(dir.join("ca.crt")).unwrap()),
        },
    )
    .unwrap();
    let b = RedisBreaker::builder("unused://", "tls")
        .client(client)
        .config(Config::builder().consecutive_failures(2).build().unwrap())
        .mode(Mode::Strict)
        .fallback(Fallback::FailClosed)
        .timeout(Duration::from_secs(2))
        .build()
        .await
        .unwrap();
    assert!(!b.is_degraded(), "connected over TLS");
    b.acquire().await.unwrap().failure().await;
    assert_eq!(
        server.command(&["HGET", "bb:{tls}", "streak"]).unwrap(),
        "1"
    );

    // Without the CA the server is not trusted: the fallback decides.
    let untrusted = RedisBreaker::builder(format!("rediss://127.0.0.1:{tls_port}/"), "tls")
        .mode(Mode::Strict)
        .fallback(Fallback::FailClosed)
        .timeout(Duration::from_secs(2))
        .build()
        .await
        .unwrap();
    assert!(untrusted.is_degraded());
    let _ = std::fs::remove_dir_all(&dir);
}
