//! `breakerbox proxy` passes WebSocket upgrades through: a real WebSocket client talks to
//! a real WebSocket server behind the proxy; the handshake is judged (a 101 is a
//! success, a refusal is judged by its status) and the tunnel is not.

#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

#[path = "support/proxy_harness.rs"]
mod harness;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use harness::{eventually, get, listeners, temp_dir, ProxyProcess, Upstream};
use tungstenite::{Message, WebSocket};

/// A WebSocket echo server on a free loopback port: every text message comes back
/// upper-cased. Counts the handshakes it accepted.
fn echo_server() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let count = count.clone();
            thread::spawn(move || {
                let Ok(mut socket) = tungstenite::accept(stream) else {
                    return;
                };
                count.fetch_add(1, Ordering::SeqCst);
                while let Ok(message) = socket.read() {
                    let reply = match message {
                        Message::Text(text) => Message::text(text.to_uppercase()),
                        Message::Binary(bytes) => Message::Binary(bytes),
                        Message::Close(_) => break,
                        _ => continue,
                    };
                    if socket.send(reply).is_err() {
                        break;
                    }
                }
            });
        }
    });
    (addr, accepted)
}

fn config(url: &str) -> String {
    format!(
        "{}[[upstream]]\nname = \"chat\"\nroute = \"/chat/\"\nurl = \"{url}\"\nmax_in_flight = 4\n\
         [upstream.breaker]\nconsecutive_failures = 2\n",
        listeners()
    )
}

fn connect(proxy: SocketAddr, path: &str) -> tungstenite::Result<WebSocket<TcpStream>> {
    let stream = TcpStream::connect(proxy).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    tungstenite::client(format!("ws://{proxy}{path}"), stream)
        .map(|(socket, _)| socket)
        .map_err(|e| match e {
            tungstenite::HandshakeError::Failure(e) => e,
            tungstenite::HandshakeError::Interrupted(_) => tungstenite::Error::ConnectionClosed,
        })
}

#[test]
fn a_websocket_handshake_is_judged_and_its_tunnel_relays_both_ways() {
    let (server, accepted) = echo_server();
    let dir = temp_dir("websocket");
    let proxy = ProxyProcess::start(&dir, &config(&format!("http://{server}")));
    let mut socket = connect(proxy.addr, "/chat/room").unwrap();
    for word in ["hello", "through", "the", "proxy"] {
        socket.send(Message::text(word)).unwrap();
        assert_eq!(socket.read().unwrap(), Message::text(word.to_uppercase()));
    }
    socket.send(Message::binary(vec![0u8, 1, 2, 255])).unwrap();
    assert_eq!(
        socket.read().unwrap(),
        Message::binary(vec![0u8, 1, 2, 255])
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 1);

    // The handshake was judged a success; the open tunnel holds a concurrency place.
    let status = proxy.status();
    let entry = &status["breakers"]["chat"];
    assert_eq!(entry["calls"]["success"], 1, "{entry}");
    assert_eq!(entry["concurrency"]["in_flight"], 1, "{entry}");
    assert_eq!(entry["last_judgement"]["verdict"], "success", "{entry}");

    // Closing the tunnel gives the place back, and judges nothing more.
    socket.close(None).unwrap();
    while socket.read().is_ok() {}
    drop(socket);
    assert!(
        eventually(Duration::from_secs(5), || {
            proxy.status()["breakers"]["chat"]["concurrency"]["in_flight"] == 0
        }),
        "the tunnel kept its place after it closed"
    );
    let entry = &proxy.status()["breakers"]["chat"];
    assert_eq!(entry["calls"]["success"], 1, "{entry}");
    assert_eq!(entry["calls"]["failure"], 0, "{entry}");

    // Plain requests on the same route still work beside tunnels.
    let mut second = connect(proxy.addr, "/chat/other").unwrap();
    second.send(Message::text("again")).unwrap();
    assert_eq!(second.read().unwrap(), Message::text("AGAIN"));
}

#[test]
fn a_refused_handshake_is_judged_by_its_status_and_trips_the_breaker() {
    // An upstream that answers every request (the handshake included) with 503.
    let upstream = Upstream::start();
    upstream.answer(503, "down");
    let dir = temp_dir("websocket-refused");
    let proxy = ProxyProcess::start(&dir, &config(&upstream.url()));
    // Each refusal is read to its end: a client that hangs up after the head leaves the
    // exchange unjudged (its permit is released), which is the proxy's rule for clients
    // that go away.
    let handshake = [
        ("connection", "upgrade"),
        ("upgrade", "websocket"),
        ("sec-websocket-version", "13"),
        ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
    ];
    for _ in 0..2 {
        let reply = harness::request(proxy.addr, "GET", "/chat/room", &handshake, b"");
        assert_eq!(reply.status, 503, "{reply:?}");
        assert_eq!(reply.body, "down");
    }
    assert_eq!(upstream.count(), 2);
    // The record lands as the refusal's body ends, which may be after the client read it.
    assert!(
        eventually(Duration::from_secs(5), || proxy.phase("chat") == "open"),
        "two refused handshakes did not trip the breaker"
    );
    // Open: the next handshake is refused by the breaker without reaching the upstream.
    let reply = get(proxy.addr, "/chat/room");
    assert_eq!(reply.status, 503);
    assert_eq!(reply.json()["error"], "circuit_open");
    assert_eq!(upstream.count(), 2);
}
