//! `breakerbox replay` on hostile traces: huge numbers, control characters in names and
//! lines, and files with nothing valid in them.

#![allow(clippy::disallowed_methods)]

#[path = "support/cli.rs"]
mod cli;

use std::time::{Duration, Instant};

use cli::{breakerbox, file, scratch, stderr};

const CONFIG: &str = "[breaker]\nconsecutive_failures = 5\nrecovery_timeout = \"2s\"\n";

/// Runs `breakerbox ARGS`, killing it (and failing) if it runs longer than `within`.
fn run_within(args: &[&str], within: Duration) -> std::process::Output {
    let mut child = breakerbox()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run breakerbox");
    let deadline = Instant::now() + within;
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("breakerbox {args:?} still ran after {within:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn no_control_bytes(text: &[u8]) -> bool {
    text.iter()
        .all(|b| *b >= 0x20 || matches!(b, b'\n' | b'\t' | b'\r'))
}

#[test]
fn an_svg_of_a_trace_with_huge_timestamps_and_latencies_finishes() {
    let dir = scratch("replay-huge-numbers");
    let config = file(&dir, "config.toml", CONFIG);
    for (name, trace) in [
        ("huge-latency.csv", "0,200,5\n1000,200,18446744073709\n"),
        ("huge-timestamp.csv", "0,200,5\n18446744073709,503,5\n"),
        (
            "both.csv",
            "0,503,18446744073709551\n18446744073709,503,18446744073709551\n",
        ),
        ("edge.csv", "0,200,5\n18446744073700,200,9000\n"),
        ("max.csv", "0,200,5\n18446744073709,200,0\n"),
    ] {
        let trace = file(&dir, name, trace);
        let svg = dir.join(format!("{name}.svg"));
        let out = run_within(
            &[
                "replay",
                "--config",
                &config,
                &trace,
                "--svg",
                svg.to_str().unwrap(),
            ],
            Duration::from_secs(20),
        );
        assert!(
            !stderr(&out).contains("panicked"),
            "{name}: {}",
            stderr(&out)
        );
        if out.status.success() {
            let text = std::fs::read_to_string(&svg).expect("the svg was written");
            assert!(
                text.len() < 1_000_000,
                "{name}: an svg of {} bytes",
                text.len()
            );
            assert!(text.trim_end().ends_with("</svg>"), "{name}");
        } else {
            assert!(!stderr(&out).is_empty(), "{name}: failed without a message");
        }
    }
}

#[test]
fn control_characters_in_the_trace_name_do_not_break_the_svg() {
    let dir = scratch("replay-control-name");
    let config = file(&dir, "config.toml", CONFIG);
    let trace = file(&dir, "tr\u{1}ace\u{1b}[31m.csv", "0,200,5\n10,503,5\n");
    let svg = dir.join("out.svg");
    let out = run_within(
        &[
            "replay",
            "--config",
            &config,
            &trace,
            "--svg",
            svg.to_str().unwrap(),
        ],
        Duration::from_secs(20),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read(&svg).expect("the svg was written");
    assert!(
        no_control_bytes(&text),
        "a control character in the SVG (invalid XML)"
    );
    assert!(
        no_control_bytes(&out.stdout),
        "a control character printed to the terminal"
    );
}

#[test]
fn escape_sequences_in_a_trace_are_not_echoed_raw_to_the_terminal() {
    let dir = scratch("replay-escapes");
    let config = file(&dir, "config.toml", CONFIG);
    let trace = file(
        &dir,
        "trace.csv",
        "0,200,5\n\u{1b}]0;pwned\u{7}\u{1b}[2J,200,5\n20,200,\u{1b}[31mred\n30,200,5\n",
    );
    let out = run_within(
        &["replay", "--config", &config, &trace],
        Duration::from_secs(20),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("skipped"), "{}", stderr(&out));
    assert!(
        no_control_bytes(&out.stderr),
        "raw escape sequences on stderr: {:?}",
        stderr(&out)
    );
    assert!(no_control_bytes(&out.stdout));
}

#[test]
fn a_trace_with_no_valid_line_exits_non_zero() {
    let dir = scratch("replay-nothing-valid");
    let config = file(&dir, "config.toml", CONFIG);
    for (name, text) in [
        ("garbage.csv", "this is not a trace\nnor this\n"),
        ("empty.csv", ""),
        ("header-only.csv", "timestamp,status,latency_ms\n"),
    ] {
        let trace = file(&dir, name, text);
        let out = run_within(
            &["replay", "--config", &config, &trace],
            Duration::from_secs(20),
        );
        assert!(!out.status.success(), "{name}: exit 0 with no valid line");
        assert!(
            stderr(&out).contains("no valid line"),
            "{name}: {}",
            stderr(&out)
        );
    }
}
