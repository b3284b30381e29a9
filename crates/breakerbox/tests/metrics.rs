//! Metrics through the `metrics` facade, scraped from a real Prometheus exporter over
//! HTTP after a scripted trip and recovery; the exposition passes `promtool check metrics`.

#![cfg(feature = "metrics")]
#![allow(clippy::unwrap_used)] // tests unwrap
// A test reads a real HTTP endpoint with a deadline.
#![allow(clippy::disallowed_methods)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use breakerbox::metrics::MetricsListener;
use breakerbox::{CircuitBreaker, Config, ManualClock, Phase};
use metrics_exporter_prometheus::PrometheusBuilder;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET /metrics` from the exporter's own HTTP listener.
fn scrape(port: u16) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) {
            stream
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            stream
                .write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                .unwrap();
            let mut response = String::new();
            if stream.read_to_string(&mut response).is_ok() && response.starts_with("HTTP/1.1 200")
            {
                let body = response.split_once("\r\n\r\n").unwrap().1;
                return body.to_string();
            }
        }
        assert!(Instant::now() < deadline, "the exporter never answered");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The value of the sample `name{labels}` (labels in the exporter's order).
fn value(text: &str, sample: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(sample)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no sample {sample} in:\n{text}"))
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn a_trip_and_a_recovery_show_in_a_real_prometheus_scrape() {
    let port = free_port();
    PrometheusBuilder::new()
        .with_http_listener(([127, 0, 0, 1], port))
        .install()
        .unwrap();
    breakerbox::metrics::describe();

    let clock = ManualClock::new();
    let config = Config::builder()
        .consecutive_failures(2)
        .recovery_timeout(Duration::from_secs(1))
        .required_successes(1)
        .build()
        .unwrap();
    let breaker = CircuitBreaker::builder()
        .name("payments")
        .config(config)
        .clock(clock.clone())
        .listener(MetricsListener)
        .build()
        .unwrap();
    breaker.try_acquire().unwrap().success();
    let late = breaker.try_acquire().unwrap();
    breaker.try_acquire().unwrap().failure();
    breaker.try_acquire().unwrap().failure();
    assert_eq!(breaker.phase(), Phase::Open);
    for _ in 0..3 {
        assert!(breaker.try_acquire().is_err());
    }
    // A result of the closed phase that is over: stale.
    late.success();
    clock.advance(Duration::from_secs(1));
    let probe = breaker.try_acquire().unwrap();
    assert!(probe.is_probe());
    probe.success();
    assert_eq!(breaker.phase(), Phase::Closed);

    let text = scrape(port);
    let b = "breaker=\"payments\"";
    assert_eq!(
        value(
            &text,
            &format!("breakerbox_calls_total{{{b},verdict=\"success\"}}")
        ),
        3.0
    );
    assert_eq!(
        value(
            &text,
            &format!("breakerbox_calls_total{{{b},verdict=\"failure\"}}")
        ),
        2.0
    );
    assert_eq!(
        value(
            &text,
            &format!("breakerbox_probes_total{{{b},verdict=\"success\"}}")
        ),
        1.0
    );
    assert_eq!(
        value(
            &text,
            &format!("breakerbox_rejections_total{{{b},phase=\"open\"}}")
        ),
        3.0
    );
    for (from, to) in [
        ("closed", "open"),
        ("open", "half_open"),
        ("half_open", "closed"),
    ] {
        assert_eq!(
            value(
                &text,
                &format!("breakerbox_transitions_total{{{b},from=\"{from}\",to=\"{to}\"}}")
            ),
            1.0,
            "{from} -> {to}"
        );
    }
    assert_eq!(
        value(&text, &format!("breakerbox_stale_results_total{{{b}}}")),
        1.0
    );
    assert_eq!(
        value(&text, &format!("breakerbox_state{{{b},phase=\"closed\"}}")),
        1.0
    );
    assert_eq!(
        value(&text, &format!("breakerbox_state{{{b},phase=\"open\"}}")),
        0.0
    );
    assert!(text.contains("# HELP breakerbox_calls_total"), "{text}");

    // The exposition is valid Prometheus text.
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
