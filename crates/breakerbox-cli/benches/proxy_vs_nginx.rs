//! `breakerbox proxy` against nginx `proxy_pass` and HAProxy, side by side in one run, to
//! the same loopback upstream (a small hyper server in this process), measured with wrk.
//!
//! Run: `crates/breakerbox-cli/benches/proxy_vs_nginx.sh` (or
//! `cargo bench -p breakerbox-cli --bench proxy_vs_nginx`). Needs `nginx`, `haproxy` and
//! `wrk` on PATH (Debian: `apt-get install -y nginx haproxy wrk`). Environment:
//! `BENCH_DURATION` (default 10s), `BENCH_CONNECTIONS` (32), `BENCH_THREADS` (2),
//! `BENCH_ROUNDS` (3), `BREAKERBOX_BIN` (another build of the proxy to measure),
//! `BENCH_PROXY_EXTRA` (top-level lines added to the proxy's config, e.g. `workers = 4`),
//! `BREAKERBOX_BASELINE_BIN` (an older build measured beside it, as a `baseline` row).

#![allow(clippy::disallowed_methods, missing_docs)]

use std::convert::Infallible;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

#[path = "proxy_vs_nginx/usage.rs"]
mod usage;

const BODY: &[u8] = b"{\"ok\":true,\"payload\":\"hello from the upstream\"}";

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

/// The loopback upstream: a fixed 200 JSON answer, keep-alive, on its own runtime.
fn start_upstream() -> SocketAddr {
    let std_listener = TcpListener::bind("127.0.0.1:0").expect("bind upstream");
    std_listener.set_nonblocking(true).expect("nonblocking");
    let addr = std_listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(std_listener).expect("listener");
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                tokio::spawn(async move {
                    let service = service_fn(|_req: Request<hyper::body::Incoming>| async {
                        let mut r = Response::new(Full::new(Bytes::from_static(BODY)));
                        r.headers_mut().insert(
                            http::header::CONTENT_TYPE,
                            http::HeaderValue::from_static("application/json"),
                        );
                        Ok::<_, Infallible>(r)
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
    });
    addr
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

fn wait_listening(addr: SocketAddr) {
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
struct Killed(Child);

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

fn start_proxy(dir: &Path, upstream: SocketAddr, binary: &str) -> (Killed, SocketAddr) {
    // BENCH_PROXY_EXTRA: top-level config lines to try (for example `workers = 4`).
    let extra = env_or("BENCH_PROXY_EXTRA", "");
    let config = format!(
        "{extra}\nlisten = \"127.0.0.1:0\"\n[admin]\nlisten = \"127.0.0.1:0\"\n\
         [[upstream]]\nname = \"bench\"\nroute = \"/\"\nurl = \"http://{upstream}\"\n\
         [upstream.breaker]\nfailure_rate = 0.5\nwindow = \"count:100\"\nmin_calls = 20\nconsecutive_failures = 50\n\
         [upstream.judge]\nslow_threshold = \"2s\"\n"
    );
    let path = dir.join("proxy.toml");
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
    (Killed(child), addr)
}

fn start_nginx(dir: &Path, upstream: SocketAddr) -> (Killed, SocketAddr) {
    let port = free_port();
    let d = dir.display();
    let config = format!(
        "worker_processes 2;\ndaemon off;\npid {d}/nginx.pid;\nerror_log {d}/nginx-error.log warn;\n\
         events {{ worker_connections 4096; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
           fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
           upstream backend {{ server {upstream}; keepalive 64; }}\n\
           server {{\n    listen 127.0.0.1:{port};\n    location / {{\n      proxy_pass http://backend;\n\
               proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n\
               proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;\n    }}\n  }}\n}}\n"
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, config).expect("write nginx config");
    let child = Command::new("nginx")
        .arg("-c")
        .arg(&path)
        .arg("-p")
        .arg(dir)
        .arg("-e")
        .arg(dir.join("nginx-error.log"))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn nginx (apt-get install -y nginx)");
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    wait_listening(addr);
    (Killed(child), addr)
}

fn start_haproxy(dir: &Path, upstream: SocketAddr) -> (Killed, SocketAddr) {
    let port = free_port();
    // Two threads (like nginx's two workers and the proxy's two), keep-alive to the
    // upstream with connection reuse, X-Forwarded-For added as the others do.
    let config = format!(
        "global\n  nbthread 2\n  maxconn 4096\n\
         defaults\n  mode http\n  timeout connect 5s\n  timeout client 30s\n  timeout server 30s\n\
         \x20 option http-keep-alive\n  option forwardfor\n  http-reuse always\n\
         frontend bench\n  bind 127.0.0.1:{port}\n  default_backend upstream\n\
         backend upstream\n  server u {upstream}\n"
    );
    let path = dir.join("haproxy.cfg");
    std::fs::write(&path, config).expect("write haproxy config");
    let child = Command::new("haproxy")
        .arg("-db")
        .arg("-f")
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn haproxy (apt-get install -y haproxy)");
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    wait_listening(addr);
    (Killed(child), addr)
}

struct Run {
    rps: f64,
    requests: f64,
    p50_ms: f64,
    p90_ms: f64,
    p99_ms: f64,
    errors: String,
}

fn parse_latency(text: &str) -> f64 {
    let text = text.trim();
    let (num, factor) = if let Some(n) = text.strip_suffix("us") {
        (n, 0.001)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1000.0)
    } else {
        (text, 1.0)
    };
    num.parse::<f64>().unwrap_or(f64::NAN) * factor
}

fn wrk(addr: SocketAddr, duration: &str) -> Run {
    let threads = env_or("BENCH_THREADS", "2");
    let connections = env_or("BENCH_CONNECTIONS", "32");
    let out = Command::new("wrk")
        .args([
            &format!("-t{threads}"),
            &format!("-c{connections}"),
            &format!("-d{duration}"),
            "--latency",
            &format!("http://{addr}/bench"),
        ])
        .output()
        .expect("run wrk (apt-get install -y wrk)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut run = Run {
        rps: f64::NAN,
        requests: f64::NAN,
        p50_ms: f64::NAN,
        p90_ms: f64::NAN,
        p99_ms: f64::NAN,
        errors: String::new(),
    };
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["Requests/sec:", v] => run.rps = v.parse().unwrap_or(f64::NAN),
            [n, "requests", "in", ..] => run.requests = n.parse().unwrap_or(f64::NAN),
            ["50%", v] => run.p50_ms = parse_latency(v),
            ["90%", v] => run.p90_ms = parse_latency(v),
            ["99%", v] => run.p99_ms = parse_latency(v),
            _ if line.contains("Non-2xx") || line.contains("Socket errors") => {
                run.errors.push_str(line.trim());
                run.errors.push(' ');
            }
            _ => {}
        }
    }
    if run.rps.is_nan() {
        panic!("could not read wrk's output:\n{text}");
    }
    run
}

/// The median of `values` (the mean of the middle two for an even count; 0 for none).
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this too: do nothing then.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let duration = env_or("BENCH_DURATION", "10s");
    let rounds: usize = env_or("BENCH_ROUNDS", "3").parse().unwrap_or(3);
    let dir: PathBuf =
        std::env::temp_dir().join(format!("breakerbox-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("bench dir");

    let upstream = start_upstream();
    wait_listening(upstream);
    // BREAKERBOX_BIN runs another build; BREAKERBOX_BASELINE_BIN adds an older one beside
    // it (to compare two versions in one run, under the same load).
    let binary =
        std::env::var("BREAKERBOX_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_breakerbox").into());
    let (proxy, proxy_addr) = start_proxy(&dir, upstream, &binary);
    let baseline = std::env::var("BREAKERBOX_BASELINE_BIN")
        .ok()
        .map(|bin| start_proxy(&dir, upstream, &bin));
    let (nginx, nginx_addr) = start_nginx(&dir, upstream);
    let (haproxy, haproxy_addr) = start_haproxy(&dir, upstream);
    wait_listening(proxy_addr);

    println!(
        "wrk -t{} -c{} -d{duration} --latency; {} cores; upstream {upstream}",
        env_or("BENCH_THREADS", "2"),
        env_or("BENCH_CONNECTIONS", "32"),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    // The process behind each target (none for `direct`: the upstream is this process),
    // whose CPU time, run-queue wait and context switches per request are shown.
    let mut targets = vec![
        ("direct", upstream, None),
        ("nginx", nginx_addr, Some(nginx.0.id())),
        ("haproxy", haproxy_addr, Some(haproxy.0.id())),
        ("breakerbox", proxy_addr, Some(proxy.0.id())),
    ];
    if let Some((child, addr)) = &baseline {
        targets.push(("baseline", *addr, Some(child.0.id())));
    }
    for &(_, addr, _) in &targets {
        let _ = wrk(addr, "2s"); // warm up pools and caches
    }
    println!(
        "{:<12} {:>12} {:>10} {:>10} {:>10}  {:<14} notes",
        "target", "req/s", "p50 ms", "p90 ms", "p99 ms", "load (1/5/15)"
    );
    let mut totals = [0.0f64; 5];
    let mut worst_p99 = [0.0f64; 5];
    let mut p99s: [Vec<f64>; 5] = Default::default();
    let mut usages: [Vec<usage::PerRequest>; 5] = Default::default();
    for _ in 0..rounds {
        for (i, &(name, addr, pid)) in targets.iter().enumerate() {
            let load = loadavg();
            let before = pid.map(usage::Usage::of_tree);
            let run = wrk(addr, &duration);
            if let (Some(before), Some(pid)) = (before, pid) {
                usages[i].push(usage::Usage::of_tree(pid).since(&before).per(run.requests));
            }
            totals[i] += run.rps;
            worst_p99[i] = worst_p99[i].max(run.p99_ms);
            p99s[i].push(run.p99_ms);
            println!(
                "{:<12} {:>12.0} {:>10.3} {:>10.3} {:>10.3}  {:<14} {}",
                name, run.rps, run.p50_ms, run.p90_ms, run.p99_ms, load, run.errors
            );
        }
    }
    let best = totals[1].max(totals[2]);
    let ratio = totals[3] / best;
    println!(
        "breakerbox / best of nginx and haproxy throughput: {ratio:.2} (target >= 0.95) {}",
        if ratio >= 0.95 { "OK" } else { "BELOW TARGET" }
    );
    if baseline.is_some() {
        println!(
            "baseline / best of nginx and haproxy throughput: {:.2}; breakerbox / baseline: {:.2}; \
             baseline worst p99 {:.3} ms",
            totals[4] / best,
            totals[3] / totals[4],
            worst_p99[4]
        );
    }
    println!(
        "worst p99 over the rounds: breakerbox {:.3} ms, nginx {:.3} ms, haproxy {:.3} ms",
        worst_p99[3], worst_p99[1], worst_p99[2],
    );
    // The verdict uses each target's median p99 over the rounds: on 2 cores shared by wrk,
    // the upstream and the proxy, one round's p99 is mostly the scheduler's (the same
    // target's p99 moves by 2x between rounds), and the worst of a few rounds is one outlier.
    let median_p99: Vec<f64> = p99s.iter_mut().map(|v| median(v)).collect();
    let best_p99 = median_p99[1].min(median_p99[2]);
    println!(
        "median p99 over the rounds: breakerbox {:.3} ms, nginx {:.3} ms, haproxy {:.3} ms {}",
        median_p99[3],
        median_p99[1],
        median_p99[2],
        if median_p99[3] <= best_p99 {
            "OK"
        } else {
            "WORSE"
        }
    );
    println!("\nper request, median over the rounds (the process tree behind each target):");
    println!(
        "{:<12} {:>10} {:>14} {:>12} {:>14}",
        "target", "CPU us", "run-queue us", "voluntary cs", "involuntary cs"
    );
    for (i, &(name, _, _)) in targets.iter().enumerate() {
        if let Some(m) = usage::PerRequest::median(&usages[i]) {
            println!(
                "{:<12} {:>10.2} {:>14.2} {:>12.3} {:>14.3}",
                name, m.cpu_us, m.runqueue_us, m.voluntary, m.involuntary
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
