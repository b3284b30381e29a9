//! `breakerbox proxy`'s inline HTTP/1.1 client (requests without a body) against a raw
//! upstream that answers byte for byte what each test scripts: how response bodies are
//! framed (chunks and trailers, `HEAD`, 204, 304, to the close, 1xx interim answers),
//! what is an upstream failure (malformed heads and lengths, cut bodies), and when a
//! connection is reused (kept alive, never after the upstream closed it while idle).

#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

#[path = "support/proxy_harness.rs"]
mod harness;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use harness::{eventually, listeners, request, temp_dir, try_request, ProxyProcess};

/// What the raw upstream does for a request: the bytes it answers, then whether it
/// closes the connection at once, later (after this long idle), or keeps it open.
struct Answer {
    bytes: Vec<u8>,
    close: Close,
}

#[derive(Clone, Copy)]
enum Close {
    Never,
    Now,
    After(Duration),
}

fn answer(bytes: &str, close: Close) -> Answer {
    Answer {
        bytes: bytes.as_bytes().to_vec(),
        close,
    }
}

/// A raw upstream on loopback: every request head it reads (the request line and
/// headers, as written) and the connections it accepted.
struct Raw {
    addr: SocketAddr,
    heads: Arc<Mutex<Vec<String>>>,
    connections: Arc<AtomicUsize>,
}

impl Raw {
    fn start(script: fn(&str) -> Answer) -> Raw {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let (h, c) = (heads.clone(), connections.clone());
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                c.fetch_add(1, Ordering::SeqCst);
                let h = h.clone();
                thread::spawn(move || serve(stream, script, &h));
            }
        });
        Raw {
            addr,
            heads,
            connections,
        }
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

/// Serves one connection: reads request heads (no bodies) and answers each by script.
fn serve(mut stream: TcpStream, script: fn(&str) -> Answer, heads: &Mutex<Vec<String>>) {
    let mut buf = Vec::new();
    loop {
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end + 4]).into_owned();
        buf.drain(..end + 4);
        heads.lock().unwrap().push(head.clone());
        let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
        let answer = script(&path);
        if stream.write_all(&answer.bytes).is_err() {
            return;
        }
        match answer.close {
            Close::Never => {}
            Close::Now => return,
            Close::After(idle) => {
                thread::sleep(idle);
                return;
            }
        }
    }
}

fn script(path: &str) -> Answer {
    let ok = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
    match path {
        "/up/ok" => answer(ok, Close::Never),
        "/up/chunked" => answer(
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ntrailer: x-sum\r\n\r\n\
             5\r\nhello\r\n6;note=x\r\n world\r\n0\r\nx-sum: 11\r\n\r\n",
            Close::Never,
        ),
        "/up/head" => answer(
            "HTTP/1.1 200 OK\r\ncontent-length: 5\r\nx-kind: head\r\n\r\n",
            Close::Never,
        ),
        "/up/no-content" => answer("HTTP/1.1 204 No Content\r\n\r\n", Close::Never),
        "/up/not-modified" => answer(
            "HTTP/1.1 304 Not Modified\r\ncontent-length: 7\r\n\r\n",
            Close::Never,
        ),
        "/up/interim" => answer(
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n\
             HTTP/1.1 200 OK\r\ncontent-length: 7\r\n\r\nfinally",
            Close::Never,
        ),
        "/up/to-close" => answer(
            "HTTP/1.0 200 OK\r\ncontent-type: text/plain\r\n\r\nall of it, to the end",
            Close::Now,
        ),
        "/up/bad-length" => answer(
            "HTTP/1.1 200 OK\r\ncontent-length: 12x\r\n\r\nok",
            Close::Never,
        ),
        "/up/two-lengths" => answer(
            "HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nok",
            Close::Never,
        ),
        "/up/garbage" => answer("HTTP/9 two hundred\r\n\r\n", Close::Never),
        "/up/cut-chunk" => answer(
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhel",
            Close::Now,
        ),
        "/up/cut-length" => answer(
            "HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhalf",
            Close::Now,
        ),
        "/up/closes-while-idle" => answer(ok, Close::After(Duration::from_millis(100))),
        "/up/close-header" => answer(
            "HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok",
            Close::Never,
        ),
        _ => answer(
            "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
            Close::Never,
        ),
    }
}

fn start(raw: &Raw, name: &str) -> ProxyProcess {
    let config = format!(
        "workers = 1\n{}[[upstream]]\nname = \"up\"\nroute = \"/up/\"\nurl = \"http://{}\"\n\
         [upstream.breaker]\nconsecutive_failures = 100\n",
        listeners(),
        raw.addr
    );
    ProxyProcess::start(&temp_dir(name), &config)
}

fn calls(proxy: &ProxyProcess, verdict: &str) -> u64 {
    proxy.status()["breakers"]["up"]["calls"][verdict]
        .as_u64()
        .unwrap()
}

/// The whole raw response to `GET`-like `method target` (the connection closed after it).
fn raw_exchange(addr: SocketAddr, method: &str, target: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let head = format!(
        "{method} {target} HTTP/1.1\r\nhost: {addr}\r\nte: trailers\r\nconnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    let mut all = Vec::new();
    let _ = stream.read_to_end(&mut all);
    String::from_utf8_lossy(&all).into_owned()
}

#[test]
fn chunked_bodies_arrive_whole_with_their_trailers_judged_a_success() {
    let raw = Raw::start(script);
    let proxy = start(&raw, "inline-chunked");
    let reply = request(proxy.addr, "GET", "/up/chunked", &[("te", "trailers")], b"");
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, "hello world");
    let text = raw_exchange(proxy.addr, "GET", "/up/chunked");
    assert!(text.contains("x-sum: 11"), "trailers relayed: {text:?}");
    assert_eq!(calls(&proxy, "success"), 2);
    assert_eq!(calls(&proxy, "failure"), 0);
    // Both exchanges went over one kept-alive upstream connection.
    assert_eq!(raw.connections(), 1);
}

#[test]
fn head_204_and_304_end_at_their_head_and_keep_the_connection() {
    let raw = Raw::start(script);
    let proxy = start(&raw, "inline-bodiless");
    let text = raw_exchange(proxy.addr, "HEAD", "/up/head");
    assert!(text.starts_with("HTTP/1.1 200"), "{text:?}");
    assert!(text.contains("x-kind: head"), "{text:?}");
    assert!(
        text.ends_with("\r\n\r\n"),
        "no body after a HEAD answer: {text:?}"
    );
    assert_eq!(
        request(proxy.addr, "GET", "/up/no-content", &[], b"").status,
        204
    );
    let text = raw_exchange(proxy.addr, "GET", "/up/not-modified");
    assert!(text.starts_with("HTTP/1.1 304"), "{text:?}");
    assert!(text.ends_with("\r\n\r\n"), "no body after a 304: {text:?}");
    let reply = request(proxy.addr, "GET", "/up/ok", &[], b"");
    assert_eq!((reply.status, reply.body.as_str()), (200, "ok"));
    assert_eq!(raw.connections(), 1, "one connection carried all four");
    assert_eq!(raw.heads().len(), 4);
    assert!(raw.heads()[0].starts_with("HEAD /up/head HTTP/1.1\r\n"));
    assert_eq!(calls(&proxy, "success"), 4);
}

#[test]
fn interim_answers_are_skipped_for_the_final_one() {
    let raw = Raw::start(script);
    let proxy = start(&raw, "inline-interim");
    let reply = request(proxy.addr, "GET", "/up/interim", &[], b"");
    assert_eq!((reply.status, reply.body.as_str()), (200, "finally"));
    let reply = request(proxy.addr, "GET", "/up/ok", &[], b"");
    assert_eq!((reply.status, reply.body.as_str()), (200, "ok"));
    assert_eq!(raw.connections(), 1);
}

#[test]
fn a_body_delimited_by_the_close_is_relayed_and_its_connection_not_reused() {
    let raw = Raw::start(script);
    let proxy = start(&raw, "inline-to-close");
    let reply = request(proxy.addr, "GET", "/up/to-close", &[], b"");
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (200, "all of it, to the end")
    );
    let reply = request(proxy.addr, "GET", "/up/ok", &[], b"");
    assert_eq!(reply.status, 200);
    assert_eq!(raw.connections(), 2);
    assert_eq!(calls(&proxy, "success"), 2);
}

#[test]
fn a_connection_close_answer_is_not_reused() {
    let raw = Raw::start(script);
    let proxy = start(&raw, "inline-close-header");
    for _ in 0..3 {
        let reply = request(proxy.addr, "GET", "/up/close-header", &[], b"");
        assert_eq!((reply.status, reply.body.as_str()), (200, "ok"));
    }
    assert_eq!(raw.connections(), 3);
    assert_eq!(calls(&proxy, "failure"), 0);
}

#[test]
fn malformed_answers_are_502_and_upstream_failures() {
    let raw = Raw::start(script);
    let proxy = start(&raw, "inline-malformed");
    for target in ["/up/bad-length", "/up/two-lengths", "/up/garbage"] {
        let reply = request(proxy.addr, "GET", target, &[], b"");
        assert_eq!(reply.status, 502, "{target}: {}", reply.body);
        assert!(
            reply.body.contains("invalid response"),
            "{target}: {}",
            reply.body
        );
    }
    assert_eq!(calls(&proxy, "failure"), 3);
    assert_eq!(calls(&proxy, "success"), 0);
}

#[test]
fn cut_bodies_are_failures_and_cuts_for_the_client() {
    let raw = Raw::start(script);
    let proxy = start(&raw, "inline-cut");
    for target in ["/up/cut-chunk", "/up/cut-length"] {
        match try_request(proxy.addr, "GET", target, &[], b"") {
            Err(_) => {}
            Ok(reply) => assert!(
                reply.status >= 500,
                "{target}: a cut body must not look whole: {reply:?}"
            ),
        }
    }
    assert!(eventually(Duration::from_secs(5), || calls(
        &proxy, "failure"
    ) == 2));
    assert_eq!(calls(&proxy, "success"), 0);
}

#[test]
fn a_connection_the_upstream_closed_while_idle_is_not_used_again() {
    let raw = Raw::start(script);
    let proxy = start(&raw, "inline-idle-close");
    let reply = request(proxy.addr, "GET", "/up/closes-while-idle", &[], b"");
    assert_eq!(reply.status, 200);
    // The upstream closes its end 100 ms after answering; a POST (never sent twice)
    // after that must go on a new connection, not die on the closed one.
    thread::sleep(Duration::from_millis(400));
    for _ in 0..3 {
        let reply = request(proxy.addr, "POST", "/up/closes-while-idle", &[], b"");
        assert_eq!(reply.status, 200, "{}", reply.body);
        thread::sleep(Duration::from_millis(400));
    }
    assert_eq!(raw.connections(), 4);
    assert_eq!(calls(&proxy, "failure"), 0);
    // A body-less POST says so.
    assert!(
        raw.heads()[1].contains("content-length: 0\r\n"),
        "{:?}",
        raw.heads()[1]
    );
}
