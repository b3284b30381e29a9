//! The Redis engine through the core's contract: a record that is not awaited still takes
//! effect, and the engine works behind `DynBreaker` as the CLI uses it.

#![allow(clippy::unwrap_used)] // tests unwrap
// Tests measure real elapsed time against real servers.
#![allow(clippy::disallowed_methods)]

#[path = "support/redis_server.rs"]
mod redis_server;

use std::time::{Duration, Instant};

use breakerbox::contract::{Breaker, BreakerPermit, DynBreaker, LocalAdmission};
use breakerbox::{Config, Phase};
use breakerbox_redis::{Mode, RedisBreaker};
use redis_server::RedisServer;

async fn strict(server: &RedisServer, name: &str) -> RedisBreaker {
    let config = Config::builder()
        .consecutive_failures(1)
        .recovery_timeout(Duration::from_millis(100))
        .required_successes(1)
        .build()
        .unwrap();
    RedisBreaker::builder(server.url(), name)
        .config(config)
        .mode(Mode::Strict)
        .timeout(Duration::from_millis(500))
        .build()
        .await
        .unwrap()
}

async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_outcome_recorded_without_awaiting_still_reaches_redis() {
    let server = RedisServer::start();
    let breaker = strict(&server, "unawaited").await;
    Breaker::acquire(&breaker).await.unwrap().failure().await;
    assert_eq!(breaker.snapshot().await.unwrap().phase, Phase::Open);
    tokio::time::sleep(Duration::from_millis(150)).await;
    // Half-open: only Redis can admit a probe.
    assert!(matches!(
        Breaker::try_acquire_local(&breaker),
        LocalAdmission::Remote
    ));
    let probe = breaker.acquire_now_or_later().await.unwrap();
    assert!(probe.is_probe());
    // Dropped at once: the script call runs from a task.
    drop(BreakerPermit::success(probe));
    let mut phase = Phase::HalfOpen;
    let deadline = Instant::now() + Duration::from_secs(5);
    while phase != Phase::Closed {
        assert!(
            Instant::now() < deadline,
            "the probe's success never arrived"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
        phase = breaker.snapshot().await.unwrap().phase;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_breaker_behind_dyn_breaker_shares_its_trip() {
    let server = RedisServer::start();
    let a = DynBreaker::new(strict(&server, "dyn").await);
    let b = DynBreaker::new(strict(&server, "dyn").await);
    let permit = a.acquire_now_or_later().await.unwrap();
    permit.failure().await;
    let refused = b.acquire_now_or_later().await.unwrap_err();
    assert_eq!(refused.phase(), Phase::Open);
    let snapshot = b.snapshot().await.unwrap();
    assert_eq!((snapshot.phase, snapshot.trips), (Phase::Open, 1));
    b.reset().await.unwrap();
    eventually("a to see the reset", || a.phase() == Phase::Closed).await;
    assert!(a.acquire_now_or_later().await.is_ok());
}

/// A permit recorded where it lies (what the tower layer does) sends its outcome once, in
/// both modes and behind `DynBreaker`: a second record and its drop send nothing (two
/// failures would trip these breakers).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_recorded_in_place_counts_once() {
    let server = RedisServer::start();
    let config = Config::builder()
        .consecutive_failures(2)
        .recovery_timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    for (name, mode) in [
        ("in-place-view", Mode::default()),
        ("in-place-strict", Mode::Strict),
    ] {
        let breaker = RedisBreaker::builder(server.url(), name)
            .config(config.clone())
            .mode(mode)
            .timeout(Duration::from_millis(500))
            .build()
            .await
            .unwrap();
        let mut permit = Breaker::acquire(&breaker).await.unwrap();
        permit
            .record_in_place(breakerbox::Verdict::Failure, None, None)
            .await;
        permit
            .record_in_place(breakerbox::Verdict::Failure, Some(Duration::ZERO), None)
            .await;
        drop(permit);
        breaker.flush().await;
        let snapshot = breaker.snapshot().await.unwrap();
        assert_eq!(
            (snapshot.phase, snapshot.consecutive_failures),
            (Phase::Closed, 1),
            "{mode:?}"
        );
        // Behind DynBreaker: its second failure is the second one, and trips.
        let dynamic = DynBreaker::new(breaker.clone());
        let mut permit = dynamic.acquire_now_or_later().await.unwrap();
        permit
            .record_in_place(breakerbox::Verdict::Failure, None, None)
            .await;
        permit
            .record_in_place(breakerbox::Verdict::Failure, None, None)
            .await;
        drop(permit);
        breaker.flush().await;
        assert_eq!(
            breaker.snapshot().await.unwrap().phase,
            Phase::Open,
            "{mode:?}"
        );
    }
}
