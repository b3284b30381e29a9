//! Replay throughput: `breakerbox replay` (the real binary, release build) over generated
//! traces of 2M events, CSV and JSON Lines, best of three runs. Target: >= 1M events/s.
//!
//! `cargo bench -p breakerbox-cli --bench replay`

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use breakerbox::{Clock, MonotonicClock};

const EVENTS: u64 = 2_000_000;
const RUNS: usize = 3;

/// A trace with healthy stretches, outages, flapping and slow periods, from a fixed seed.
fn generate(json: bool) -> String {
    let mut out = String::with_capacity(EVENTS as usize * 24);
    if !json {
        out.push_str("timestamp,status,latency_ms,error_code\n");
    }
    let mut seed: u64 = 0x1234_5678;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut t: u64 = 0;
    for _ in 0..EVENTS {
        let r = next();
        t += r % 5;
        let status = match (t / 60_000) % 4 {
            2 if r % 10 != 0 => 503,
            3 if r % 4 == 0 => 0,
            _ if r % 50 == 0 => 500,
            _ => 200,
        };
        let latency = (r >> 20) % 900;
        if json {
            let _ = writeln!(
                out,
                r#"{{"timestamp":{t},"status":{status},"latency_ms":{latency}}}"#
            );
        } else {
            let _ = writeln!(out, "{t},{status},{latency},");
        }
    }
    out
}

fn best_rate(config: &Path, trace: &Path) -> f64 {
    let clock = MonotonicClock;
    let mut best = f64::MAX;
    for _ in 0..RUNS {
        let start = clock.now();
        let output = Command::new(env!("CARGO_BIN_EXE_breakerbox"))
            .arg("replay")
            .arg("--config")
            .arg(config)
            .arg(trace)
            .output()
            .expect("run breakerbox replay");
        let secs = clock.now().saturating_sub(start).as_u64() as f64 / 1e9;
        assert!(
            output.status.success(),
            "replay failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        best = best.min(secs);
    }
    EVENTS as f64 / best
}

fn main() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("replay-bench");
    std::fs::create_dir_all(&dir).expect("create bench dir");
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        "[breaker]\nconsecutive_failures = 10\nfailure_rate = 0.5\nwindow = \"count:100\"\nmin_calls = 20\nslow_call_rate = 0.8\nslow_call_threshold = \"800ms\"\nrecovery_timeout = \"5s\"\n\n[judge]\nslow_threshold = \"850ms\"\n",
    )
    .expect("write config");
    for (name, json) in [("csv", false), ("jsonl", true)] {
        let trace = dir.join(format!("trace.{name}"));
        std::fs::write(&trace, generate(json)).expect("write trace");
        let rate = best_rate(&config, &trace);
        println!(
            "replay {name:5}: {EVENTS} events, best of {RUNS}: {:.2}M events/s (whole process: parse, judge, model)",
            rate / 1e6
        );
    }
}
