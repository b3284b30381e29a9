//! The HTTP form against real servers on 127.0.0.1: an axum service protecting its calls
//! to a flaky upstream, and the body, latency and transport rules of the HTTP judge.

#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too: a failure ends the test

#[path = "http/upstream.rs"]
mod upstream;

use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use breakerbox::{CircuitBreaker, CircuitOpen, Phase};
use breakerbox_http::HttpJudge;
use breakerbox_tower::judging::Http;
use breakerbox_tower::select::Single;
use breakerbox_tower::{CircuitBreakerLayer, CircuitBreakerService};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use tower::{Service, ServiceBuilder, ServiceExt};
use upstream::{client, get_request, serve, spawn_upstream};

type Guarded =
    CircuitBreakerService<Client<HttpConnector, Full<Bytes>>, Single<CircuitBreaker>, Http>;

fn guarded(breaker: &CircuitBreaker, judge: HttpJudge) -> Guarded {
    ServiceBuilder::new()
        .layer(CircuitBreakerLayer::new(breaker.clone()).http(judge))
        .service(client())
}

#[derive(Clone)]
struct Front {
    upstream: SocketAddr,
    client: Guarded,
}

/// The axum handler under test: calls the upstream through the breaker, hands its
/// response on, and answers 503 itself while the breaker is open.
async fn front(State(front): State<Front>) -> Response {
    let result = front.client.oneshot(get_request(front.upstream)).await;
    match result {
        Ok(response) => response.map(Body::new),
        Err(error) => match error.downcast_ref::<CircuitOpen>() {
            Some(open) => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("circuit open: {open}"),
            )
                .into_response(),
            None => (StatusCode::BAD_GATEWAY, error.to_string()).into_response(),
        },
    }
}

async fn fetch(client: &Client<HttpConnector, Full<Bytes>>, addr: SocketAddr) -> (u16, String) {
    let response = client.request(get_request(addr)).await.unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

#[tokio::test]
async fn axum_service_stops_calling_a_failing_upstream_and_recovers_after_two_probes() {
    let (upstream_addr, script) = spawn_upstream().await;
    let breaker = CircuitBreaker::builder()
        .name("upstream")
        .consecutive_failures(3)
        .recovery_timeout(Duration::from_secs(1))
        .max_probes(1)
        .required_successes(2)
        .build()
        .unwrap();
    let state = Front {
        upstream: upstream_addr,
        client: guarded(&breaker, HttpJudge::default()),
    };
    let front_addr = serve(Router::new().route("/", get(front)).with_state(state)).await;
    let user = client();

    for _ in 0..3 {
        assert_eq!(fetch(&user, front_addr).await, (200, "ok".to_owned()));
    }
    script.set_status(500);
    script.set_body("upstream broke");
    for _ in 0..3 {
        assert_eq!(
            fetch(&user, front_addr).await,
            (500, "upstream broke".to_owned())
        );
    }
    assert_eq!(breaker.phase(), Phase::Open);
    assert_eq!(script.requests(), 6);

    for _ in 0..5 {
        let (status, body) = fetch(&user, front_addr).await;
        assert_eq!(status, 503);
        assert!(body.starts_with("circuit open"), "{body}");
    }
    assert_eq!(
        script.requests(),
        6,
        "no request reaches the upstream while open"
    );

    script.set_status(200);
    script.set_body("ok");
    tokio::time::sleep(Duration::from_millis(1050)).await;
    assert_eq!(fetch(&user, front_addr).await, (200, "ok".to_owned()));
    assert_eq!(
        breaker.phase(),
        Phase::HalfOpen,
        "one probe success is not enough"
    );
    assert_eq!(fetch(&user, front_addr).await, (200, "ok".to_owned()));
    assert_eq!(breaker.phase(), Phase::Closed, "two probe successes close");
    assert_eq!(
        script.requests(),
        8,
        "exactly the two probes reached the upstream"
    );
}

fn business_judge(cap: usize) -> HttpJudge {
    HttpJudge::builder()
        .business_pointer("/error_code")
        .business_failure_codes(["E001", "E002"])
        .body_cap(cap)
        .build()
        .unwrap()
}

fn one_failure_trips() -> CircuitBreaker {
    CircuitBreaker::builder()
        .consecutive_failures(1)
        .build()
        .unwrap()
}

async fn body_of(
    response: http::Response<
        impl http_body::Body<Data = Bytes, Error = breakerbox_tower::BoxError>,
    >,
) -> String {
    String::from_utf8(
        response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
    .unwrap()
}

#[tokio::test]
async fn business_code_in_a_200_fails_the_call_and_the_body_is_handed_on_unchanged() {
    let (addr, script) = spawn_upstream().await;
    let breaker = one_failure_trips();
    let mut service = guarded(&breaker, business_judge(64 * 1024));

    script.set_body(r#"{"error_code":"OK","data":"fine"}"#);
    let response = service
        .ready()
        .await
        .unwrap()
        .call(get_request(addr))
        .await
        .unwrap();
    assert_eq!(
        body_of(response).await,
        r#"{"error_code":"OK","data":"fine"}"#
    );
    assert_eq!(breaker.phase(), Phase::Closed);

    let streamed = [
        r#"{"error_"#,
        r#"code":"E0"#,
        r#"01","data":"#,
        r#""broken"}"#,
    ];
    script.set_chunks(&streamed, Duration::from_millis(5));
    let response = service
        .ready()
        .await
        .unwrap()
        .call(get_request(addr))
        .await
        .unwrap();
    assert_eq!(
        breaker.phase(),
        Phase::Open,
        "judged when the body was complete, before the caller read it"
    );
    assert_eq!(response.status(), 200);
    assert_eq!(body_of(response).await, streamed.concat());
}

#[tokio::test]
async fn body_over_the_cap_is_passed_through_whole_and_judged_by_status_alone() {
    let (addr, script) = spawn_upstream().await;
    let breaker = one_failure_trips();
    let mut service = guarded(&breaker, business_judge(16));

    // Known length over the cap: not read at all.
    let big = format!(r#"{{"error_code":"E001","padding":"{}"}}"#, "x".repeat(100));
    script.set_body(&big);
    let response = service
        .ready()
        .await
        .unwrap()
        .call(get_request(addr))
        .await
        .unwrap();
    assert_eq!(body_of(response).await, big);
    assert_eq!(
        breaker.phase(),
        Phase::Closed,
        "a 200 judged without its body succeeds"
    );

    // Streamed, no length: read until over the cap, then replayed followed by the rest.
    let chunks = [
        r#"{"error_code":"#,
        r#""E001","#,
        r#""padding":"#,
        r#""xxxxxxxxxxxxxxxxxxxx"}"#,
    ];
    script.set_chunks(&chunks, Duration::from_millis(5));
    let response = service
        .ready()
        .await
        .unwrap()
        .call(get_request(addr))
        .await
        .unwrap();
    assert_eq!(body_of(response).await, chunks.concat());
    assert_eq!(breaker.phase(), Phase::Closed);
}

#[tokio::test]
async fn without_body_rules_the_response_is_judged_at_its_head() {
    let (addr, script) = spawn_upstream().await;
    let breaker = one_failure_trips();
    let mut service = guarded(&breaker, HttpJudge::default());

    script.set_status(503);
    script.set_chunks(&["first ", "second"], Duration::from_secs(1));
    let started = tokio::time::Instant::now();
    let response = service
        .ready()
        .await
        .unwrap()
        .call(get_request(addr))
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(700),
        "the body was not awaited"
    );
    assert_eq!(
        breaker.phase(),
        Phase::Open,
        "judged on the status as soon as the head arrived"
    );
    assert_eq!(body_of(response).await, "first second");
}

#[tokio::test]
async fn slow_probe_fails_against_the_stricter_probe_threshold() {
    let (addr, script) = spawn_upstream().await;
    let breaker = CircuitBreaker::builder()
        .consecutive_failures(1)
        .recovery_timeout(Duration::from_millis(100))
        .max_probes(1)
        .required_successes(1)
        .build()
        .unwrap();
    let judge = HttpJudge::builder()
        .slow_threshold(Duration::from_secs(5))
        .probe_slow_threshold(Duration::from_millis(150))
        .build()
        .unwrap();
    let mut service = guarded(&breaker, judge);

    script.set_delay(Duration::from_millis(400));
    let response = service
        .ready()
        .await
        .unwrap()
        .call(get_request(addr))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        breaker.phase(),
        Phase::Closed,
        "400 ms is fast enough for a normal call"
    );

    breaker.force_open_for(Duration::from_millis(100));
    tokio::time::sleep(Duration::from_millis(150)).await;
    let response = service
        .ready()
        .await
        .unwrap()
        .call(get_request(addr))
        .await
        .unwrap();
    assert_eq!(
        response.status(),
        200,
        "the caller still gets the slow response"
    );
    assert_eq!(
        breaker.phase(),
        Phase::Open,
        "but a 400 ms probe fails: re-opened"
    );

    script.set_delay(Duration::ZERO);
    tokio::time::sleep(Duration::from_millis(150)).await;
    service
        .ready()
        .await
        .unwrap()
        .call(get_request(addr))
        .await
        .unwrap();
    assert_eq!(breaker.phase(), Phase::Closed, "a fast probe closes");
}

#[tokio::test]
async fn connection_refused_is_a_failure_and_the_error_passes_through() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener); // nothing listens there now
    let breaker = one_failure_trips();
    let mut service = guarded(&breaker, HttpJudge::default());

    let error = service
        .ready()
        .await
        .unwrap()
        .call(get_request(addr))
        .await
        .unwrap_err();
    assert!(
        error.downcast_ref::<CircuitOpen>().is_none(),
        "the client's own error: {error}"
    );
    assert_eq!(breaker.phase(), Phase::Open);
    let error = service
        .ready()
        .await
        .unwrap()
        .call(get_request(addr))
        .await
        .unwrap_err();
    assert!(error.downcast_ref::<CircuitOpen>().is_some());
}

#[tokio::test]
async fn dropping_the_future_while_the_body_is_read_frees_the_probe_slot() {
    let (addr, script) = spawn_upstream().await;
    let breaker = CircuitBreaker::builder()
        .consecutive_failures(1)
        .max_probes(1)
        .required_successes(1)
        .build()
        .unwrap();
    let mut service = guarded(&breaker, business_judge(64 * 1024));
    breaker.force_open_for(Duration::from_millis(50));
    tokio::time::sleep(Duration::from_millis(60)).await;

    script.set_chunks(&[r#"{"error_code":"#, r#""OK"}"#], Duration::from_secs(2));
    let call = service.ready().await.unwrap().call(get_request(addr));
    assert_eq!(breaker.phase(), Phase::HalfOpen);
    assert_eq!(breaker.snapshot().probes_in_flight, 1);
    let gave_up = tokio::time::timeout(Duration::from_millis(300), call).await;
    assert!(gave_up.is_err(), "the body is still being read for judging");
    assert_eq!(
        breaker.snapshot().probes_in_flight,
        0,
        "the dropped future released the probe"
    );
    assert_eq!(breaker.phase(), Phase::HalfOpen);

    script.set_body(r#"{"error_code":"OK"}"#);
    let response = service
        .ready()
        .await
        .unwrap()
        .call(get_request(addr))
        .await
        .unwrap();
    assert_eq!(body_of(response).await, r#"{"error_code":"OK"}"#);
    assert_eq!(breaker.phase(), Phase::Closed);
}

#[tokio::test]
async fn keyed_http_layer_keeps_one_breaker_per_upstream_host() {
    let (healthy, healthy_script) = spawn_upstream().await;
    let (failing, failing_script) = spawn_upstream().await;
    failing_script.set_status(502);
    let template = breakerbox::Config::builder()
        .consecutive_failures(2)
        .build()
        .unwrap();
    let registry = std::sync::Arc::new(breakerbox::Registry::new(template, 64).unwrap());
    let by_host = |request: &http::Request<Full<Bytes>>| {
        request
            .uri()
            .authority()
            .map_or_else(String::new, |a| a.to_string())
    };
    let mut service = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::keyed(registry.clone(), by_host).http(HttpJudge::default()))
        .service(client());

    for _ in 0..2 {
        let response = service
            .ready()
            .await
            .unwrap()
            .call(get_request(failing))
            .await
            .unwrap();
        assert_eq!(response.status(), 502);
    }
    let error = service
        .ready()
        .await
        .unwrap()
        .call(get_request(failing))
        .await
        .unwrap_err();
    assert!(error.downcast_ref::<CircuitOpen>().is_some());
    assert_eq!(failing_script.requests(), 2);

    let response = service
        .ready()
        .await
        .unwrap()
        .call(get_request(healthy))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(healthy_script.requests(), 1);
    let snapshots = registry.snapshots();
    let phases: Vec<(String, Phase)> = snapshots.into_iter().map(|s| (s.name, s.phase)).collect();
    assert!(
        phases.contains(&(failing.to_string(), Phase::Open)),
        "{phases:?}"
    );
    assert!(
        phases.contains(&(healthy.to_string(), Phase::Closed)),
        "{phases:?}"
    );
}

#[tokio::test]
async fn after_a_recovery_a_growing_share_of_calls_reaches_the_upstream() {
    let (addr, script) = spawn_upstream().await;
    let clock = breakerbox::ManualClock::new();
    let breaker = CircuitBreaker::builder()
        .consecutive_failures(1)
        .recovery_timeout(Duration::from_secs(1))
        .required_successes(2)
        .ramp(0.1, Duration::from_secs(10))
        .clock(clock.clone())
        .build()
        .unwrap();
    let mut service = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::new(breaker.clone()).http(HttpJudge::default()))
        .service(client());
    script.set_status(500);
    let _ = service.ready().await.unwrap().call(get_request(addr)).await;
    assert_eq!(breaker.phase(), Phase::Open);
    script.set_status(200);
    clock.advance(Duration::from_secs(1));
    for _ in 0..2 {
        let response = service.ready().await.unwrap().call(get_request(addr)).await;
        assert_eq!(response.unwrap().status(), 200);
    }
    assert_eq!(breaker.phase(), Phase::Closed, "two probe successes close");
    let mut reached = Vec::new();
    for _ in 0..3 {
        let before = script.requests();
        for _ in 0..100 {
            match service.ready().await.unwrap().call(get_request(addr)).await {
                Ok(response) => assert_eq!(response.status(), 200),
                Err(error) => {
                    let open = error.downcast_ref::<CircuitOpen>().expect("a rejection");
                    assert_eq!(open.reason(), breakerbox::RejectReason::Ramp);
                }
            }
        }
        reached.push(script.requests() - before);
        clock.advance(Duration::from_secs(5));
    }
    // 10% right after the close, 55% half-way, all of them once the ramp is over.
    assert_eq!(reached, [11, 55, 100]);
}
