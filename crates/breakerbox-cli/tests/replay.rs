//! `breakerbox replay` through the real binary, on traces whose outcome is known by hand.

#[path = "support/cli.rs"]
mod cli;

use cli::{assert_ok, file, run, scratch, stderr, stdout};

/// 10 s healthy, 5 s of 503s, 5 s healthy: one call every 10 ms, each taking 5 ms.
fn outage_trace() -> String {
    let mut out = String::from("timestamp,status,latency_ms\n");
    for i in 0..2000u32 {
        let t = i * 10;
        let status = if (10_000..15_000).contains(&t) {
            503
        } else {
            200
        };
        out.push_str(&format!("{t},{status},5\n"));
    }
    out
}

const CONFIG: &str = "[breaker]\nconsecutive_failures = 5\nrecovery_timeout = \"2s\"\n";

fn json(output: &std::process::Output) -> serde_json::Value {
    serde_json::from_str(&stdout(output)).expect("replay --json prints JSON")
}

/// Worked by hand: the 5th 503 (sent at 10.040 s) ends at 10.045 s and trips; open until
/// 12.045 s, so the calls of 10.050..=12.040 s are rejected (200). The call at 12.050 s is a
/// probe, a 503: open again until 14.055 s (200 more rejected, 12.060..=14.050). The probe
/// at 14.060 s fails too: open until 16.065 s (200 more, 14.070..=16.060). The probes at
/// 16.070 s and 16.080 s succeed: closed at 16.085 s. So one trip, two re-opens, 600
/// rejected, 5 + 2 failures let through, 4 probes, 3 x 2.005 s open.
#[test]
fn a_known_outage_gives_the_trips_and_rejections_worked_out_by_hand() {
    let dir = scratch("known-outage");
    let config = file(&dir, "config.toml", CONFIG);
    let trace = file(&dir, "trace.csv", &outage_trace());
    let output = run(&["replay", "--config", &config, &trace, "--json"]);
    assert_ok(&output);
    let v = json(&output);
    assert_eq!(v["events"], 2000);
    assert_eq!(v["trips"], 1);
    assert_eq!(v["reopens"], 2);
    assert_eq!(v["closes"], 1);
    assert_eq!(v["rejected"], 600);
    assert_eq!(v["failed_let_through"], 7);
    assert_eq!(v["failures_by_reason"]["status 503"], 7);
    assert_eq!(v["probes"], 4);
    assert_eq!(v["time_open_ms"], 6015.0);
    assert_eq!(v["time_half_open_ms"], 25.0);
    assert_eq!(v["malformed"], 0);
}

#[test]
fn the_text_summary_names_every_number() {
    let dir = scratch("text-summary");
    let config = file(&dir, "config.toml", CONFIG);
    let trace = file(&dir, "trace.csv", &outage_trace());
    let output = run(&["replay", "--config", &config, &trace]);
    assert_ok(&output);
    let text = stdout(&output);
    for needle in [
        "replayed 2000 calls",
        "trips                             1",
        "calls rejected                  600",
        "failed calls let through          7",
        "probes sent                       4",
        "time open",
        "6.015s",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
}

#[test]
fn json_lines_in_seconds_replay_like_the_csv_in_milliseconds() {
    let dir = scratch("jsonl");
    let config = file(&dir, "config.toml", CONFIG);
    let mut jsonl = String::new();
    for i in 0..2000u32 {
        let t = f64::from(i) / 100.0;
        let status = if (1000..1500).contains(&i) { 503 } else { 200 };
        jsonl.push_str(&format!(
            "{{\"timestamp\": {t}, \"status\": {status}, \"latency_ms\": 5}}\n"
        ));
    }
    let trace = file(&dir, "trace.jsonl", &jsonl);
    let output = run(&[
        "replay",
        "--config",
        &config,
        &trace,
        "--timestamps",
        "s",
        "--json",
    ]);
    assert_ok(&output);
    let v = json(&output);
    assert_eq!(
        (v["trips"].clone(), v["rejected"].clone()),
        (1.into(), 600.into())
    );
}

#[test]
fn business_codes_in_the_trace_are_judged_by_the_judge() {
    let dir = scratch("business");
    let config = file(
        &dir,
        "config.toml",
        "[breaker]\nconsecutive_failures = 3\n\n[judge.business]\npointers = [\"/error/code\"]\nfailure_codes = [\"E001\"]\n",
    );
    let trace = file(
        &dir,
        "trace.csv",
        "timestamp,status,latency_ms,error_code\n0,200,1,E001\n10,200,1,E001\n20,200,1,OK\n30,200,1,E001\n40,200,1,E001\n50,200,1,E001\n60,200,1,\n",
    );
    let output = run(&["replay", "--config", &config, &trace, "--json"]);
    assert_ok(&output);
    let v = json(&output);
    assert_eq!(v["trips"], 1, "{v}");
    assert_eq!(v["failed_let_through"], 5, "{v}");
    assert_eq!(v["rejected"], 1, "{v}");
}

#[test]
fn malformed_lines_are_reported_with_their_number_and_skipped() {
    let dir = scratch("malformed");
    let config = file(&dir, "config.toml", CONFIG);
    let trace = file(
        &dir,
        "trace.csv",
        "timestamp,status,latency_ms\n0,200,1\nsoon,200,1\n20,200,1\n30,abc,1\n",
    );
    let output = run(&["replay", "--config", &config, &trace, "--json"]);
    assert_ok(&output);
    let err = stderr(&output);
    assert!(
        err.contains("trace.csv:3: invalid timestamp \"soon\""),
        "{err}"
    );
    assert!(err.contains("trace.csv:5: invalid status \"abc\""), "{err}");
    let v = json(&output);
    assert_eq!(
        (v["events"].clone(), v["malformed"].clone()),
        (2.into(), 2.into())
    );
}

#[test]
fn strict_mode_stops_at_the_first_malformed_line_with_exit_code_2() {
    let dir = scratch("strict");
    let config = file(&dir, "config.toml", CONFIG);
    let trace = file(
        &dir,
        "trace.csv",
        "timestamp,status,latency_ms\n0,200,1\n10,200\n20,abc,1\n",
    );
    let output = run(&["replay", "--config", &config, &trace, "--strict"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(
        err.contains("trace.csv:3: missing field `latency_ms`"),
        "{err}"
    );
    assert!(!err.contains("trace.csv:4"), "{err}");
    assert!(stdout(&output).is_empty());
}

#[test]
fn svg_timeline_is_written_with_phase_bands_and_the_failure_rate() {
    let dir = scratch("svg");
    let config = file(&dir, "config.toml", CONFIG);
    let trace = file(&dir, "trace.csv", &outage_trace());
    let svg = dir.join("timeline.svg");
    let output = run(&[
        "replay",
        "--config",
        &config,
        &trace,
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert_ok(&output);
    let text = std::fs::read_to_string(&svg).expect("the svg was written");
    assert!(text.starts_with("<svg"), "{text}");
    assert!(text.trim_end().ends_with("</svg>"));
    assert!(text.contains("<title>open</title>"), "no open band");
    assert!(text.contains("<title>closed</title>"), "no closed band");
    assert!(text.contains("<polyline"), "no failure-rate line");
}

#[test]
fn a_bad_config_names_the_key() {
    let dir = scratch("bad-config");
    let config = file(&dir, "config.toml", "[breaker]\nfailure_rate = 1.5\n");
    let trace = file(&dir, "trace.csv", &outage_trace());
    let output = run(&["replay", "--config", &config, &trace]);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(err.contains("breaker.failure_rate"), "{err}");
    assert!(err.contains("1.5"), "{err}");
}

/// The same outage in shadow mode (rule 20): the same transitions as above, the 600
/// would-be rejections admitted and counted. Of them, those sent before 15 s are 503s:
/// 200 + 200 + 93 (14.070..=14.990 s); so every one of the trace's 500 failures is let
/// through.
#[test]
fn in_shadow_mode_the_same_outage_makes_the_same_transitions_and_counts_would_be_rejections() {
    let dir = scratch("shadow-outage");
    let config = file(&dir, "config.toml", &format!("{CONFIG}shadow = true\n"));
    let trace = file(&dir, "trace.csv", &outage_trace());
    let v = json(&run(&["replay", "--config", &config, &trace, "--json"]));
    assert_eq!(
        (&v["trips"], &v["reopens"], &v["closes"]),
        (&1.into(), &2.into(), &1.into())
    );
    assert_eq!(v["rejected"], 0);
    assert_eq!(v["shadow_rejections"], 600);
    assert_eq!(v["shadow_rejections_failed"], 493);
    assert_eq!(v["failed_let_through"], 500);
    assert_eq!(v["probes"], 4);
    let text = stdout(&run(&["replay", "--config", &config, &trace]));
    assert!(
        text.contains("shadow: would-be rejected       600"),
        "{text}"
    );
}

/// Rule 22, worked by hand: ten healthy calls (every 100 ms, 5 ms each), then a dependency
/// that hangs: from 1 s on, every call answers 200 only after 10 s. With a 1 s
/// `call_timeout` each hung call is cancelled at 1 s, a `timeout` failure: the third ends at
/// 2.2 s and trips, so the calls of 1.0..=2.1 s (12) got through and those of 2.2..=3.0 s (9)
/// are rejected. Without the deadline the 200s would be successes and nothing would trip.
#[test]
fn calls_longer_than_the_call_timeout_are_replayed_as_timeouts() {
    let mut trace = String::from("timestamp,status,latency_ms\n");
    for i in 0..31u32 {
        let latency = if i < 10 { 5 } else { 10_000 };
        trace.push_str(&format!("{},200,{latency}\n", i * 100));
    }
    let dir = scratch("call-timeout");
    let trace = file(&dir, "trace.csv", &trace);
    let config = file(
        &dir,
        "config.toml",
        "[breaker]\nconsecutive_failures = 3\nrecovery_timeout = \"30s\"\ncall_timeout = \"1s\"\n",
    );
    let output = run(&["replay", "--config", &config, &trace, "--json"]);
    assert_ok(&output);
    let v = json(&output);
    assert_eq!(v["events"], 31);
    assert_eq!(v["trips"], 1);
    assert_eq!(v["rejected"], 9);
    assert_eq!(v["failed_let_through"], 12);
    assert_eq!(v["failures_by_reason"]["timeout"], 12);
    let plain = file(&dir, "plain.toml", "[breaker]\nconsecutive_failures = 3\n");
    let output = run(&["replay", "--config", &plain, &trace, "--json"]);
    assert_ok(&output);
    assert_eq!(
        json(&output)["trips"],
        0,
        "without the deadline, slow 200s are fine"
    );
}

/// The same outage with a ramp of 10% over 1 s (rule 23): the close at 16.085 s begins it,
/// so the 100 calls of 16.090..=17.080 s are the ramp's, the k-th (from 0) at a fraction
/// of 10.45% + 0.9% * k; worked out with `ramp_admits`, 44 of them are turned away. The
/// outage itself replays as before (600 rejected while open).
#[test]
fn a_ramp_after_the_outage_turns_away_a_shrinking_share_and_says_so() {
    let dir = scratch("ramp-outage");
    let config = file(
        &dir,
        "config.toml",
        &format!("{CONFIG}ramp_start = 0.1\nramp_duration = \"1s\"\n"),
    );
    let trace = file(&dir, "trace.csv", &outage_trace());
    let v = json(&run(&["replay", "--config", &config, &trace, "--json"]));
    assert_eq!(
        (&v["trips"], &v["reopens"], &v["closes"]),
        (&1.into(), &2.into(), &1.into())
    );
    assert_eq!(v["ramp_rejections"], 44);
    assert_eq!(v["rejected"], 644);
    let text = stdout(&run(&["replay", "--config", &config, &trace]));
    assert!(
        text.contains("of them by the ramp              44"),
        "{text}"
    );
}
