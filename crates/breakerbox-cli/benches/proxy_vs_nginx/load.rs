//! The load generators: wrk (HTTP/1.1, plain or HTTPS) and h2load (HTTP/2 with prior
//! knowledge), each run read into one [`Run`]. wrk reports its own percentiles; h2load
//! does not (only min, max, mean and deviation), so its per-request log (`--log-file`:
//! start time, status, microseconds to the end of the response) is sorted here.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use super::env_or;

/// One load run against one target.
pub struct Run {
    pub rps: f64,
    pub requests: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub errors: String,
}

impl Run {
    fn empty() -> Run {
        Run {
            rps: f64::NAN,
            requests: f64::NAN,
            p50_ms: f64::NAN,
            p90_ms: f64::NAN,
            p99_ms: f64::NAN,
            errors: String::new(),
        }
    }
}

/// `text` without the first of `units` (suffix, factor; longest first) it ends with, and
/// that unit's factor (1 without a unit).
fn split_unit<'a>(text: &'a str, units: &[(&str, f64)]) -> (&'a str, f64) {
    let text = text.trim();
    units
        .iter()
        .find_map(|(suffix, factor)| Some((text.strip_suffix(suffix)?, *factor)))
        .unwrap_or((text, 1.0))
}

/// A wrk latency (`812.00us`, `1.20ms`, `2.01s`) in milliseconds.
fn parse_latency(text: &str) -> f64 {
    let (num, factor) = split_unit(text, &[("us", 0.001), ("ms", 1.0), ("s", 1000.0)]);
    num.parse::<f64>().unwrap_or(f64::NAN) * factor
}

/// The wrk command line (without the URL), for the table's heading.
pub fn wrk_settings(duration: &str) -> String {
    format!(
        "wrk -t{} -c{} -d{duration} --latency",
        env_or("BENCH_THREADS", "2"),
        env_or("BENCH_CONNECTIONS", "32")
    )
}

/// wrk against `url` for `duration` (BENCH_THREADS threads, BENCH_CONNECTIONS connections).
pub fn wrk(url: &str, duration: &str) -> Run {
    let threads = env_or("BENCH_THREADS", "2");
    let connections = env_or("BENCH_CONNECTIONS", "32");
    let out = Command::new("wrk")
        .args([
            &format!("-t{threads}"),
            &format!("-c{connections}"),
            &format!("-d{duration}"),
            "--latency",
            url,
        ])
        .output()
        .expect("run wrk (apt-get install -y wrk)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut run = Run::empty();
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

/// Whole seconds of a duration written as wrk takes it (`10s`, `2m`, `10`).
fn seconds(duration: &str) -> u64 {
    let (n, factor) = split_unit(duration, &[("m", 60.0), ("s", 1.0)]);
    n.parse::<u64>().unwrap_or(10) * factor as u64
}

/// The h2load settings: BENCH_H2_CLIENTS connections (default 8) with BENCH_H2_STREAMS
/// streams each (default 4), so as many requests are in flight as wrk's 32 connections
/// have, on BENCH_THREADS threads.
fn h2load_args(duration: &str) -> Vec<String> {
    vec![
        format!("-t{}", env_or("BENCH_THREADS", "2")),
        format!("-c{}", env_or("BENCH_H2_CLIENTS", "8")),
        format!("-m{}", env_or("BENCH_H2_STREAMS", "4")),
        format!("-D{}", seconds(duration)),
    ]
}

/// The h2load command line (without the log file and the URL), for the table's heading.
pub fn h2load_settings(duration: &str) -> String {
    format!("h2load {}", h2load_args(duration).join(" "))
}

/// The `q` quantile (0..1) of sorted `values`, nearest rank.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// h2load (h2c, prior knowledge) against `addr` for `duration`, its per-request log in
/// `log`.
pub fn h2load(addr: SocketAddr, duration: &str, log: &Path) -> Run {
    let _ = std::fs::remove_file(log);
    let out = Command::new("h2load")
        .args(h2load_args(duration))
        .arg(format!("--log-file={}", log.display()))
        .arg(format!("http://{addr}/bench"))
        .output()
        .expect("run h2load (apt-get install -y nghttp2-client)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut run = Run::empty();
    for line in text.lines() {
        let words: Vec<&str> = line
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|w| !w.is_empty())
            .collect();
        match words.as_slice() {
            ["finished", "in", _, rps, "req/s", ..] => run.rps = rps.parse().unwrap_or(f64::NAN),
            ["requests:", _, "total", _, "started", _, "done", ok, "succeeded", failed, "failed", errored, "errored", timeout, "timeout"] =>
            {
                run.requests = ok.parse().unwrap_or(f64::NAN);
                if (failed, errored, timeout) != (&"0", &"0", &"0") {
                    run.errors.push_str(&format!(
                        "failed {failed} errored {errored} timeout {timeout} "
                    ));
                }
            }
            ["status", "codes:", ok, "2xx", rest @ ..] => {
                let others: u64 = rest.iter().filter_map(|w| w.parse::<u64>().ok()).sum();
                if others > 0 {
                    run.errors
                        .push_str(&format!("non-2xx {others} (2xx {ok}) "));
                }
            }
            _ => {}
        }
    }
    if run.rps.is_nan() {
        panic!("could not read h2load's output:\n{text}");
    }
    let mut micros: Vec<f64> = std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split('\t').nth(2)?.trim().parse::<f64>().ok())
        .collect();
    micros.sort_by(f64::total_cmp);
    run.p50_ms = quantile(&micros, 0.50) / 1000.0;
    run.p90_ms = quantile(&micros, 0.90) / 1000.0;
    run.p99_ms = quantile(&micros, 0.99) / 1000.0;
    let _ = std::fs::remove_file(log);
    run
}
