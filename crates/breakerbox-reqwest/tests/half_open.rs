//! The seeds' half-open scenarios, against a real server on 127.0.0.1.
#![allow(clippy::unwrap_used)] // tests and their helpers unwrap

#[path = "support/harness.rs"]
mod harness;
#[path = "support/server.rs"]
mod server;

use std::time::Duration;

use breakerbox::config::Ramp;
use breakerbox::{Config, ManualClock, MonotonicClock, Phase, RejectReason, Verdict};
use breakerbox_http::HttpJudge;
use breakerbox_reqwest::circuit_open;
use harness::{harness_with, judgement, manual, Harness};
use server::{client_builder, plain_client, Reply, Server};

const RECOVERY: Duration = Duration::from_secs(10);

/// The seeds' breaker: trips on one failure, one probe at a time, two probe successes
/// to close.
fn seed_config() -> Config {
    Config::builder()
        .consecutive_failures(1)
        .recovery_timeout(RECOVERY)
        .max_probes(1)
        .required_successes(2)
        .half_open_timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// Trips the breaker with one 503 and moves the clock past the recovery timeout.
async fn trip_and_wait(h: &Harness<ManualClock>, clock: &ManualClock, server: &Server) {
    server.push(Reply::status(503));
    h.client.get(server.url("/")).send().await.unwrap();
    assert_eq!(h.breaker(&server.key()).phase(), Phase::Open);
    clock.advance(RECOVERY);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_one_concurrent_probe_reaches_the_server_and_two_successes_close() {
    let server = Server::start().await;
    let (h, clock) = manual(seed_config(), HttpJudge::default());
    trip_and_wait(&h, &clock, &server).await;
    assert_eq!(server.hits(), 1);

    server.set_fallback(Reply::ok().delay(Duration::from_millis(800)));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let client = h.client.clone();
        let url = server.url("/");
        tasks.push(tokio::spawn(async move { client.get(url).send().await }));
    }
    let mut admitted = 0;
    let mut rejected = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(response) => {
                assert_eq!(judgement(&response).verdict, Verdict::Success);
                admitted += 1;
            }
            Err(error) => {
                let open = circuit_open(&error).expect("rejections only");
                assert_eq!(open.phase(), Phase::HalfOpen);
                rejected += 1;
            }
        }
    }
    assert_eq!((admitted, rejected), (1, 7));
    assert_eq!(server.hits(), 2, "only the probe reached the server");
    assert_eq!(
        h.breaker(&server.key()).phase(),
        Phase::HalfOpen,
        "one success of two"
    );

    server.set_fallback(Reply::ok());
    h.client.get(server.url("/")).send().await.unwrap();
    assert_eq!(h.breaker(&server.key()).phase(), Phase::Closed);
    assert_eq!(server.hits(), 3);
}

#[tokio::test]
async fn a_200_over_the_probe_latency_threshold_fails_the_probe() {
    let server = Server::start().await;
    let config = Config::builder()
        .consecutive_failures(1)
        .recovery_timeout(Duration::from_millis(50))
        .max_probes(1)
        .required_successes(2)
        .build()
        .unwrap();
    let judge = HttpJudge::builder()
        .slow_threshold(Duration::from_secs(5))
        .probe_slow_threshold(Duration::from_millis(60))
        .build()
        .unwrap();
    // Real latency needs a real clock.
    let h = harness_with(config, judge, MonotonicClock, plain_client());
    let breaker = h.breaker(&server.key());

    // In closed, 150 ms is fine.
    server.push(Reply::ok().delay(Duration::from_millis(150)));
    let response = h.client.get(server.url("/")).send().await.unwrap();
    assert_eq!(judgement(&response).verdict, Verdict::Success);

    server.push(Reply::status(500));
    h.client.get(server.url("/")).send().await.unwrap();
    assert_eq!(breaker.phase(), Phase::Open);
    tokio::time::sleep(Duration::from_millis(80)).await;

    // As a probe, the same 150 ms 200 is a failure: back to open.
    server.push(Reply::ok().delay(Duration::from_millis(150)));
    let response = h.client.get(server.url("/")).send().await.unwrap();
    let j = judgement(&response);
    assert_eq!(j.verdict, Verdict::Failure);
    assert!(j.reason.ends_with(" > 60ms"), "{}", j.reason);
    assert_eq!(breaker.phase(), Phase::Open);
    assert_eq!(server.hits(), 3);
}

#[tokio::test]
async fn business_code_e001_in_a_200_fails_the_probe() {
    let server = Server::start().await;
    let judge = HttpJudge::builder()
        .business_pointer("/error_code")
        .business_failure_codes(["E001", "E002", "E003"])
        .build()
        .unwrap();
    let (h, clock) = manual(seed_config(), judge);
    trip_and_wait(&h, &clock, &server).await;
    server.push(Reply::json(200, r#"{"error_code":"E001"}"#));
    let response = h.client.get(server.url("/")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(judgement(&response).reason, "business code E001");
    assert_eq!(response.text().await.unwrap(), r#"{"error_code":"E001"}"#);
    let breaker = h.breaker(&server.key());
    assert_eq!(breaker.phase(), Phase::Open);
    // And a clean 200 afterwards is a successful probe.
    clock.advance(RECOVERY);
    server.push(Reply::json(200, r#"{"error_code":null,"data":1}"#));
    h.client.get(server.url("/")).send().await.unwrap();
    assert_eq!(breaker.phase(), Phase::HalfOpen);
}

#[tokio::test]
async fn a_4xx_configured_as_failure_fails_the_probe() {
    let server = Server::start().await;
    let judge = HttpJudge::builder()
        .client_errors(Verdict::Failure)
        .build()
        .unwrap();
    let (h, clock) = manual(seed_config(), judge);
    trip_and_wait(&h, &clock, &server).await;
    server.push(Reply::status(403));
    h.client.get(server.url("/")).send().await.unwrap();
    assert_eq!(h.breaker(&server.key()).phase(), Phase::Open);
}

#[tokio::test]
async fn an_ignored_4xx_probe_only_frees_its_slot() {
    let server = Server::start().await;
    let (h, clock) = manual(seed_config(), HttpJudge::default());
    trip_and_wait(&h, &clock, &server).await;
    server.push(Reply::status(404));
    h.client.get(server.url("/")).send().await.unwrap();
    let breaker = h.breaker(&server.key());
    assert_eq!(breaker.phase(), Phase::HalfOpen);
    // The slot is free again: the next request is admitted as a probe.
    h.client.get(server.url("/")).send().await.unwrap();
    h.client.get(server.url("/")).send().await.unwrap();
    assert_eq!(breaker.phase(), Phase::Closed);
    assert_eq!(server.hits(), 4);
}

#[tokio::test]
async fn a_timeout_fails_the_probe() {
    let server = Server::start().await;
    let client = client_builder()
        .timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let clock = ManualClock::new();
    let h = harness_with(seed_config(), HttpJudge::default(), clock.clone(), client);
    trip_and_wait(&h, &clock, &server).await;
    server.push(Reply::ok().delay(Duration::from_secs(2)));
    let error = h.client.get(server.url("/")).send().await.unwrap_err();
    assert!(circuit_open(&error).is_none());
    assert_eq!(h.breaker(&server.key()).phase(), Phase::Open);
    assert_eq!(server.hits(), 2);
}

#[tokio::test]
async fn a_dropped_probe_frees_its_slot() {
    let server = Server::start().await;
    let (h, clock) = manual(seed_config(), HttpJudge::default());
    trip_and_wait(&h, &clock, &server).await;
    server.push(Reply::ok().delay(Duration::from_secs(2)));
    let dropped = tokio::time::timeout(
        Duration::from_millis(100),
        h.client.get(server.url("/")).send(),
    )
    .await;
    assert!(dropped.is_err(), "the caller gave up");
    let breaker = h.breaker(&server.key());
    assert_eq!(breaker.phase(), Phase::HalfOpen);
    // Without the release, the only slot would be held until the half-open deadline.
    let response = h.client.get(server.url("/")).send().await.unwrap();
    assert_eq!(judgement(&response).verdict, Verdict::Success);
    h.client.get(server.url("/")).send().await.unwrap();
    assert_eq!(breaker.phase(), Phase::Closed);
}

#[tokio::test]
async fn while_open_the_server_receives_zero_requests() {
    let server = Server::start().await;
    let (h, clock) = manual(seed_config(), HttpJudge::default());
    server.push(Reply::status(500));
    h.client.get(server.url("/")).send().await.unwrap();
    let before = server.hits();
    for step in 0..20 {
        clock.advance(Duration::from_millis(400));
        let error = h.client.get(server.url("/")).send().await.unwrap_err();
        let open = circuit_open(&error).unwrap();
        let left = RECOVERY - Duration::from_millis(400 * (step + 1));
        assert_eq!(open.retry_after(), Some(left));
    }
    assert_eq!(server.hits(), before);
}

#[tokio::test]
async fn in_shadow_mode_the_breaker_trips_but_every_request_reaches_the_server() {
    let server = Server::start().await;
    let mut config = seed_config();
    config.shadow = true;
    let (h, _clock) = manual(config, HttpJudge::default());
    server.set_fallback(Reply::status(503));
    for _ in 0..4 {
        let response = h.client.get(server.url("/")).send().await.unwrap();
        assert_eq!(response.status(), 503);
    }
    assert_eq!(server.hits(), 4, "nothing was rejected");
    let snapshot = h.breaker(&server.key()).snapshot();
    assert_eq!(
        (snapshot.phase, snapshot.trips, snapshot.shadow_rejections),
        (Phase::Open, 1, 3),
        "the first 503 tripped; the three after it would have been rejected"
    );
}

/// Sends `n` requests one after another; returns how many the breaker rejected as a
/// ramp rejection (every other request must reach the server and succeed).
async fn ramp_rejections(h: &Harness<ManualClock>, server: &Server, n: usize) -> usize {
    let mut rejected = 0;
    for _ in 0..n {
        match h.client.get(server.url("/")).send().await {
            Ok(response) => assert_eq!(response.status(), 200),
            Err(error) => {
                let open = circuit_open(&error).expect("a rejection");
                assert_eq!(open.reason(), RejectReason::Ramp);
                rejected += 1;
            }
        }
    }
    rejected
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_recovery_a_growing_share_of_requests_reaches_the_server() {
    let server = Server::start().await;
    let mut config = seed_config();
    config.ramp = Some(Ramp::new(0.1, Duration::from_secs(10)).unwrap());
    let (h, clock) = manual(config, HttpJudge::default());
    trip_and_wait(&h, &clock, &server).await;
    server.set_fallback(Reply::ok());
    for _ in 0..2 {
        h.client.get(server.url("/")).send().await.unwrap();
    }
    assert_eq!(h.breaker(&server.key()).phase(), Phase::Closed);
    let mut reached = Vec::new();
    for _ in 0..3 {
        let before = server.hits();
        let rejected = ramp_rejections(&h, &server, 100).await;
        assert_eq!(server.hits() - before, 100 - rejected);
        reached.push(100 - rejected);
        clock.advance(Duration::from_secs(5));
    }
    // 10% right after the close, 55% half-way, all of them once the ramp is over.
    assert_eq!(reached, [11, 55, 100]);
}
