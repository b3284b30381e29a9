//! `breakerbox proxy` under clients that try to exhaust it: request bodies stream instead
//! of piling up, stalled uploads end, and connections are capped.

#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

#[path = "support/proxy_harness.rs"]
mod harness;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use harness::{eventually, get, listeners, read_reply, send_raw, temp_dir, ProxyProcess, Upstream};

fn config(upstream: &Upstream, head: &str, limits: &str) -> String {
    format!(
        "{head}\n{}[limits]\n{limits}\n[[upstream]]\nname = \"payments\"\nroute = \"/payments/\"\nurl = \"{}\"\n[upstream.breaker]\nconsecutive_failures = 1\n",
        listeners(),
        upstream.url()
    )
}

fn chunked_head(addr: std::net::SocketAddr) -> String {
    format!("POST /payments/upload HTTP/1.1\r\nhost: {addr}\r\ntransfer-encoding: chunked\r\n\r\n")
}

fn chunk(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    out
}

/// The resident set of process `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn a_chunked_upload_reaches_the_upstream_before_it_ends() {
    let upstream = Upstream::start();
    let dir = temp_dir("chunked-streams");
    let proxy = ProxyProcess::start(&dir, &config(&upstream, "", ""));
    let mut bytes = chunked_head(proxy.addr).into_bytes();
    bytes.extend(chunk(b"first part"));
    let mut stream = send_raw(proxy.addr, &bytes);
    assert!(
        eventually(Duration::from_secs(5), || upstream.heads() == 1),
        "the upstream saw nothing of an unfinished chunked upload"
    );
    stream.write_all(&chunk(b", second part")).unwrap();
    stream.write_all(b"0\r\n\r\n").unwrap();
    let reply = read_reply(stream).unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(upstream.last().body, b"first part, second part");
}

#[test]
fn a_stalled_chunked_upload_is_ended_by_the_client_body_timeout() {
    let upstream = Upstream::start();
    let dir = temp_dir("chunked-stalled");
    let proxy = ProxyProcess::start(
        &dir,
        &config(
            &upstream,
            "",
            "client_body_timeout = \"700ms\"\nrequest_timeout = \"60s\"",
        ),
    );
    let mut bytes = chunked_head(proxy.addr).into_bytes();
    bytes.extend(chunk(&[b'x'; 1000]));
    let started = Instant::now();
    let stream = send_raw(proxy.addr, &bytes);
    let reply = read_reply(stream).unwrap();
    assert_eq!(reply.status, 408, "{reply:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(
        proxy.status()["breakers"]["payments"]["calls"]["failure"],
        0
    );
}

#[test]
fn connections_beyond_max_connections_wait_until_one_closes() {
    let upstream = Upstream::start();
    let dir = temp_dir("max-connections");
    // One worker: one accept queue, so the waiting order is the arrival order.
    let proxy = ProxyProcess::start(
        &dir,
        &config(&upstream, "workers = 1", "max_connections = 2"),
    );
    // Two clients hold every slot with a half-sent head.
    let holders: Vec<TcpStream> = (0..2)
        .map(|_| send_raw(proxy.addr, b"GET /payments/x HTTP/1.1\r\n"))
        .collect();
    thread::sleep(Duration::from_millis(300));
    let mut waiting = send_raw(
        proxy.addr,
        format!(
            "GET /payments/late HTTP/1.1\r\nhost: {}\r\nconnection: close\r\n\r\n",
            proxy.addr
        )
        .as_bytes(),
    );
    waiting
        .set_read_timeout(Some(Duration::from_millis(800)))
        .unwrap();
    let mut first = [0u8; 1];
    let early = waiting.read(&mut first);
    assert!(
        early.is_err(),
        "a third connection was served while two held every slot: {early:?}"
    );
    assert_eq!(upstream.count(), 0);
    drop(holders);
    waiting
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let reply = read_reply(waiting).unwrap();
    assert_eq!(reply.status, 200);
    // The admin listener is not subject to the cap.
    assert_eq!(get(proxy.admin, "/status").status, 200);
}

#[test]
fn max_connections_holds_over_all_workers_together() {
    let upstream = Upstream::start();
    upstream.delay(Duration::from_secs(2));
    let dir = temp_dir("max-connections-workers");
    let proxy = ProxyProcess::start(
        &dir,
        &config(
            &upstream,
            "workers = 2",
            "max_connections = 3\nrequest_timeout = \"30s\"",
        ),
    );
    let addr = proxy.addr;
    let clients: Vec<_> = (0..6)
        .map(|i| thread::spawn(move || get(addr, &format!("/payments/{i}")).status))
        .collect();
    thread::sleep(Duration::from_millis(1000));
    let at_once = upstream.heads();
    assert!(
        (1..=3).contains(&at_once),
        "{at_once} requests reached the upstream at once with max_connections = 3"
    );
    for c in clients {
        assert_eq!(c.join().unwrap(), 200);
    }
}

#[test]
fn two_thousand_stalled_chunked_uploads_keep_memory_bounded_and_all_end() {
    const UPLOADS: usize = 2000;
    const SENT: usize = 256 * 1024;
    let upstream = Upstream::start();
    let dir = temp_dir("many-stalled-uploads");
    let proxy = ProxyProcess::start(
        &dir,
        &config(
            &upstream,
            "",
            "max_connections = 4096\nclient_body_timeout = \"20s\"\nmax_body_bytes = 10485760",
        ),
    );
    let before = rss_kib(proxy.pid());
    let payload = chunk(&vec![b'u'; SENT]);
    let started = Instant::now();
    let mut streams = Vec::with_capacity(UPLOADS);
    for _ in 0..UPLOADS {
        let mut bytes = chunked_head(proxy.addr).into_bytes();
        bytes.extend_from_slice(&payload);
        streams.push(send_raw(proxy.addr, &bytes));
    }
    // Every upload reaches the upstream (streamed, not held).
    assert!(
        eventually(Duration::from_secs(60), || upstream.heads() == UPLOADS),
        "only {} of {UPLOADS} uploads reached the upstream",
        upstream.heads()
    );
    thread::sleep(Duration::from_millis(500));
    let during = rss_kib(proxy.pid());
    eprintln!(
        "proxy RSS: {} MiB before, {} MiB with {UPLOADS} stalled uploads of {} KiB each (set up in {:?})",
        before / 1024,
        during / 1024,
        SENT / 1024,
        started.elapsed()
    );
    // Buffering them would take UPLOADS * SENT = 500 MiB (the buffering proxy held 644);
    // streaming holds some 80 KiB per connection (buffers on both sides, tasks).
    assert!(
        during < 256 * 1024,
        "proxy RSS {} MiB with {UPLOADS} stalled uploads",
        during / 1024
    );
    // The client body timeout ends every one of them with 408.
    let deadline = Instant::now() + Duration::from_secs(90);
    for stream in streams {
        let left = deadline.saturating_duration_since(Instant::now());
        stream
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        assert_eq!(read_reply(stream).unwrap().status, 408);
    }
}
