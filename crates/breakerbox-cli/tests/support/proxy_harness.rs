//! Test harness for `breakerbox proxy`: a scripted upstream on 127.0.0.1, a tiny HTTP/1.1
//! client, and the real proxy binary run as a child process.

#![allow(dead_code)]
// Tests wait on real processes and sockets, so they read the OS clock.
#![allow(clippy::disallowed_methods)]
// Test support: a failed lock or parse is a failed test.
#![allow(clippy::unwrap_used)]
// The child is waited for in `Drop`.
#![allow(clippy::zombie_processes)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// What the scripted upstream answers.
#[derive(Clone, Debug)]
pub struct Script {
    /// Status code.
    pub status: u16,
    /// Body.
    pub body: String,
    /// Delay before answering.
    pub delay: Duration,
    /// How the answer goes wrong, if it does.
    pub fault: Fault,
    /// Extra response headers.
    pub headers: Vec<(String, String)>,
}

/// Ways the scripted upstream misbehaves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fault {
    /// Answers properly.
    #[default]
    None,
    /// Closes the connection after each response without saying so (no
    /// `Connection: close`), as an upstream with a short idle timeout does.
    CloseAfterEach,
    /// Answers one request per connection; a second request on the same connection is
    /// read, then the connection is closed without a response (a keep-alive race that
    /// lost after the request was written).
    DropReused,
    /// Reads every request, then closes the connection without a response.
    DropAll,
    /// Declares the whole body but sends only this many bytes of it, then closes.
    Truncate(usize),
    /// Sends the head at once, then the body one byte per this interval.
    Trickle(Duration),
    /// Gives up on a request body that does not arrive within this: answers 408 and
    /// closes (as servers with their own body timeout do).
    BodyTimeout(Duration),
}

/// One request as the upstream saw it.
#[derive(Clone, Debug, Default)]
pub struct Seen {
    pub method: String,
    pub target: String,
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

/// A scripted HTTP/1.1 upstream on a free loopback port (keep-alive, thread per
/// connection). Counts requests.
pub struct Upstream {
    pub addr: SocketAddr,
    script: Arc<Mutex<Script>>,
    count: Arc<AtomicUsize>,
    connections: Arc<AtomicUsize>,
    heads: Arc<AtomicUsize>,
    last: Arc<Mutex<Option<Seen>>>,
}

impl Upstream {
    /// Starts an upstream answering 200 "ok".
    pub fn start() -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind upstream");
        let addr = listener.local_addr().expect("upstream addr");
        let script = Arc::new(Mutex::new(Script {
            status: 200,
            body: "ok".into(),
            delay: Duration::ZERO,
            fault: Fault::None,
            headers: Vec::new(),
        }));
        let count = Arc::new(AtomicUsize::new(0));
        let last = Arc::new(Mutex::new(None));
        let connections = Arc::new(AtomicUsize::new(0));
        let heads = Arc::new(AtomicUsize::new(0));
        let (s, c, l, n, h) = (
            script.clone(),
            count.clone(),
            last.clone(),
            connections.clone(),
            heads.clone(),
        );
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                n.fetch_add(1, Ordering::SeqCst);
                let counters = Counters {
                    count: c.clone(),
                    heads: h.clone(),
                };
                let (s, l) = (s.clone(), l.clone());
                thread::spawn(move || serve_connection(stream, s, counters, l));
            }
        });
        Upstream {
            addr,
            script,
            count,
            connections,
            heads,
            last,
        }
    }

    /// Answers `status` with `body` from now on.
    pub fn answer(&self, status: u16, body: &str) {
        let mut s = self.script.lock().unwrap();
        s.status = status;
        s.body = body.to_string();
    }

    /// Adds these headers to every answer from now on (replacing earlier ones).
    pub fn headers(&self, headers: &[(&str, &str)]) {
        self.script.lock().unwrap().headers = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    }

    /// Waits `delay` before each answer from now on.
    pub fn delay(&self, delay: Duration) {
        self.script.lock().unwrap().delay = delay;
    }

    /// Misbehaves this way from now on.
    pub fn fault(&self, fault: Fault) {
        self.script.lock().unwrap().fault = fault;
    }

    /// Requests received so far.
    pub fn count(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    /// Request heads received so far (counted before their bodies are read).
    pub fn heads(&self) -> usize {
        self.heads.load(Ordering::SeqCst)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// The last request received.
    pub fn last(&self) -> Seen {
        self.last
            .lock()
            .unwrap()
            .clone()
            .expect("the upstream saw a request")
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

struct Counters {
    count: Arc<AtomicUsize>,
    heads: Arc<AtomicUsize>,
}

fn serve_connection(
    stream: TcpStream,
    script: Arc<Mutex<Script>>,
    counters: Counters,
    last: Arc<Mutex<Option<Seen>>>,
) {
    let Counters { count, heads } = counters;
    let mut reader = BufReader::new(stream.try_clone().expect("clone stream"));
    let mut writer = stream;
    let mut served = 0usize;
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or_default().to_string();
        let target = parts.next().unwrap_or_default().to_string();
        let mut headers = BTreeMap::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
            }
        }
        heads.fetch_add(1, Ordering::SeqCst);
        let mut body = Vec::new();
        let fault = script.lock().unwrap().fault;
        if let Fault::BodyTimeout(limit) = fault {
            let _ = writer.set_read_timeout(Some(limit));
        }
        if let Some(len) = headers
            .get("content-length")
            .and_then(|l| l.parse::<usize>().ok())
        {
            body.resize(len, 0);
            if reader.read_exact(&mut body).is_err() {
                if matches!(fault, Fault::BodyTimeout(_)) {
                    let _ = writer.write_all(
                        b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    );
                }
                return;
            }
        } else if headers
            .get("transfer-encoding")
            .is_some_and(|t| t.contains("chunked"))
        {
            // An aborted chunked body never makes a complete request.
            match read_chunked(&mut reader) {
                Some(b) => body = b,
                None => return,
            }
        }
        let s = script.lock().unwrap().clone();
        served += 1;
        if (s.fault == Fault::DropReused && served > 1) || s.fault == Fault::DropAll {
            return;
        }
        count.fetch_add(1, Ordering::SeqCst);
        let close = headers
            .get("connection")
            .is_some_and(|c| c.eq_ignore_ascii_case("close"));
        *last.lock().unwrap() = Some(Seen {
            method,
            target,
            headers,
            body,
        });
        if !s.delay.is_zero() {
            thread::sleep(s.delay);
        }
        let extra: String = s
            .headers
            .iter()
            .map(|(k, v)| format!("{k}: {v}\r\n"))
            .collect();
        let head = format!(
            "HTTP/1.1 {} X\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nx-upstream: scripted\r\n{extra}\r\n",
            s.status,
            s.body.len(),
        );
        if writer.write_all(head.as_bytes()).is_err() {
            return;
        }
        match s.fault {
            Fault::Truncate(n) => {
                let _ = writer.write_all(&s.body.as_bytes()[..n.min(s.body.len())]);
                return;
            }
            Fault::Trickle(every) => {
                for byte in s.body.as_bytes() {
                    thread::sleep(every);
                    if writer.write_all(std::slice::from_ref(byte)).is_err() {
                        return;
                    }
                }
            }
            _ => {
                if writer.write_all(s.body.as_bytes()).is_err() {
                    return;
                }
            }
        }
        if close || s.fault == Fault::CloseAfterEach {
            return;
        }
    }
}

/// A chunked body; `None` when it ends before its last chunk.
fn read_chunked(reader: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        if reader.read_line(&mut size).unwrap_or(0) == 0 {
            return None;
        }
        let n = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
        if n == 0 {
            let mut end = String::new();
            let _ = reader.read_line(&mut end);
            return Some(body);
        }
        let mut chunk = vec![0; n + 2];
        reader.read_exact(&mut chunk).ok()?;
        body.extend_from_slice(&chunk[..n]);
    }
}

/// A response as the client saw it.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

impl Reply {
    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.body))
    }

    /// A header (lower-case name).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

/// Sends one request (`Connection: close`) and reads the whole response.
pub fn request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    try_request(addr, method, target, headers, body)
        .unwrap_or_else(|e| panic!("{method} {target} to {addr}: {e}"))
}

/// Like [`request`], returning transport errors.
pub fn try_request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<Reply> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(20)))?;
    let mut head = format!("{method} {target} HTTP/1.1\r\nconnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("host: {addr}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty()
        && !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("transfer-encoding"))
    {
        head.push_str(&format!("content-length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    read_reply(stream)
}

/// Opens a connection to `addr` and writes `bytes` (a request, or the start of one),
/// leaving the connection open: the caller stalls, finishes or drops it.
pub fn send_raw(addr: SocketAddr, bytes: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream.write_all(bytes).unwrap();
    stream
}

/// The head of a `POST target` declaring a body of `len` bytes (`Content-Length`).
pub fn post_head(addr: SocketAddr, target: &str, len: usize) -> String {
    format!("POST {target} HTTP/1.1\r\nhost: {addr}\r\ncontent-length: {len}\r\n\r\n")
}

/// Reads one response (head and body) from `stream`.
pub fn read_reply(stream: TcpStream) -> std::io::Result<Reply> {
    read_reply_from(&mut BufReader::new(stream))
}

/// Reads one response from `reader`, leaving what follows it unread.
pub fn read_reply_from(reader: &mut BufReader<TcpStream>) -> std::io::Result<Reply> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line {line:?}")))?;
    let mut headers = BTreeMap::new();
    loop {
        let mut h = String::new();
        reader.read_line(&mut h)?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let body = if headers
        .get("transfer-encoding")
        .is_some_and(|t| t.contains("chunked"))
    {
        read_chunked(reader).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "chunked body cut short")
        })?
    } else if let Some(len) = headers
        .get("content-length")
        .and_then(|l| l.parse::<usize>().ok())
    {
        let mut b = vec![0; len];
        reader.read_exact(&mut b)?;
        b
    } else {
        let mut b = Vec::new();
        reader.read_to_end(&mut b)?;
        b
    };
    Ok(Reply {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// A client connection kept alive across requests.
pub struct KeepAlive {
    reader: BufReader<TcpStream>,
    addr: SocketAddr,
}

impl KeepAlive {
    /// Connects to `addr`.
    pub fn connect(addr: SocketAddr) -> KeepAlive {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        KeepAlive {
            reader: BufReader::new(stream),
            addr,
        }
    }

    /// `GET target` on this connection.
    pub fn get(&mut self, target: &str) -> std::io::Result<Reply> {
        let head = format!("GET {target} HTTP/1.1\r\nhost: {}\r\n\r\n", self.addr);
        self.reader.get_mut().write_all(head.as_bytes())?;
        read_reply_from(&mut self.reader)
    }
}

/// `GET target`.
pub fn get(addr: SocketAddr, target: &str) -> Reply {
    request(addr, "GET", target, &[], b"")
}

/// `POST target` with no body.
pub fn post(addr: SocketAddr, target: &str, headers: &[(&str, &str)]) -> Reply {
    request(addr, "POST", target, headers, b"")
}

/// An admin action as a script sends it: `POST target` with a JSON content type (a
/// browser cannot send that cross-origin without asking first) and `headers`.
pub fn admin_post(addr: SocketAddr, target: &str, headers: &[(&str, &str)]) -> Reply {
    let mut all = vec![("content-type", "application/json")];
    all.extend_from_slice(headers);
    request(addr, "POST", target, &all, b"")
}

/// A fresh directory under cargo's per-target temp dir (`target/tmp/breakerbox-cli/NAME`;
/// names are unique per test).
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("breakerbox-cli")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

/// Writes `text` to `dir/name` and returns the path.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write file");
    path
}

/// The binary under test: this build's, or the one `BREAKERBOX_BIN` names (to show that
/// a new test fails against an older build).
pub fn binary() -> String {
    std::env::var("BREAKERBOX_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_breakerbox").into())
}

/// A running `breakerbox proxy`, killed on drop.
pub struct ProxyProcess {
    child: Child,
    /// The proxy listener.
    pub addr: SocketAddr,
    /// The admin listener.
    pub admin: SocketAddr,
    stderr: Arc<Mutex<Vec<String>>>,
}

/// A config's head: both listeners on port 0 (the proxy reports what it got).
pub fn listeners() -> &'static str {
    "listen = \"127.0.0.1:0\"\n[admin]\nlisten = \"127.0.0.1:0\"\n"
}

impl ProxyProcess {
    /// Starts the proxy with `config` (written to `dir/proxy.toml`) and waits until it
    /// listens.
    pub fn start(dir: &Path, config: &str) -> ProxyProcess {
        let path = write(dir, "proxy.toml", config);
        let mut child = Command::new(binary())
            .args(["proxy", "--config"])
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn breakerbox proxy");
        let stderr = child.stderr.take().expect("stderr");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        let keep = lines.clone();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                keep.lock().unwrap().push(line.clone());
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix("breakerbox proxy: listening on ") {
                        let mut words = rest.split([' ', ',']).filter(|w| !w.is_empty());
                        let addr = words.next().unwrap().parse().unwrap();
                        let admin = words.nth(2).unwrap().parse().unwrap();
                        return ProxyProcess {
                            child,
                            addr,
                            admin,
                            stderr: lines,
                        };
                    }
                }
                Err(_) => {
                    let _ = child.kill();
                    panic!(
                        "the proxy did not start; stderr:\n{}",
                        lines.lock().unwrap().join("\n")
                    );
                }
            }
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM with the `kill` command.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
    }

    /// Waits for the process to exit (bounded); its exit code.
    pub fn wait_exit(&mut self, within: Duration) -> Option<i32> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status.code();
            }
            thread::sleep(Duration::from_millis(20));
        }
        panic!("the proxy did not exit within {within:?}");
    }

    /// Everything the proxy wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    /// `GET /status` on the admin listener, as JSON.
    pub fn status(&self) -> serde_json::Value {
        get(self.admin, "/status").json()
    }

    /// The phase of breaker `name` per `/status`.
    pub fn phase(&self, name: &str) -> String {
        self.status()["breakers"][name]["phase"]
            .as_str()
            .unwrap_or("?")
            .to_string()
    }

    /// The reason of breaker `name`'s last judgement per `/status` (empty when none).
    pub fn last_reason(&self, name: &str) -> String {
        self.status()["breakers"][name]["last_judgement"]["reason"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }
}

impl Drop for ProxyProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `f` every 20 ms until it is true or `within` has passed.
pub fn eventually(within: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// `breakerbox proxy --check FILE` on `config` written to `dir/name`: (success, stderr).
pub fn check(dir: &Path, name: &str, config: &str) -> (bool, String) {
    let path = write(dir, name, config);
    let out = Command::new(binary())
        .args(["proxy", "--check"])
        .arg(&path)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A two-thread tokio runtime for a test's clients.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// An HTTP/2 client (the `h2` crate's, prior knowledge) on a new connection to `addr`,
/// its connection driven by a task of its own, and a receiver told when that connection
/// has ended.
pub async fn h2_connect(
    addr: SocketAddr,
) -> (h2::client::SendRequest<bytes::Bytes>, mpsc::Receiver<()>) {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.unwrap();
    let (ended_tx, ended) = mpsc::channel();
    tokio::spawn(async move {
        let _ = connection.await;
        let _ = ended_tx.send(());
    });
    (client.ready().await.unwrap(), ended)
}
