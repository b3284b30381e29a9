//! Reading a real Prometheus exporter in tests: scrape its HTTP endpoint, read a sample,
//! check the exposition with `promtool` (Debian package `prometheus`; `scripts/test.sh`
//! installs it). Shared by the metrics tests of the core, the Redis engine and the proxy.

#![allow(dead_code)]
#![allow(clippy::unwrap_used)] // tests unwrap
// A test reads a real HTTP endpoint with a deadline.
#![allow(clippy::disallowed_methods)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A free loopback port for the exporter's listener.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET /metrics` from the exporter's own HTTP listener (retried for up to 10 s while it
/// starts).
pub fn scrape(port: u16) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let _ = stream.write_all(
                b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
            );
            let mut response = String::new();
            if stream.read_to_string(&mut response).is_ok() && response.starts_with("HTTP/1.1 200")
            {
                return response.split_once("\r\n\r\n").unwrap().1.to_string();
            }
        }
        assert!(Instant::now() < deadline, "the exporter never answered");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The value of the sample `name{labels}` (labels in the exporter's order), if present.
pub fn value(text: &str, sample: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(sample)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

/// Asserts that `text` is a valid exposition, by `promtool check metrics`.
pub fn assert_promtool_accepts(text: &str) {
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus; scripts/test.sh installs it)");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = promtool.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
