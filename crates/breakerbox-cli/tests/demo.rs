//! `breakerbox demo` through the real binary: short runs, their summaries checked.

#![allow(clippy::disallowed_methods)]

#[path = "support/cli.rs"]
mod cli;
// The Redis engine's own harness: spawns redis-server on a free loopback port.
#[path = "../../breakerbox-redis/tests/support/redis_server.rs"]
mod redis_server;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cli::{assert_ok, breakerbox, run, stdout};
use serde_json::Value;

/// The JSON summary printed after the live view.
fn summary(text: &str) -> Value {
    let start = text
        .find("\n{")
        .expect("a JSON summary after the live view")
        + 1;
    serde_json::from_str(&text[start..]).expect("the summary is JSON")
}

fn group<'a>(summary: &'a Value, name_part: &str) -> &'a Value {
    summary["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .find(|g| g["name"].as_str().unwrap_or("").contains(name_part))
        .unwrap_or_else(|| panic!("no group named like {name_part:?} in {summary}"))
}

fn n(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("{key} in {v}"))
}

#[test]
fn the_breaker_spares_the_failing_upstream_and_the_callers_time() {
    let output = run(&["demo", "--duration", "6s", "--json"]);
    assert_ok(&output);
    let text = stdout(&output);
    // Off a terminal: plain per-second lines, no escape codes.
    assert!(!text.contains('\x1b'), "{text}");
    let rows = text
        .lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()) && l.contains("s  "))
        .count();
    assert!((5..=7).contains(&rows), "{rows} rows in:\n{text}");
    for stage in ["healthy", "outage", "slow", "recovering"] {
        assert!(text.contains(stage), "no {stage} row in:\n{text}");
    }

    let s = summary(&text);
    assert_eq!(s["interrupted"], false);
    assert_eq!(s["upstream_recovered"], true);
    let with = group(&s, "with breaker");
    let without = group(&s, "without breaker");
    // The same schedule for both.
    assert!(
        (n(with, "offered") - n(without, "offered")).abs() <= 2.0,
        "{s}"
    );
    assert!(n(with, "offered") >= 200.0, "{s}");
    // The breaker version sent far fewer calls to the failing upstream.
    assert!(n(without, "reached_failing_upstream") >= 100.0, "{s}");
    assert!(
        n(with, "reached_failing_upstream") * 3.0 < n(without, "reached_failing_upstream"),
        "{s}"
    );
    assert!(n(with, "failed") * 3.0 < n(without, "failed"), "{s}");
    assert!(n(with, "rejected") > 50.0, "{s}");
    assert_eq!(n(without, "rejected"), 0.0, "{s}");
    assert!(n(with, "waited_s") * 2.0 < n(without, "waited_s"), "{s}");
    assert!(n(with, "trips") >= 1.0, "{s}");
    assert!(n(with, "probes") >= 1.0, "{s}");
    let closed = n(with, "closed_after_recovery_s");
    assert!((0.0..3.0).contains(&closed), "{s}");
}

#[test]
fn the_recovery_phase_ramps_the_calls_back_up() {
    let output = run(&["demo", "--duration", "16s", "--json"]);
    assert_ok(&output);
    let text = stdout(&output);
    assert!(
        text.contains("then 10% of calls, growing to all over 1.6s"),
        "{text}"
    );
    assert!(text.contains("closed (ramp "), "no ramping row in:\n{text}");
    let s = summary(&text);
    let with = group(&s, "with breaker");
    let ramped = n(with, "ramp_rejected");
    assert!(ramped > 0.0 && ramped < n(with, "rejected"), "{s}");
    assert!(group(&s, "without breaker")["ramp_rejected"] == 0, "{s}");
}

#[test]
fn the_text_summary_compares_both_groups() {
    let output = run(&["demo", "--duration", "6s", "--rate", "20"]);
    assert_ok(&output);
    let text = stdout(&output);
    for needle in [
        "summary after 6.0s",
        "calls that reached the failing upstream",
        "time callers spent waiting",
        "closed after the upstream recovered",
        "the upstream recovered at 4.5s",
        "with breaker",
        "without breaker",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
}

#[test]
fn ctrl_c_ends_the_run_early_with_the_summary() {
    let mut child = breakerbox()
        .args(["demo", "--duration", "30s", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn demo");
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => {
                let second_row = line.trim_start().starts_with("2s");
                seen.push(line);
                if second_row {
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    assert!(
        seen.iter().any(|l| l.trim_start().starts_with("2s")),
        "no second row: {seen:?}"
    );
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let exit = loop {
        if let Some(exit) = child.try_wait().expect("wait") {
            break exit;
        }
        assert!(Instant::now() < deadline, "demo did not end after Ctrl-C");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "{exit:?}");
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(2)) {
        seen.push(line);
    }
    let text = seen.join("\n");
    let s = summary(&text);
    assert_eq!(s["interrupted"], true, "{s}");
    assert!(n(&s, "duration_s") < 10.0, "{s}");
    assert_eq!(s["upstream_recovered"], false, "{s}");
}

#[test]
fn nodes_sharing_a_breaker_through_redis_send_fewer_probes_than_a_breaker_each() {
    let redis = redis_server::RedisServer::start();
    let output = run(&[
        "demo",
        "--duration",
        "6s",
        "--redis",
        &redis.url(),
        "--nodes",
        "3",
        "--rate",
        "20",
        "--json",
    ]);
    assert_ok(&output);
    let s = summary(&stdout(&output));
    let shared = group(&s, "shared breaker, 3 nodes");
    let local = group(&s, "a breaker per node, 3 nodes");
    let bare = group(&s, "without breaker");
    assert_eq!(n(shared, "nodes"), 3.0);
    assert!(n(shared, "probes") >= 1.0, "{s}");
    assert!(n(shared, "probes") < n(local, "probes"), "{s}");
    for g in [shared, local] {
        assert!(
            n(g, "reached_failing_upstream") * 3.0 < n(bare, "reached_failing_upstream"),
            "{s}"
        );
    }
    // The shared state is in Redis, under the demo's prefix.
    let keys = redis.command(&["KEYS", "bb:demo:*"]).unwrap_or_default();
    assert!(!keys.starts_with("*0"), "{keys}");
}

#[test]
fn an_unreachable_redis_is_reported() {
    let output = run(&[
        "demo",
        "--duration",
        "2s",
        "--redis",
        "redis://127.0.0.1:1/",
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        cli::stderr(&output).contains("redis"),
        "{}",
        cli::stderr(&output)
    );
}

/// The rounds of `demo --bad-node --json`: without the quorum, then with it.
fn bad_node_rounds(text: &str) -> (Value, Value) {
    let start = text.find("\n{").expect("a JSON summary") + 1;
    let s: Value = serde_json::from_str(&text[start..]).expect("the summary is JSON");
    let rounds = s["rounds"].as_array().expect("rounds").clone();
    assert_eq!(rounds.len(), 2, "{s}");
    (rounds[0].clone(), rounds[1].clone())
}

#[test]
fn one_bad_node_trips_the_fleet_without_a_quorum_and_only_itself_with_one() {
    let redis = redis_server::RedisServer::start();
    let url = redis.url();
    let output = run(&[
        "demo",
        "--bad-node",
        "--redis",
        &url,
        "--duration",
        "6s",
        "--json",
    ]);
    assert_ok(&output);
    let text = stdout(&output);
    let (without, with) = bad_node_rounds(&text);
    assert_eq!(n(&without, "quorum"), 1.0);
    assert!(n(&without, "fleet_trips") >= 1.0, "{without}");
    assert!(n(&without, "healthy_rejected") > 0.0, "{without}");
    assert_eq!(n(&without, "local_opens"), 0.0, "{without}");
    assert_eq!(n(&with, "quorum"), 2.0);
    assert_eq!(n(&with, "fleet_trips"), 0.0, "{with}");
    assert_eq!(n(&with, "healthy_rejected"), 0.0, "{with}");
    assert_eq!(
        n(&with, "healthy_ok"),
        n(&with, "healthy_offered"),
        "{with}"
    );
    assert!(n(&with, "local_opens") >= 1.0, "{with}");
    assert!(
        n(&with, "bad_rejected") > 0.0,
        "the bad node protects itself: {with}"
    );
}

#[test]
fn the_bad_node_demo_starts_its_own_redis_and_prints_a_comparison() {
    let output = run(&["demo", "--bad-node", "--duration", "4s"]);
    assert_ok(&output);
    let text = stdout(&output);
    for part in [
        "without quorum",
        "with quorum 2",
        "shared breaker trips",
        "bad node: local opens",
        "healthy nodes' calls served",
    ] {
        assert!(text.contains(part), "no {part:?} in:\n{text}");
    }
}
