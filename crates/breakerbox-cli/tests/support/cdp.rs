//! Headless Chromium (Debian's `chromium`) for the dashboard tests of the proxy and of
//! `breakerbox-admin`: [`headless`] renders a page once (`--dump-dom`, `--screenshot`);
//! [`Browser`] drives one over the DevTools protocol to click its buttons, with a minimal
//! WebSocket client (text frames, client masking) over a loopback TCP stream. Every wait
//! is bounded.

#![allow(dead_code)]
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Runs headless Chromium once with its profile in `profile` and `args` (e.g.
/// `--dump-dom URL`), giving the page's scripts 3 s of virtual time.
pub fn headless(profile: &Path, args: &[&str]) -> std::process::Output {
    let found = Command::new("sh")
        .args(["-c", "command -v chromium"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        found,
        "`chromium` is not on PATH: install Debian's chromium (apt-get install -y chromium) to run the dashboard test"
    );
    Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--virtual-time-budget=3000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .output()
        .expect("run chromium")
}

/// The rendered card of breaker `name` in a dumped DOM: from its opening tag to the next
/// card.
pub fn card<'a>(dom: &'a str, name: &str) -> &'a str {
    let start = dom
        .find(&format!("data-breaker=\"{name}\""))
        .unwrap_or_else(|| panic!("no card for {name} in the rendered page:\n{dom}"));
    let rest = &dom[start..];
    let end = rest[1..]
        .find("data-breaker=")
        .map_or(rest.len(), |i| i + 1);
    &rest[..end]
}

/// The rendered section of the status key `key` in a dumped DOM: from its opening tag to
/// its closing `</section>`.
#[allow(dead_code)] // not every test binary that includes this module reads sections
pub fn section<'a>(dom: &'a str, key: &str) -> &'a str {
    let start = dom
        .find(&format!("data-section=\"{key}\""))
        .unwrap_or_else(|| panic!("no section for {key} in the rendered page:\n{dom}"));
    let rest = &dom[start..];
    let end = rest
        .find("</section>")
        .map_or(rest.len(), |i| i + "</section>".len());
    &rest[..end]
}

/// A headless Chromium with one page, killed on drop.
pub struct Browser {
    child: Child,
    ws: TcpStream,
    next_id: u64,
    /// Protocol events received while waiting for answers.
    pub events: Vec<Value>,
}

impl Browser {
    /// Starts Chromium with its profile in `profile` and attaches to its page.
    pub fn launch(profile: &Path) -> Browser {
        let _ = std::fs::remove_dir_all(profile);
        std::fs::create_dir_all(profile).unwrap();
        let child = Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run chromium");
        let port_file = profile.join("DevToolsActivePort");
        let deadline = Instant::now() + Duration::from_secs(30);
        let port: u16 = loop {
            if let Some(port) = std::fs::read_to_string(&port_file)
                .ok()
                .and_then(|t| t.lines().next()?.trim().parse().ok())
            {
                break port;
            }
            assert!(
                Instant::now() < deadline,
                "chromium did not open its DevTools port"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let page = loop {
            let targets = http_get(port, "/json/list");
            let list: Value = serde_json::from_str(&targets).unwrap_or(Value::Null);
            let page = list.as_array().and_then(|l| {
                l.iter()
                    .find(|t| t["type"] == "page")
                    .and_then(|t| t["webSocketDebuggerUrl"].as_str().map(str::to_owned))
            });
            if let Some(page) = page {
                break page;
            }
            assert!(Instant::now() < deadline, "chromium has no page: {targets}");
            std::thread::sleep(Duration::from_millis(50));
        };
        let path = page
            .split_once(&format!("127.0.0.1:{port}"))
            .map(|(_, p)| p.to_owned())
            .unwrap_or_else(|| panic!("unexpected page URL {page}"));
        let ws = ws_connect(port, &path);
        Browser {
            child,
            ws,
            next_id: 0,
            events: Vec::new(),
        }
    }

    /// Calls `method` and returns its result.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let message = json!({ "id": id, "method": method, "params": params }).to_string();
        ws_send(&mut self.ws, message.as_bytes());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            assert!(Instant::now() < deadline, "no answer to {method}");
            let message = ws_read(&mut self.ws);
            if message["id"] == id {
                assert!(message.get("error").is_none(), "{method}: {message}");
                return message["result"].clone();
            }
            self.events.push(message);
        }
    }

    /// Evaluates `expression` in the page; its value.
    pub fn eval(&mut self, expression: &str) -> Value {
        let result = self.call(
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true }),
        );
        result["result"]["value"].clone()
    }

    /// Waits (bounded) for an event named `method`, taking it out of the queue.
    pub fn wait_event(&mut self, method: &str, within: Duration) -> Option<Value> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(i) = self.events.iter().position(|e| e["method"] == method) {
                return Some(self.events.remove(i));
            }
            if Instant::now() >= deadline {
                return None;
            }
            self.ws
                .set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            let read = ws_try_read(&mut self.ws);
            self.ws
                .set_read_timeout(Some(Duration::from_secs(30)))
                .unwrap();
            if let Some(message) = read {
                self.events.push(message);
            }
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http_get(port: u16, path: &str) -> String {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let request =
        format!("GET {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nconnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return String::new();
    }
    let mut text = String::new();
    let _ = stream.read_to_string(&mut text);
    text.split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default()
}

fn ws_connect(port: u16, path: &str) -> TcpStream {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let request = format!(
        "GET {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nupgrade: websocket\r\nconnection: Upgrade\r\n\
         sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    assert!(status.contains(" 101 "), "websocket handshake: {status}");
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line.trim_end().is_empty() {
            break;
        }
    }
    // The server speaks only after we do: nothing is left in the reader's buffer.
    assert!(reader.buffer().is_empty());
    stream
}

fn ws_send(stream: &mut TcpStream, payload: &[u8]) {
    let mask = [0x5a, 0x17, 0xc3, 0x08];
    let mut frame = vec![0x81u8];
    match payload.len() {
        n if n < 126 => frame.push(0x80 | n as u8),
        n if n <= 0xffff => {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            frame.push(0x80 | 127);
            frame.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    frame.extend_from_slice(&mask);
    frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    stream.write_all(&frame).unwrap();
}

/// One whole message, or `None` when nothing arrived before the read timeout.
fn ws_try_read(stream: &mut TcpStream) -> Option<Value> {
    let mut first = [0u8; 1];
    match stream.read(&mut first) {
        Ok(1) => {}
        Ok(_) => panic!("the browser closed the DevTools connection"),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            return None
        }
        Err(e) => panic!("reading from the browser: {e}"),
    }
    Some(ws_read_rest(stream, first[0]))
}

fn ws_read(stream: &mut TcpStream) -> Value {
    let mut first = [0u8; 1];
    stream.read_exact(&mut first).unwrap();
    ws_read_rest(stream, first[0])
}

fn ws_read_rest(stream: &mut TcpStream, mut head: u8) -> Value {
    let mut message = Vec::new();
    loop {
        let mut second = [0u8; 1];
        stream.read_exact(&mut second).unwrap();
        let len = match second[0] & 0x7f {
            126 => {
                let mut b = [0u8; 2];
                stream.read_exact(&mut b).unwrap();
                u64::from(u16::from_be_bytes(b))
            }
            127 => {
                let mut b = [0u8; 8];
                stream.read_exact(&mut b).unwrap();
                u64::from_be_bytes(b)
            }
            n => u64::from(n),
        };
        let mut payload = vec![0u8; usize::try_from(len).unwrap()];
        stream.read_exact(&mut payload).unwrap();
        match head & 0x0f {
            0x8 => panic!("the browser closed the DevTools connection"),
            0x9 | 0xa => {}
            _ => message.extend_from_slice(&payload),
        }
        if head & 0x80 != 0 && !message.is_empty() {
            return serde_json::from_slice(&message).unwrap();
        }
        let mut next = [0u8; 1];
        stream.read_exact(&mut next).unwrap();
        head = next[0];
    }
}
