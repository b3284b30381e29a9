//! `/metrics`: the default exposition, and a `metrics-exporter-prometheus` handle's text,
//! both checked by `promtool check metrics` (Debian package `prometheus`; skipped with a
//! note when it is not installed).

#![allow(clippy::unwrap_used)]

#[path = "../../breakerbox/tests/support/prometheus.rs"]
mod prometheus;
mod support;

use breakerbox::metrics::MetricsListener;
use breakerbox::{CircuitBreaker, Phase};
use breakerbox_admin::AdminService;
use metrics_exporter_prometheus::PrometheusBuilder;
use support::Served;

fn promtool_accepts(text: &str) {
    if support::installed("promtool") {
        prometheus::assert_promtool_accepts(text);
    } else {
        eprintln!(
            "skipped `promtool check metrics`: promtool is not installed \
             (Debian package prometheus; scripts/test.sh installs it)"
        );
    }
}

#[test]
fn without_a_renderer_metrics_holds_the_state_of_every_breaker_and_passes_promtool() {
    let payments = CircuitBreaker::builder().name("payments").build().unwrap();
    let odd = CircuitBreaker::builder()
        .name("say \"hi\"\\now")
        .build()
        .unwrap();
    let served = Served::service(
        AdminService::builder()
            .breaker(payments.clone())
            .breaker(odd)
            .build()
            .unwrap(),
    );
    payments.force_open();
    let reply = served.get("/metrics");
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    for line in [
        "# TYPE breakerbox_state gauge",
        "breakerbox_state{breaker=\"payments\",phase=\"forced_open\"} 1",
        "breakerbox_state{breaker=\"payments\",phase=\"closed\"} 0",
        "breakerbox_state{breaker=\"say \\\"hi\\\"\\\\now\",phase=\"closed\"} 1",
    ] {
        assert!(
            reply.body.lines().any(|l| l == line),
            "missing {line:?} in\n{}",
            reply.body
        );
    }
    promtool_accepts(&reply.body);
}

#[test]
fn a_prometheus_handle_renders_the_cores_metrics_and_passes_promtool() {
    // The recorder is the process's: this test's breaker has a name of its own.
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).unwrap();
    breakerbox::metrics::describe();
    let checkout = CircuitBreaker::builder()
        .name("checkout")
        .consecutive_failures(1)
        .listener(MetricsListener)
        .build()
        .unwrap();
    checkout.call(|| Err::<(), _>("down")).unwrap_err();
    assert_eq!(checkout.phase(), Phase::Open);
    let served = Served::service(
        AdminService::builder()
            .breaker(checkout)
            .metrics(move || handle.render())
            .build()
            .unwrap(),
    );
    let reply = served.get("/metrics");
    assert_eq!(reply.status, 200);
    for line in [
        "breakerbox_state{breaker=\"checkout\",phase=\"open\"} 1",
        "breakerbox_calls_total{breaker=\"checkout\",verdict=\"failure\"} 1",
        "breakerbox_transitions_total{breaker=\"checkout\",from=\"closed\",to=\"open\"} 1",
    ] {
        assert!(
            reply.body.lines().any(|l| l == line),
            "missing {line:?} in\n{}",
            reply.body
        );
    }
    promtool_accepts(&reply.body);
}
