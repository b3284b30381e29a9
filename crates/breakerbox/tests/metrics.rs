//! Metrics through the `metrics` facade, scraped from a real Prometheus exporter over
//! HTTP after a scripted trip and recovery; the exposition passes `promtool check metrics`.

#![cfg(feature = "metrics")]
#![allow(clippy::unwrap_used)] // tests unwrap
// A test reads a real HTTP endpoint with a deadline.
#![allow(clippy::disallowed_methods)]

#[path = "support/prometheus.rs"]
mod prometheus;

use std::time::Duration;

use breakerbox::metrics::MetricsListener;
use breakerbox::{CircuitBreaker, Config, ManualClock, Phase};
use metrics_exporter_prometheus::PrometheusBuilder;
use prometheus::{assert_promtool_accepts, free_port, scrape};

/// The value of the sample `name{labels}`, which must be there.
fn value(text: &str, sample: &str) -> f64 {
    prometheus::value(text, sample).unwrap_or_else(|| panic!("no sample {sample} in:\n{text}"))
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

    // Rule 20: would-be rejections of a breaker in shadow mode.
    let search = CircuitBreaker::builder()
        .name("search")
        .shadow(true)
        .clock(clock.clone())
        .listener(MetricsListener)
        .build()
        .unwrap();
    search.force_open();
    for _ in 0..2 {
        assert!(search.try_acquire().is_ok());
    }

    // Rule 23: rejections of a recovery ramping up carry the reason `ramp`.
    let ramped = Config::builder()
        .consecutive_failures(1)
        .recovery_timeout(Duration::from_secs(1))
        .required_successes(1)
        .ramp(0.1, Duration::from_secs(30))
        .build()
        .unwrap();
    let checkout = CircuitBreaker::builder()
        .name("checkout")
        .config(ramped)
        .clock(clock.clone())
        .listener(MetricsListener)
        .build()
        .unwrap();
    checkout.try_acquire().unwrap().failure();
    assert!(checkout.try_acquire().is_err()); // open: reason `open`
    clock.advance(Duration::from_secs(1));
    checkout.try_acquire().unwrap().success();
    assert_eq!(checkout.phase(), Phase::Closed);
    let mut ramp_rejections = 0.0;
    for _ in 0..20 {
        match checkout.try_acquire() {
            Ok(permit) => permit.success(),
            Err(_) => ramp_rejections += 1.0,
        }
    }
    assert!(
        ramp_rejections >= 15.0,
        "{ramp_rejections} of 20 rejected at 10 %"
    );

    let text = scrape(port);
    let c = "breaker=\"checkout\"";
    assert_eq!(
        value(
            &text,
            &format!("breakerbox_rejections_total{{{c},phase=\"closed\",reason=\"ramp\"}}")
        ),
        ramp_rejections
    );
    assert_eq!(
        value(
            &text,
            &format!("breakerbox_rejections_total{{{c},phase=\"open\",reason=\"open\"}}")
        ),
        1.0
    );
    assert_eq!(
        value(
            &text,
            "breakerbox_shadow_rejections_total{breaker=\"search\",phase=\"forced_open\",reason=\"open\"}"
        ),
        2.0
    );
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
            &format!("breakerbox_rejections_total{{{b},phase=\"open\",reason=\"open\"}}")
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
    assert_promtool_accepts(&text);
}
