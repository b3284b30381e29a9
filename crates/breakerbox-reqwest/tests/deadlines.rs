//! Rule 22 through the middleware: a real server on 127.0.0.1 that accepts requests and
//! never answers; the middleware cancels each call at its permit's deadline, records a
//! timeout failure, and frees a hung probe's slot at `probe_timeout`.
#![allow(clippy::unwrap_used)] // tests and their helpers unwrap
#![allow(clippy::disallowed_methods)] // the test measures real time

#[path = "support/harness.rs"]
mod harness;
#[path = "support/server.rs"]
mod server;

use std::time::{Duration, Instant};

use breakerbox::{CircuitOpen, Config, DeadlineElapsed, MonotonicClock, Phase};
use breakerbox_http::HttpJudge;
use breakerbox_reqwest::circuit_open;
use harness::{harness_with, judgement, Harness};
use server::{plain_client, Reply, Server};

const NEVER: Duration = Duration::from_secs(60);
const RECOVERY: Duration = Duration::from_millis(300);

fn config() -> Config {
    Config::builder()
        .consecutive_failures(2)
        .recovery_timeout(RECOVERY)
        .half_open_timeout(Duration::from_secs(20))
        .max_probes(1)
        .required_successes(1)
        .call_timeout(Duration::from_millis(300))
        .probe_timeout(Duration::from_millis(150))
        .build()
        .unwrap()
}

fn protected() -> Harness<MonotonicClock> {
    harness_with(
        config(),
        HttpJudge::default(),
        MonotonicClock,
        plain_client(),
    )
}

/// The deadline a failed send ran into.
fn elapsed_of(result: &Result<reqwest::Response, reqwest_middleware::Error>) -> DeadlineElapsed {
    match result {
        Err(reqwest_middleware::Error::Middleware(inner)) => {
            *inner.downcast_ref::<DeadlineElapsed>().unwrap()
        }
        other => panic!("expected a deadline, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependency_that_never_answers_trips_the_breaker_on_timeouts() {
    let server = Server::start().await;
    server.set_fallback(Reply::ok().delay(NEVER));
    let h = protected();
    for _ in 0..2 {
        let started = Instant::now();
        let result = h.client.get(server.url("/")).send().await;
        let elapsed = elapsed_of(&result);
        assert_eq!(
            (elapsed.deadline(), elapsed.is_probe()),
            (Duration::from_millis(300), false)
        );
        assert!(started.elapsed() < Duration::from_secs(3));
        assert_eq!(
            breakerbox_reqwest::transport_error(&result.unwrap_err()),
            breakerbox_http::TransportError::Timeout
        );
    }
    let breaker = h.breaker(&server.key());
    assert_eq!(breaker.phase(), Phase::Open, "two timeouts trip");
    let rejected = h.client.get(server.url("/")).send().await.unwrap_err();
    assert!(circuit_open(&rejected).is_some());
    assert_eq!(server.hits(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_probe_frees_its_slot_at_the_probe_timeout() {
    let server = Server::start().await;
    server.set_fallback(Reply::ok().delay(NEVER));
    let h = protected();
    for _ in 0..2 {
        h.client.get(server.url("/")).send().await.unwrap_err();
    }
    let breaker = h.breaker(&server.key());
    assert_eq!(breaker.phase(), Phase::Open);
    tokio::time::sleep(RECOVERY + Duration::from_millis(50)).await;

    let probing = {
        let (client, url) = (h.client.clone(), server.url("/"));
        tokio::spawn(async move {
            let started = Instant::now();
            (client.get(url).send().await, started.elapsed())
        })
    };
    let mut held = false;
    for _ in 0..50 {
        if breaker.snapshot().probes_in_flight == 1 {
            held = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(held, "the probe holds the only slot");
    let second = h.client.get(server.url("/")).send().await.unwrap_err();
    assert_eq!(
        circuit_open(&second).map(CircuitOpen::phase),
        Some(Phase::HalfOpen)
    );

    let (result, took) = probing.await.unwrap();
    let elapsed = elapsed_of(&result);
    assert_eq!(
        (elapsed.deadline(), elapsed.is_probe()),
        (Duration::from_millis(150), true)
    );
    assert!(
        took < Duration::from_secs(3),
        "freed at the probe timeout: {took:?}"
    );
    assert_eq!(
        breaker.phase(),
        Phase::Open,
        "a hung probe is a failed probe"
    );

    server.set_fallback(Reply::ok());
    tokio::time::sleep(RECOVERY + Duration::from_millis(50)).await;
    let response = h.client.get(server.url("/")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(judgement(&response).verdict, breakerbox::Verdict::Success);
    assert_eq!(breaker.phase(), Phase::Closed);
}
