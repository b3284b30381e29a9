//! Rule 22 through the layer (feature `tokio`): a hyper client calls a real upstream on
//! 127.0.0.1 that accepts requests and never answers; the layer cancels each call at its
//! permit's deadline, records a timeout failure, and frees a hung probe's slot at
//! `probe_timeout`.

#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too: a failure ends the test
#![allow(clippy::disallowed_methods)] // the test measures real time

#[path = "http/upstream.rs"]
#[allow(dead_code)]
mod upstream;

use std::time::{Duration, Instant};

use breakerbox::{CircuitBreaker, CircuitOpen, DeadlineElapsed, Phase};
use breakerbox_http::HttpJudge;
use breakerbox_tower::CircuitBreakerLayer;
use tower::{ServiceBuilder, ServiceExt};
use upstream::{client, get_request, spawn_upstream};

const NEVER: Duration = Duration::from_secs(60);
const RECOVERY: Duration = Duration::from_millis(300);

fn breaker() -> CircuitBreaker {
    CircuitBreaker::builder()
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

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One GET through the layer: the status, or the error; and how long it took.
async fn call(
    breaker: &CircuitBreaker,
    addr: std::net::SocketAddr,
) -> (Result<u16, BoxError>, Duration) {
    let service = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::new(breaker.clone()).http(HttpJudge::default()))
        .service(client());
    let started = Instant::now();
    let result = service.oneshot(get_request(addr)).await;
    (result.map(|r| r.status().as_u16()), started.elapsed())
}

fn elapsed_of(result: &Result<u16, BoxError>) -> DeadlineElapsed {
    match result {
        Err(error) => *error.downcast_ref::<DeadlineElapsed>().unwrap_or_else(|| {
            panic!("expected a deadline, got {error}");
        }),
        Ok(status) => panic!("expected a deadline, got {status}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependency_that_never_answers_trips_the_breaker_on_timeouts() {
    let (addr, script) = spawn_upstream().await;
    script.set_delay(NEVER);
    let breaker = breaker();
    for _ in 0..2 {
        let (result, took) = call(&breaker, addr).await;
        let elapsed = elapsed_of(&result);
        assert_eq!(
            (elapsed.deadline(), elapsed.is_probe()),
            (Duration::from_millis(300), false)
        );
        assert!(
            took < Duration::from_secs(3),
            "cancelled at the deadline: {took:?}"
        );
    }
    assert_eq!(breaker.phase(), Phase::Open, "two timeouts trip");
    let (result, _) = call(&breaker, addr).await;
    assert!(result.unwrap_err().downcast_ref::<CircuitOpen>().is_some());
    assert_eq!(script.requests(), 2, "the open breaker sent nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_probe_frees_its_slot_at_the_probe_timeout() {
    let (addr, script) = spawn_upstream().await;
    script.set_delay(NEVER);
    let breaker = breaker();
    call(&breaker, addr).await.0.unwrap_err();
    call(&breaker, addr).await.0.unwrap_err();
    assert_eq!(breaker.phase(), Phase::Open);
    tokio::time::sleep(RECOVERY + Duration::from_millis(50)).await;

    let probing = {
        let breaker = breaker.clone();
        tokio::spawn(async move { call(&breaker, addr).await })
    };
    // While the probe hangs, its slot is taken.
    let mut held = false;
    for _ in 0..50 {
        if breaker.snapshot().probes_in_flight == 1 {
            held = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(held, "the probe holds the only slot");
    let (second, _) = call(&breaker, addr).await;
    assert_eq!(
        second
            .unwrap_err()
            .downcast_ref::<CircuitOpen>()
            .map(CircuitOpen::phase),
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

    // The dependency is back: the next probe is admitted and closes the breaker, long
    // before the half-open deadline would have reclaimed a slot.
    script.set_delay(Duration::ZERO);
    tokio::time::sleep(RECOVERY + Duration::from_millis(50)).await;
    let (result, _) = call(&breaker, addr).await;
    assert_eq!(result.unwrap(), 200);
    assert_eq!(breaker.phase(), Phase::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_generic_form_cancels_at_the_deadline_too() {
    let breaker = breaker();
    let service = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::new(breaker.clone()))
        .service(tower::service_fn(|()| async {
            tokio::time::sleep(NEVER).await;
            Ok::<_, std::io::Error>(())
        }));
    for _ in 0..2 {
        let error = service.clone().oneshot(()).await.unwrap_err();
        assert!(error.downcast_ref::<DeadlineElapsed>().is_some(), "{error}");
    }
    assert_eq!(breaker.phase(), Phase::Open);
}
