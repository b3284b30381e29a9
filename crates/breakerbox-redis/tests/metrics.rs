//! The Redis engine's metrics through the `metrics` facade, scraped from a real Prometheus
//! exporter over HTTP: the phase each node sees, outcomes, script round trips, and an
//! outage with its fallback calls.

#![cfg(feature = "metrics")]
#![allow(clippy::unwrap_used)] // tests unwrap
// Tests measure real elapsed time against real servers.
#![allow(clippy::disallowed_methods)]

#[path = "support/redis_server.rs"]
mod redis_server;

#[path = "../../breakerbox/tests/support/prometheus.rs"]
mod prometheus;

use std::time::{Duration, Instant};

use breakerbox::metrics::MetricsListener;
use breakerbox::{Config, Phase};
use breakerbox_redis::{Backoff, RedisBreaker};
use metrics_exporter_prometheus::PrometheusBuilder;
use prometheus::{assert_promtool_accepts, free_port, scrape, value};
use redis_server::RedisServer;

async fn wait_for_sample(port: u16, sample: &str, wanted: impl Fn(f64) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = scrape(port);
        if value(&text, sample).is_some_and(&wanted) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "never saw {sample} as wanted:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phases_outcomes_round_trips_and_an_outage_show_in_a_real_scrape() {
    let port = free_port();
    PrometheusBuilder::new()
        .with_http_listener(([127, 0, 0, 1], port))
        .install()
        .unwrap();
    breakerbox_redis::describe_metrics();
    let mut server = RedisServer::start();
    let config = Config::builder()
        .consecutive_failures(2)
        .recovery_timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let node = |name: &str| {
        RedisBreaker::builder(server.url(), name)
            .config(config.clone())
            .timeout(Duration::from_millis(200))
            .backoff(Backoff {
                min: Duration::from_millis(20),
                max: Duration::from_millis(100),
            })
            .listener(MetricsListener)
            .build()
    };
    let a = node("metered").await.unwrap();
    let b = node("metered").await.unwrap();
    a.acquire().await.unwrap().success().await;
    for _ in 0..2 {
        a.acquire().await.unwrap().failure().await;
    }
    // The other node learns the trip by pub/sub; the phase gauge follows its view.
    let deadline = Instant::now() + Duration::from_secs(5);
    while b.phase() != Phase::Open {
        assert!(Instant::now() < deadline, "node b never saw the trip");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let m = "breaker=\"metered\"";
    let text = wait_for_sample(
        port,
        &format!("breakerbox_state{{{m},phase=\"open\"}}"),
        |v| v == 1.0,
    )
    .await;
    assert_eq!(
        value(
            &text,
            &format!("breakerbox_calls_total{{{m},verdict=\"failure\"}}")
        ),
        Some(2.0)
    );
    assert_eq!(
        value(
            &text,
            &format!("breakerbox_transitions_total{{{m},from=\"closed\",to=\"open\"}}")
        ),
        Some(1.0)
    );
    assert!(
        value(
            &text,
            &format!("breakerbox_store_round_trip_seconds_count{{{m},script=\"record\"}}")
        )
        .is_some_and(|n| n >= 1.0),
        "{text}"
    );
    assert!(b.acquire().await.is_err());
    // Redis goes away: an outage episode, the fallback decides (and holds the open phase).
    server.kill();
    assert!(a.force_open().await.is_err());
    assert!(a.is_degraded());
    assert!(a.acquire().await.is_err());
    let text = wait_for_sample(port, &format!("breakerbox_store_outage{{{m}}}"), |v| {
        v == 1.0
    })
    .await;
    assert!(
        value(&text, &format!("breakerbox_fallback_calls_total{{{m}}}")).is_some_and(|n| n >= 1.0),
        "{text}"
    );
    assert!(
        value(&text, &format!("breakerbox_store_outages_total{{{m}}}")).is_some_and(|n| n >= 1.0)
    );
    // Back: the episode ends on every node that saw it.
    server.restart();
    let text = wait_for_sample(port, &format!("breakerbox_store_outage{{{m}}}"), |v| {
        v == 0.0
    })
    .await;

    assert_promtool_accepts(&text);
}
