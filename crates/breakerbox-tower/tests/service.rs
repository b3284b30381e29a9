//! The middleware against a scripted inner service, with tokio's clock paused and
//! readiness polled by hand.

#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too: a failure ends the test

#[path = "service/scripted.rs"]
mod scripted;

use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use breakerbox::{
    CircuitBreaker, CircuitOpen, Config, DefaultJudge, Phase, Registry, RegistryFull,
};
use breakerbox_tower::{BoxError, CircuitBreakerLayer};
use scripted::{Boom, Call, Scripted, TokioClock};
use tower::{Layer, Service, ServiceBuilder, ServiceExt};

const RECOVERY: Duration = Duration::from_secs(10);

fn breaker(failures: u32) -> CircuitBreaker<TokioClock> {
    CircuitBreaker::builder()
        .consecutive_failures(failures)
        .recovery_timeout(RECOVERY)
        .max_probes(1)
        .required_successes(2)
        .half_open_timeout(Duration::from_secs(60))
        .clock(TokioClock::new())
        .build()
        .unwrap()
}

fn poll_ready<S: Service<Call, Error = BoxError>>(service: &mut S) -> Poll<Result<(), BoxError>> {
    service.poll_ready(&mut Context::from_waker(Waker::noop()))
}

fn rejection(error: &BoxError) -> CircuitOpen {
    *error
        .downcast_ref::<CircuitOpen>()
        .unwrap_or_else(|| panic!("expected CircuitOpen, got {error}"))
}

/// Polls readiness by hand (it must be ready at once) and calls.
async fn ready_call<S>(service: &mut S, call: Call) -> Result<&'static str, BoxError>
where
    S: Service<Call, Response = &'static str, Error = BoxError>,
{
    assert!(
        matches!(poll_ready(service), Poll::Ready(Ok(()))),
        "service not ready"
    );
    service.call(call).await
}

#[tokio::test(start_paused = true)]
async fn open_breaker_is_ready_without_polling_inner_and_call_fails_fast_with_circuit_open() {
    let inner = Scripted::new();
    let breaker = breaker(1);
    let mut service = CircuitBreakerLayer::new(breaker.clone()).layer(inner.clone());

    let error = ready_call(&mut service, Call::fail("dep"))
        .await
        .unwrap_err();
    assert_eq!(
        error.downcast_ref::<Boom>(),
        Some(&Boom("dep")),
        "inner errors pass through boxed"
    );
    assert_eq!(breaker.phase(), Phase::Open);

    inner.set_ready(false); // were the inner service polled, readiness would be Pending
    let (polls, calls) = (inner.polls(), inner.calls());
    assert!(matches!(poll_ready(&mut service), Poll::Ready(Ok(()))));
    assert_eq!(
        inner.polls(),
        polls,
        "poll_ready must not poll the inner service while open"
    );

    tokio::time::advance(Duration::from_secs(3)).await;
    let open = rejection(&service.call(Call::ok("dep")).await.unwrap_err());
    assert_eq!(open.phase(), Phase::Open);
    assert_eq!(open.retry_after(), Some(RECOVERY - Duration::from_secs(3)));
    assert_eq!(
        inner.calls(),
        calls,
        "a rejected call never reaches the inner service"
    );
    assert_eq!(inner.polls(), polls);
}

#[tokio::test(start_paused = true)]
async fn closed_breaker_delegates_readiness_to_the_inner_service() {
    let inner = Scripted::new();
    let mut service = CircuitBreakerLayer::new(breaker(1)).layer(inner.clone());

    inner.set_ready(false);
    assert!(poll_ready(&mut service).is_pending());
    assert_eq!(inner.polls(), 1);
    inner.set_ready(true);
    assert!(matches!(poll_ready(&mut service), Poll::Ready(Ok(()))));
    assert_eq!(inner.polls(), 2);

    inner.fail_readiness();
    match poll_ready(&mut service) {
        Poll::Ready(Err(error)) => {
            assert_eq!(error.downcast_ref::<Boom>(), Some(&Boom("poll_ready")))
        }
        other => panic!("expected the inner readiness error, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn dropped_response_future_frees_the_half_open_probe_slot() {
    let inner = Scripted::new();
    let breaker = breaker(1);
    let mut service = CircuitBreakerLayer::new(breaker.clone()).layer(inner.clone());
    ready_call(&mut service, Call::fail("dep"))
        .await
        .unwrap_err();
    tokio::time::advance(RECOVERY).await;

    // The open phase is over: readiness polls the inner service again, the call is a probe.
    let polls = inner.polls();
    assert!(matches!(poll_ready(&mut service), Poll::Ready(Ok(()))));
    assert_eq!(inner.polls(), polls + 1);
    let probe = service.call(Call::ok("dep").after(Duration::from_secs(1)));
    assert_eq!(breaker.phase(), Phase::HalfOpen);
    assert_eq!(breaker.snapshot().probes_in_flight, 1);

    // The only slot is taken: the next call is refused without reaching the inner service.
    let open = rejection(&ready_call(&mut service, Call::ok("dep")).await.unwrap_err());
    assert_eq!(open.phase(), Phase::HalfOpen);
    assert_eq!(inner.calls(), 2);

    drop(probe);
    assert_eq!(
        breaker.snapshot().probes_in_flight,
        0,
        "dropping the future released its permit"
    );
    assert_eq!(
        ready_call(&mut service, Call::ok("dep")).await.unwrap(),
        "dep"
    );
    assert_eq!(inner.calls(), 3);
    assert_eq!(breaker.snapshot().probe_successes, 1);
}

#[tokio::test(start_paused = true)]
async fn half_open_admits_one_probe_at_a_time_and_closes_after_two_successes() {
    let inner = Scripted::new();
    let breaker = breaker(1);
    let mut service = CircuitBreakerLayer::new(breaker.clone()).layer(inner.clone());
    ready_call(&mut service, Call::fail("dep"))
        .await
        .unwrap_err();
    tokio::time::advance(RECOVERY).await;

    for round in 1..=2 {
        let probe = ready_call(
            &mut service,
            Call::ok("dep").after(Duration::from_millis(100)),
        );
        let second = async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            let mut clone = service_clone(&breaker, &inner);
            ready_call(&mut clone, Call::ok("dep")).await
        };
        let (probe, second) = tokio::join!(probe, second);
        assert_eq!(probe.unwrap(), "dep");
        assert_eq!(
            rejection(&second.unwrap_err()).phase(),
            Phase::HalfOpen,
            "round {round}"
        );
        let expected = if round == 1 {
            Phase::HalfOpen
        } else {
            Phase::Closed
        };
        assert_eq!(breaker.phase(), expected, "after {round} probe successes");
    }
    assert_eq!(
        inner.calls(),
        3,
        "one failure and two probes reached the inner service"
    );

    // Closed again: concurrent calls all go through.
    let mut a = service_clone(&breaker, &inner);
    let mut b = service_clone(&breaker, &inner);
    let (x, y) = tokio::join!(
        ready_call(&mut a, Call::ok("a").after(Duration::from_millis(50))),
        ready_call(&mut b, Call::ok("b").after(Duration::from_millis(50))),
    );
    assert_eq!((x.unwrap(), y.unwrap()), ("a", "b"));
}

fn service_clone(
    breaker: &CircuitBreaker<TokioClock>,
    inner: &Scripted,
) -> impl Service<Call, Response = &'static str, Error = BoxError> {
    CircuitBreakerLayer::new(breaker.clone()).layer(inner.clone())
}

#[tokio::test(start_paused = true)]
async fn probe_failure_reopens_and_calls_fail_fast_again() {
    let inner = Scripted::new();
    let breaker = breaker(1);
    let mut service = CircuitBreakerLayer::new(breaker.clone()).layer(inner.clone());
    ready_call(&mut service, Call::fail("dep"))
        .await
        .unwrap_err();
    tokio::time::advance(RECOVERY).await;

    let error = ready_call(&mut service, Call::fail("dep"))
        .await
        .unwrap_err();
    assert!(error.is::<Boom>());
    assert_eq!(breaker.phase(), Phase::Open);
    let calls = inner.calls();
    let open = rejection(&ready_call(&mut service, Call::ok("dep")).await.unwrap_err());
    assert!(open
        .retry_after()
        .is_some_and(|after| after > Duration::ZERO));
    assert_eq!(inner.calls(), calls);
}

#[tokio::test(start_paused = true)]
async fn call_after_the_open_phase_ended_since_readiness_is_refused_with_zero_retry_after() {
    let inner = Scripted::new();
    let breaker = breaker(1);
    let mut service = CircuitBreakerLayer::new(breaker.clone()).layer(inner.clone());
    ready_call(&mut service, Call::fail("dep"))
        .await
        .unwrap_err();

    let polls = inner.polls();
    assert!(matches!(poll_ready(&mut service), Poll::Ready(Ok(())))); // ready because open
    tokio::time::advance(RECOVERY).await;
    let open = rejection(&service.call(Call::ok("dep")).await.unwrap_err());
    assert_eq!(open.retry_after(), Some(Duration::ZERO));
    assert_eq!(
        (inner.polls(), inner.calls()),
        (polls, 1),
        "inner never polled ready, never called"
    );
    assert_eq!(
        breaker.snapshot().probes_in_flight,
        0,
        "the probe slot was given back"
    );

    assert_eq!(
        ready_call(&mut service, Call::ok("dep")).await.unwrap(),
        "dep"
    );
    assert_eq!(inner.polls(), polls + 1);
    assert_eq!(breaker.snapshot().probe_successes, 1);
}

#[tokio::test(start_paused = true)]
async fn slow_success_counts_as_failure_with_latency_from_the_breaker_clock() {
    let inner = Scripted::new();
    let breaker = breaker(1);
    let judge = DefaultJudge.slower_than(Duration::from_millis(500));
    let mut service = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::new(breaker.clone()).judge(judge))
        .service(inner.clone());

    let fast = ready_call(
        &mut service,
        Call::ok("dep").after(Duration::from_millis(400)),
    )
    .await;
    assert_eq!(fast.unwrap(), "dep");
    assert_eq!(breaker.phase(), Phase::Closed);
    let slow = ready_call(&mut service, Call::ok("dep").after(Duration::from_secs(2))).await;
    assert_eq!(
        slow.unwrap(),
        "dep",
        "the caller still gets the slow response"
    );
    assert_eq!(breaker.phase(), Phase::Open);
}

#[tokio::test(start_paused = true)]
async fn keyed_layer_trips_only_the_failing_key_and_always_polls_inner_readiness() {
    let inner = Scripted::new();
    let template = Config::builder()
        .consecutive_failures(2)
        .recovery_timeout(RECOVERY)
        .build()
        .unwrap();
    let registry = Arc::new(Registry::with_clock(template, 16, TokioClock::new()).unwrap());
    let mut service =
        CircuitBreakerLayer::keyed(registry.clone(), |call: &Call| call.key.to_string())
            .layer(inner.clone());

    for _ in 0..2 {
        assert!(ready_call(&mut service, Call::fail("payments"))
            .await
            .unwrap_err()
            .is::<Boom>());
    }
    assert_eq!(
        registry.get(&"payments".to_string()).unwrap().phase(),
        Phase::Open
    );

    let (polls, calls) = (inner.polls(), inner.calls());
    let open = rejection(
        &ready_call(&mut service, Call::ok("payments"))
            .await
            .unwrap_err(),
    );
    assert_eq!(open.retry_after(), Some(RECOVERY));
    assert_eq!(
        inner.polls(),
        polls + 1,
        "the key is unknown until the call: readiness is the inner's"
    );
    assert_eq!(inner.calls(), calls);

    assert_eq!(
        ready_call(&mut service, Call::ok("search")).await.unwrap(),
        "search"
    );
    assert_eq!(inner.calls(), calls + 1);
    assert_eq!(registry.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn full_registry_refuses_a_new_key_with_registry_full_without_calling_inner() {
    let inner = Scripted::new();
    let template = Config::builder().consecutive_failures(1).build().unwrap();
    let registry = Arc::new(Registry::with_clock(template, 1, TokioClock::new()).unwrap());
    let mut service =
        CircuitBreakerLayer::keyed(registry, |call: &Call| call.key).layer(inner.clone());

    ready_call(&mut service, Call::fail("payments"))
        .await
        .unwrap_err(); // open: not evictable
    let error = ready_call(&mut service, Call::ok("search"))
        .await
        .unwrap_err();
    assert_eq!(
        error.downcast_ref::<RegistryFull>(),
        Some(&RegistryFull { capacity: 1 })
    );
    assert_eq!(inner.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn service_builder_stack_with_oneshot_rejects_while_open() {
    let inner = Scripted::new();
    let breaker = breaker(1);
    let service = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::new(breaker.clone()))
        .service(inner.clone());
    service
        .clone()
        .oneshot(Call::fail("dep"))
        .await
        .unwrap_err();
    inner.set_ready(false);
    // `oneshot` waits for readiness: while open it must not hang on the inner service.
    let error = tokio::time::timeout(Duration::from_secs(1), service.oneshot(Call::ok("dep")))
        .await
        .expect("an open breaker answers at once")
        .unwrap_err();
    assert_eq!(rejection(&error).phase(), Phase::Open);
}

#[tokio::test(start_paused = true)]
async fn a_program_long_breaker_guards_the_layer_with_borrowed_permits() {
    // A `&'static CircuitBreaker` is an engine of its own: permits borrow it, and the
    // layer behaves exactly as with a shared handle.
    let breaker: &'static CircuitBreaker<TokioClock> = Box::leak(Box::new(breaker(2)));
    let inner = Scripted::new();
    let mut service = CircuitBreakerLayer::new(breaker).layer(inner.clone());

    assert!(ready_call(&mut service, Call::ok("a")).await.is_ok());
    assert!(ready_call(&mut service, Call::fail("b")).await.is_err());
    assert_eq!(breaker.phase(), Phase::Closed);
    assert!(ready_call(&mut service, Call::fail("c")).await.is_err());
    assert_eq!(
        breaker.phase(),
        Phase::Open,
        "two failures in a row trip it"
    );

    let calls = inner.calls();
    let error = ready_call(&mut service, Call::ok("d")).await.unwrap_err();
    assert_eq!(rejection(&error).phase(), Phase::Open);
    assert_eq!(
        inner.calls(),
        calls,
        "an open breaker does not touch the inner service"
    );

    // A response future dropped before it completes releases its probe slot.
    tokio::time::advance(RECOVERY).await;
    let probe = {
        assert!(matches!(poll_ready(&mut service), Poll::Ready(Ok(()))));
        service.call(Call::ok("e").after(Duration::from_secs(1)))
    };
    drop(probe);
    assert!(ready_call(&mut service, Call::ok("f")).await.is_ok());
    assert_eq!(breaker.snapshot().phase, Phase::HalfOpen);
}

#[tokio::test(start_paused = true)]
async fn in_shadow_mode_an_open_breaker_lets_calls_reach_the_inner_service_and_counts_them() {
    let inner = Scripted::new();
    let breaker = breaker(1);
    breaker.set_shadow(true);
    let mut service = CircuitBreakerLayer::new(breaker.clone()).layer(inner.clone());
    ready_call(&mut service, Call::fail("dep"))
        .await
        .unwrap_err();
    assert_eq!(breaker.phase(), Phase::Open, "the breaker trips as usual");
    for _ in 0..3 {
        let calls = inner.calls();
        assert_eq!(
            ready_call(&mut service, Call::ok("dep")).await.unwrap(),
            "dep"
        );
        assert_eq!(
            inner.calls(),
            calls + 1,
            "the call reached the inner service"
        );
    }
    let snapshot = breaker.snapshot();
    assert_eq!(
        (snapshot.phase, snapshot.shadow_rejections),
        (Phase::Open, 3)
    );
    breaker.set_shadow(false);
    let open = rejection(&ready_call(&mut service, Call::ok("dep")).await.unwrap_err());
    assert_eq!(open.phase(), Phase::Open);
}
