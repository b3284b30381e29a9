//! The three proxies, configured alike for one protocol: nginx's workers and HAProxy's
//! threads one per CPU of the bench machine, as they ship (2, `BENCH_PEER_THREADS`), the
//! proxy's workers at its default (two per CPU), keep-alive to the upstream with reuse,
//! no request limit per connection on either side, and `X-Forwarded-For` added. For
//! `http2` each listens for HTTP/2 with prior knowledge (nginx `listen ... http2` on a
//! plain port, HAProxy `proto h2`, breakerbox's plain listener by the preface); for `tls`
//! each checks the upstream's certificate against the bench's CA and the name
//! `upstream.test` (sent as SNI), resuming TLS sessions.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::env_or;

/// The name on the upstream's certificate, checked by every proxy and sent as SNI.
pub const SERVER_NAME: &str = "upstream.test";

/// What the proxies are set up for: where the upstream is, whether clients speak
/// HTTP/2, and the CA certificate of an HTTPS upstream.
pub struct Setup<'a> {
    pub upstream: SocketAddr,
    pub client_h2: bool,
    pub upstream_ca: Option<&'a Path>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

pub fn wait_listening(addr: SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if TcpStream::connect(addr).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("nothing listens on {addr}");
}

/// A child process stopped on drop: SIGTERM first (nginx's master then stops its
/// workers; a SIGKILL would orphan them), SIGKILL if it is still there after 5 s.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn start_proxy(dir: &Path, setup: &Setup, binary: &str, name: &str) -> (Killed, SocketAddr) {
    // BENCH_PROXY_EXTRA: top-level config lines to try (for example `workers = 4`);
    // BENCH_BASELINE_EXTRA, when set, replaces them for the `baseline` row.
    let extra = env_or("BENCH_PROXY_EXTRA", "");
    let extra = match name {
        "baseline" => env_or("BENCH_BASELINE_EXTRA", &extra),
        _ => extra,
    };
    let upstream = setup.upstream;
    let (scheme, tls) = match setup.upstream_ca {
        None => ("http", String::new()),
        Some(ca) => (
            "https",
            format!(
                "[upstream.tls]\nca_file = \"{}\"\nsystem_roots = false\nserver_name = \"{SERVER_NAME}\"\n",
                ca.display()
            ),
        ),
    };
    let config = format!(
        "{extra}\nlisten = \"127.0.0.1:0\"\n[admin]\nlisten = \"127.0.0.1:0\"\n\
         [[upstream]]\nname = \"bench\"\nroute = \"/\"\nurl = \"{scheme}://{upstream}\"\n\
         [upstream.breaker]\nfailure_rate = 0.5\nwindow = \"count:100\"\nmin_calls = 20\nconsecutive_failures = 50\n\
         [upstream.judge]\nslow_threshold = \"2s\"\n{tls}"
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, config).expect("write proxy config");
    let mut child = Command::new(binary)
        .args(["proxy", "--config"])
        .arg(&path)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn breakerbox proxy");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("the proxy exited")
            .expect("read stderr");
        if let Some(rest) = line.strip_prefix("breakerbox proxy: listening on ") {
            break rest
                .split(',')
                .next()
                .and_then(|a| a.trim().parse().ok())
                .expect("proxy address");
        }
    };
    // Keep draining stderr so the proxy never blocks on it.
    std::thread::spawn(move || for _ in lines {});
    wait_listening(addr);
    (Killed(child), addr)
}

pub fn start_nginx(dir: &Path, setup: &Setup) -> (Killed, SocketAddr) {
    let port = free_port();
    let d = dir.display();
    let upstream = setup.upstream;
    let http2 = if setup.client_h2 { " http2" } else { "" };
    // nginx closes a connection after 1,000 requests by default, on both sides (an
    // h2load client does not reconnect): lifted, as the other two have no such limit.
    // nginx 1.22 offers TLS 1.3 to upstreams only when told (from 1.23.4 by default): the
    // other two speak TLS 1.3 to the upstream.
    let (scheme, tls) = match setup.upstream_ca {
        None => ("http", String::new()),
        Some(ca) => (
            "https",
            format!(
                "      proxy_ssl_trusted_certificate {};\n      proxy_ssl_verify on;\n\
                 \x20     proxy_ssl_protocols TLSv1.2 TLSv1.3;\n\
                 \x20     proxy_ssl_name {SERVER_NAME};\n      proxy_ssl_server_name on;\n\
                 \x20     proxy_ssl_session_reuse on;\n",
                ca.display()
            ),
        ),
    };
    let threads = peer_threads();
    let config = format!(
        "worker_processes {threads};\ndaemon off;\npid {d}/nginx.pid;\nerror_log {d}/nginx-error.log warn;\n\
         events {{ worker_connections 4096; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
           fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
           keepalive_requests 10000000;\n\
           upstream backend {{ server {upstream}; keepalive 64; keepalive_requests 10000000; }}\n\
           server {{\n    listen 127.0.0.1:{port}{http2};\n    location / {{\n      proxy_pass {scheme}://backend;\n\
               proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n\
               proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;\n{tls}    }}\n  }}\n}}\n"
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, config).expect("write nginx config");
    let mut nginx = Command::new("nginx");
    nginx
        .arg("-c")
        .arg(&path)
        .arg("-p")
        .arg(dir)
        .arg("-e")
        .arg(dir.join("nginx-error.log"));
    spawn_listening(nginx, "nginx", port)
}

pub fn start_haproxy(dir: &Path, setup: &Setup) -> (Killed, SocketAddr) {
    let port = free_port();
    let upstream = setup.upstream;
    let proto = if setup.client_h2 { " proto h2" } else { "" };
    let tls = match setup.upstream_ca {
        None => String::new(),
        Some(ca) => format!(
            " ssl verify required ca-file {} sni str({SERVER_NAME}) verifyhost {SERVER_NAME}",
            ca.display()
        ),
    };
    // As many threads as nginx has workers, keep-alive to the upstream with connection
    // reuse, X-Forwarded-For added as the others do.
    let threads = peer_threads();
    let config = format!(
        "global\n  nbthread {threads}\n  maxconn 4096\n\
         defaults\n  mode http\n  timeout connect 5s\n  timeout client 30s\n  timeout server 30s\n\
         \x20 option http-keep-alive\n  option forwardfor\n  http-reuse always\n\
         frontend bench\n  bind 127.0.0.1:{port}{proto}\n  default_backend upstream\n\
         backend upstream\n  server u {upstream}{tls}\n"
    );
    let path = dir.join("haproxy.cfg");
    std::fs::write(&path, config).expect("write haproxy config");
    let mut haproxy = Command::new("haproxy");
    haproxy.arg("-db").arg("-f").arg(&path);
    spawn_listening(haproxy, "haproxy", port)
}

/// nginx's workers and HAProxy's threads: `BENCH_PEER_THREADS`, 2 by default (one per
/// CPU of the bench machine, as each ships).
fn peer_threads() -> usize {
    env_or("BENCH_PEER_THREADS", "2").parse().unwrap_or(2)
}

/// Starts `command` (the Debian package `package`'s server, configured to listen on
/// `port` of the loopback) and waits until it listens there.
fn spawn_listening(mut command: Command, package: &str, port: u16) -> (Killed, SocketAddr) {
    let child = command
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {package} (apt-get install -y {package}): {e}"));
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    wait_listening(addr);
    (Killed(child), addr)
}
