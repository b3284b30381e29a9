//! `limits.idle_timeout`: a client connection with no request in flight for that long is
//! closed, over HTTP/1.1 (no next request head) and HTTP/2 (no stream open: GOAWAY,
//! then close), so idle connections cannot hold the proxy's connection places for ever.
//! A connection serving a request is never closed for being idle.

#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

#[path = "support/proxy_harness.rs"]
mod harness;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use harness::{
    admin_post, check, get, h2_connect, listeners, runtime, temp_dir, write, ProxyProcess, Upstream,
};

fn config(upstream: &Upstream, limits: &str) -> String {
    format!(
        "workers = 1\n{}[limits]\n{limits}\n[[upstream]]\nname = \"api\"\nroute = \"/\"\nurl = \"{}\"\n",
        listeners(),
        upstream.url()
    )
}

async fn h2_get(client: &mut h2::client::SendRequest<Bytes>, addr: SocketAddr, path: &str) -> u16 {
    let request = http::Request::get(format!("http://{addr}{path}"))
        .body(())
        .unwrap();
    let (response, _) = client
        .send_request(request, true)
        .unwrap_or_else(|e| panic!("{path}: the stream could not start: {e}"));
    let response = response
        .await
        .unwrap_or_else(|e| panic!("{path}: no response head: {e}"));
    let status = response.status().as_u16();
    let mut body = response.into_body();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap_or_else(|e| panic!("{path}: the body broke off: {e}"));
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    status
}

#[test]
fn an_idle_http2_connection_is_sent_goaway_and_closed_after_the_idle_timeout() {
    let upstream = Upstream::start();
    let dir = temp_dir("idle-h2");
    let proxy = ProxyProcess::start(&dir, &config(&upstream, "idle_timeout = \"1s\""));
    let addr = proxy.addr;
    let rt = runtime();
    let (client, ended, served_at) = rt.block_on(async move {
        let (mut client, ended) = h2_connect(addr).await;
        assert_eq!(h2_get(&mut client, addr, "/x").await, 200);
        (client, ended, Instant::now())
    });
    ended
        .recv_timeout(Duration::from_secs(10))
        .expect("the idle connection was not closed within 10 s");
    let idle = served_at.elapsed();
    assert!(
        idle >= Duration::from_millis(900) && idle < Duration::from_secs(4),
        "closed {idle:?} after its last request"
    );
    drop(client);
    // The proxy itself goes on serving.
    assert_eq!(get(proxy.addr, "/x").status, 200);
}

#[test]
fn a_stream_in_flight_keeps_its_http2_connection_open_past_the_idle_timeout() {
    let upstream = Upstream::start();
    // The answer takes longer than the idle timeout and the quarter of it the proxy
    // may add.
    upstream.delay(Duration::from_millis(3500));
    let dir = temp_dir("idle-h2-busy");
    let proxy = ProxyProcess::start(
        &dir,
        &config(
            &upstream,
            "idle_timeout = \"2s\"\nrequest_timeout = \"10s\"",
        ),
    );
    let addr = proxy.addr;
    let rt = runtime();
    let (status, ended) = rt.block_on(async move {
        let (mut client, ended) = h2_connect(addr).await;
        let status = h2_get(&mut client, addr, "/slow").await;
        (status, ended)
    });
    assert_eq!(status, 200, "a slow request was cut for idleness");
    assert!(
        ended.try_recv().is_err(),
        "the connection closed while its stream was in flight"
    );
}

#[test]
fn idle_http2_connections_cannot_hold_every_connection_place() {
    let upstream = Upstream::start();
    let dir = temp_dir("idle-h2-places");
    let proxy = ProxyProcess::start(
        &dir,
        &config(&upstream, "idle_timeout = \"2s\"\nmax_connections = 2"),
    );
    let addr = proxy.addr;
    let rt = runtime();
    // Two HTTP/2 clients take both places and go quiet.
    let held = rt.block_on(async move {
        let mut held = Vec::new();
        for _ in 0..2 {
            let (mut client, ended) = h2_connect(addr).await;
            assert_eq!(h2_get(&mut client, addr, "/x").await, 200);
            held.push((client, ended));
        }
        held
    });
    // A third client waits for a place, which the idle ones give back.
    let (tx, rx) = mpsc::channel();
    let started = Instant::now();
    thread::spawn(move || {
        let _ = tx.send(get(addr, "/third").status);
    });
    let status = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("a third client waited 10 s behind two idle HTTP/2 connections");
    assert_eq!(status, 200);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    drop(held);
}

#[test]
fn an_idle_http1_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let upstream = Upstream::start();
    let dir = temp_dir("idle-h1");
    let proxy = ProxyProcess::start(&dir, &config(&upstream, "idle_timeout = \"1s\""));
    let mut stream = TcpStream::connect(proxy.addr).unwrap();
    stream
        .write_all(format!("GET /x HTTP/1.1\r\nhost: {}\r\n\r\n", proxy.addr).as_bytes())
        .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut reply = [0u8; 4096];
    let n = stream.read(&mut reply).unwrap();
    assert!(String::from_utf8_lossy(&reply[..n]).starts_with("HTTP/1.1 200"));
    let served_at = Instant::now();
    // The connection stays open, unused, until the proxy closes it.
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    let idle = served_at.elapsed();
    assert!(
        idle >= Duration::from_millis(900) && idle < Duration::from_secs(4),
        "closed {idle:?} after its last request"
    );
}

#[test]
fn the_idle_timeout_is_checked_and_fixed_while_the_proxy_runs() {
    let upstream = Upstream::start();
    let dir = temp_dir("idle-config");
    let (ok, stderr) = check(
        &dir,
        "zero.toml",
        &config(&upstream, "idle_timeout = \"0s\""),
    );
    assert!(!ok, "a zero idle_timeout passed --check");
    assert!(
        stderr.contains("limits.idle_timeout: invalid value \"0s\""),
        "{stderr}"
    );
    let proxy = ProxyProcess::start(&dir, &config(&upstream, "idle_timeout = \"30s\""));
    write(
        &dir,
        "proxy.toml",
        &config(&upstream, "idle_timeout = \"5s\""),
    );
    let reply = admin_post(proxy.admin, "/reload", &[]);
    assert_eq!(reply.status, 422, "{reply:?}");
    let errors = reply.json()["errors"].to_string();
    assert!(
        errors.contains("limits.idle_timeout: cannot change on reload"),
        "{errors}"
    );
    assert_eq!(get(proxy.addr, "/x").status, 200);
}
