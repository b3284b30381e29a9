//! Every judge rule, through the middleware, against a real server on 127.0.0.1.
#![allow(clippy::unwrap_used)] // tests and their helpers unwrap

#[path = "support/harness.rs"]
mod harness;
#[path = "support/server.rs"]
mod server;

use std::time::Duration;

use breakerbox::{MonotonicClock, Phase, Verdict};
use breakerbox_http::{HttpJudge, TransportError};
use breakerbox_reqwest::{circuit_open, transport_error};
use harness::{harness_with, judgement, manual, trips_after};
use server::{client_builder, closed_port, plain_client, Reply, Server};

fn business_judge() -> HttpJudge {
    HttpJudge::builder()
        .business_pointer("/error_code")
        .business_pointer("/error/code")
        .business_failure_codes(["E001", "E002"])
        .build()
        .unwrap()
}

#[tokio::test]
async fn server_errors_trip_the_breaker_and_then_nothing_is_sent() {
    let server = Server::start().await;
    server.set_fallback(Reply::status(503));
    let (h, _clock) = manual(trips_after(2), HttpJudge::default());
    for _ in 0..2 {
        let response = h.client.get(server.url("/")).send().await.unwrap();
        assert_eq!(response.status(), 503);
        assert_eq!(judgement(&response).reason, "status 503");
    }
    assert_eq!(h.breaker(&server.key()).phase(), Phase::Open);
    for _ in 0..5 {
        let error = h.client.get(server.url("/")).send().await.unwrap_err();
        let open = circuit_open(&error).expect("a CircuitOpen rejection");
        assert_eq!(open.phase(), Phase::Open);
        assert_eq!(open.retry_after(), Some(Duration::from_secs(10)));
        // The anyhow error downcasts the usual way too.
        match &error {
            reqwest_middleware::Error::Middleware(inner) => {
                assert!(inner.downcast_ref::<breakerbox::CircuitOpen>().is_some())
            }
            other => panic!("expected a middleware error, got {other:?}"),
        }
    }
    assert_eq!(server.hits(), 2, "an open breaker sends nothing");
}

#[tokio::test]
async fn client_errors_are_ignored_by_default_but_408_and_429_fail() {
    let server = Server::start().await;
    server.set_fallback(Reply::status(404));
    let (h, _clock) = manual(trips_after(1), HttpJudge::default());
    for _ in 0..5 {
        let response = h.client.get(server.url("/missing")).send().await.unwrap();
        assert_eq!(judgement(&response).verdict, Verdict::Ignore);
    }
    assert_eq!(h.breaker(&server.key()).phase(), Phase::Closed);
    server.push(Reply::status(429));
    let response = h.client.get(server.url("/")).send().await.unwrap();
    assert_eq!(judgement(&response).verdict, Verdict::Failure);
    assert_eq!(h.breaker(&server.key()).phase(), Phase::Open);
}

#[tokio::test]
async fn request_timeout_status_408_fails() {
    let server = Server::start().await;
    server.set_fallback(Reply::status(408));
    let (h, _clock) = manual(trips_after(1), HttpJudge::default());
    h.client.get(server.url("/")).send().await.unwrap();
    assert_eq!(h.breaker(&server.key()).phase(), Phase::Open);
}

#[tokio::test]
async fn client_errors_configured_as_failures_trip_the_breaker() {
    let server = Server::start().await;
    server.set_fallback(Reply::status(400));
    let judge = HttpJudge::builder()
        .client_errors(Verdict::Failure)
        .build()
        .unwrap();
    let (h, _clock) = manual(trips_after(3), judge);
    for _ in 0..3 {
        h.client.get(server.url("/")).send().await.unwrap();
    }
    assert_eq!(h.breaker(&server.key()).phase(), Phase::Open);
    assert!(h.client.get(server.url("/")).send().await.is_err());
    assert_eq!(server.hits(), 3);
}

#[tokio::test]
async fn successes_keep_it_closed_and_break_a_failure_streak() {
    let server = Server::start().await;
    let (h, _clock) = manual(trips_after(2), HttpJudge::default());
    for reply in [
        Reply::status(500),
        Reply::ok(),
        Reply::status(502),
        Reply::ok(),
    ] {
        server.push(reply);
        h.client.get(server.url("/")).send().await.unwrap();
    }
    assert_eq!(h.breaker(&server.key()).phase(), Phase::Closed);
}

#[tokio::test]
async fn a_business_failure_code_in_a_200_fails_and_the_caller_gets_the_body_unchanged() {
    let server = Server::start().await;
    let body = r#"{"error_code":"E001","detail":"ledger unavailable"}"#;
    server.set_fallback(Reply::json(200, body).header("x-trace", "abc"));
    let (h, _clock) = manual(trips_after(2), business_judge());
    let url = server.url("/charge?id=7");
    let response = h.client.get(&url).send().await.unwrap();
    let j = judgement(&response);
    assert_eq!(
        (j.verdict, j.reason.as_ref()),
        (Verdict::Failure, "business code E001")
    );
    assert_eq!(response.status(), 200);
    assert_eq!(response.url().as_str(), url);
    assert_eq!(response.headers()["x-trace"], "abc");
    assert_eq!(response.content_length(), Some(body.len() as u64));
    assert_eq!(response.text().await.unwrap(), body);
    h.client.get(&url).send().await.unwrap();
    assert_eq!(h.breaker(&server.key()).phase(), Phase::Open);
}

#[tokio::test]
async fn a_code_at_a_later_pointer_and_a_chunked_body_are_judged() {
    let server = Server::start().await;
    let body = r#"{"error":{"code":"E002"},"padding":"xxxxxxxxxxxxxxxxxxxxxxxx"}"#;
    server.set_fallback(Reply::json(200, body).chunked(7));
    let (h, _clock) = manual(trips_after(5), business_judge());
    let response = h.client.get(server.url("/")).send().await.unwrap();
    assert_eq!(judgement(&response).reason, "business code E002");
    assert_eq!(response.text().await.unwrap(), body);
}

#[tokio::test]
async fn unlisted_codes_non_json_and_empty_bodies_are_judged_by_status() {
    let server = Server::start().await;
    let (h, _clock) = manual(trips_after(1), business_judge());
    for body in [
        r#"{"error_code":"W1"}"#,
        "<html>E001</html>",
        "",
        r#"{"error_code":"E0"#,
    ] {
        server.push(Reply::json(200, body));
        let response = h.client.get(server.url("/")).send().await.unwrap();
        assert_eq!(judgement(&response).reason, "status 200", "{body:?}");
        assert_eq!(response.text().await.unwrap(), body);
    }
    assert_eq!(h.breaker(&server.key()).phase(), Phase::Closed);
}

#[tokio::test]
async fn a_body_over_the_cap_is_passed_through_whole_and_judged_without_it() {
    let mut body = br#"{"error_code":"E001","blob":""#.to_vec();
    body.extend(std::iter::repeat_n(b'x', 200_000));
    body.extend(br#""}"#);
    let judge = HttpJudge::builder()
        .business_pointer("/error_code")
        .business_failure_codes(["E001"])
        .body_cap(1024)
        .build()
        .unwrap();
    for chunked in [None, Some(100), Some(5000)] {
        let server = Server::start().await;
        let mut reply = Reply::json(200, "").body(body.clone());
        if let Some(size) = chunked {
            reply = reply.chunked(size);
        }
        server.set_fallback(reply);
        let (h, _clock) = manual(trips_after(1), judge.clone());
        let response = h.client.get(server.url("/big")).send().await.unwrap();
        assert_eq!(
            judgement(&response).reason,
            "status 200",
            "chunked {chunked:?}"
        );
        assert_eq!(response.url().as_str(), server.url("/big"));
        let received = response.bytes().await.unwrap();
        assert_eq!(received.len(), body.len(), "chunked {chunked:?}");
        assert_eq!(&received[..], &body[..], "chunked {chunked:?}");
        assert_eq!(h.breaker(&server.key()).phase(), Phase::Closed);
    }
}

#[tokio::test]
async fn bodies_of_statuses_outside_the_business_rule_are_not_read() {
    let server = Server::start().await;
    // The body would say E001, but a 500 is not covered (default statuses: 2xx), and a
    // 404 is ignored by status whatever its body says.
    server.push(Reply::json(500, r#"{"error_code":"E001"}"#));
    server.push(Reply::json(404, r#"{"error_code":"E001"}"#));
    let (h, _clock) = manual(trips_after(5), business_judge());
    let response = h.client.get(server.url("/")).send().await.unwrap();
    assert_eq!(judgement(&response).reason, "status 500");
    let response = h.client.get(server.url("/")).send().await.unwrap();
    assert_eq!(judgement(&response).verdict, Verdict::Ignore);
    assert_eq!(response.text().await.unwrap(), r#"{"error_code":"E001"}"#);
}

#[tokio::test]
async fn a_200_slower_than_the_threshold_fails() {
    let server = Server::start().await;
    server.push(Reply::ok().delay(Duration::from_millis(300)));
    server.push(Reply::ok());
    let judge = HttpJudge::builder()
        .slow_threshold(Duration::from_millis(150))
        .build()
        .unwrap();
    let h = harness_with(trips_after(2), judge, MonotonicClock, plain_client());
    let slow = h.client.get(server.url("/")).send().await.unwrap();
    let j = judgement(&slow);
    assert_eq!(j.verdict, Verdict::Failure);
    assert!(
        j.reason.starts_with("slow ") && j.reason.ends_with(" > 150ms"),
        "{}",
        j.reason
    );
    let fast = h.client.get(server.url("/")).send().await.unwrap();
    assert_eq!(judgement(&fast).verdict, Verdict::Success);
}

#[tokio::test]
async fn a_refused_connection_fails() {
    let addr = closed_port().await;
    let (h, _clock) = manual(trips_after(1), HttpJudge::default());
    let error = h
        .client
        .get(format!("http://{addr}/"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(transport_error(&error), TransportError::Connect);
    assert!(circuit_open(&error).is_none());
    assert_eq!(h.breaker(&addr.to_string()).phase(), Phase::Open);
    let error = h
        .client
        .get(format!("http://{addr}/"))
        .send()
        .await
        .unwrap_err();
    assert!(circuit_open(&error).is_some());
}

#[tokio::test]
async fn a_client_timeout_fails() {
    let server = Server::start().await;
    server.set_fallback(Reply::ok().delay(Duration::from_secs(2)));
    let client = client_builder()
        .timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let h = harness_with(
        trips_after(1),
        HttpJudge::default(),
        breakerbox::ManualClock::new(),
        client,
    );
    let error = h.client.get(server.url("/")).send().await.unwrap_err();
    assert_eq!(transport_error(&error), TransportError::Timeout);
    assert_eq!(h.breaker(&server.key()).phase(), Phase::Open);
}

#[tokio::test]
async fn a_connection_closed_without_a_response_fails() {
    let server = Server::start().await;
    server.push(Reply::hang_up());
    let (h, _clock) = manual(trips_after(1), HttpJudge::default());
    let error = h.client.get(server.url("/")).send().await.unwrap_err();
    assert_eq!(transport_error(&error), TransportError::NoResponse);
    assert_eq!(h.breaker(&server.key()).phase(), Phase::Open);
}

#[tokio::test]
async fn retry_after_is_read_into_the_judgement_when_honoured() {
    let server = Server::start().await;
    server.set_fallback(Reply::status(503).header("retry-after", "7"));
    let judge = HttpJudge::builder()
        .honor_retry_after(true)
        .build()
        .unwrap();
    let (h, _clock) = manual(trips_after(5), judge);
    let response = h.client.get(server.url("/")).send().await.unwrap();
    assert_eq!(
        judgement(&response).retry_after,
        Some(Duration::from_secs(7))
    );
}

#[tokio::test]
async fn an_honoured_retry_after_keeps_the_breaker_open_that_long_within_the_cap() {
    let server = Server::start().await;
    server.set_fallback(Reply::status(429).header("retry-after", "120"));
    let judge = HttpJudge::builder()
        .honor_retry_after(true)
        .build()
        .unwrap();
    // Recovery 10 s, open phases capped at 5 min: the server's 120 s wins over 10 s.
    let config = breakerbox::Config::builder()
        .consecutive_failures(1)
        .recovery_timeout(Duration::from_secs(10))
        .backoff(1.0, Duration::from_secs(300))
        .build()
        .unwrap();
    let (h, _clock) = manual(config, judge);
    let response = h.client.get(server.url("/")).send().await.unwrap();
    assert_eq!(response.status(), 429);
    let error = h.client.get(server.url("/")).send().await.unwrap_err();
    let open = circuit_open(&error).expect("a CircuitOpen rejection");
    assert_eq!(open.retry_after(), Some(Duration::from_secs(120)));

    // Without the cap above the recovery timeout, the hint cannot lengthen the open phase.
    let (h, _clock) = manual(
        trips_after(1),
        HttpJudge::builder()
            .honor_retry_after(true)
            .build()
            .unwrap(),
    );
    h.client.get(server.url("/")).send().await.unwrap();
    let error = h.client.get(server.url("/")).send().await.unwrap_err();
    assert_eq!(
        circuit_open(&error).unwrap().retry_after(),
        Some(Duration::from_secs(10))
    );
    assert_eq!(server.hits(), 2);
}

#[tokio::test]
async fn each_host_has_its_own_breaker() {
    let failing = Server::start().await;
    failing.set_fallback(Reply::status(500));
    let healthy = Server::start().await;
    let (h, _clock) = manual(trips_after(1), HttpJudge::default());
    h.client.get(failing.url("/")).send().await.unwrap();
    assert!(h.client.get(failing.url("/")).send().await.is_err());
    for _ in 0..3 {
        assert_eq!(
            h.client
                .get(healthy.url("/"))
                .send()
                .await
                .unwrap()
                .status(),
            200
        );
    }
    assert_eq!(healthy.hits(), 3);
    assert_eq!(h.registry.len(), 2);
}

#[tokio::test]
async fn a_key_function_can_share_one_breaker_between_hosts() {
    let failing = Server::start().await;
    failing.set_fallback(Reply::status(500));
    let healthy = Server::start().await;
    let registry = std::sync::Arc::new(
        breakerbox::Registry::with_clock(trips_after(1), 8, breakerbox::ManualClock::new())
            .unwrap(),
    );
    let middleware = breakerbox_reqwest::CircuitBreakerMiddleware::with_registry(
        registry.clone(),
        HttpJudge::default(),
    )
    .key_fn(|_| "everything".to_owned());
    let client = reqwest_middleware::ClientBuilder::new(plain_client())
        .with(middleware)
        .build();
    client.get(failing.url("/")).send().await.unwrap();
    let error = client.get(healthy.url("/")).send().await.unwrap_err();
    assert!(circuit_open(&error).is_some());
    assert_eq!(healthy.hits(), 0);
    assert_eq!(registry.len(), 1);
}

#[tokio::test]
async fn when_the_registry_is_full_a_new_host_goes_through_unprotected() {
    let failing = Server::start().await;
    failing.set_fallback(Reply::status(500));
    let other = Server::start().await;
    other.set_fallback(Reply::status(500));
    let registry = std::sync::Arc::new(
        breakerbox::Registry::with_clock(trips_after(1), 1, breakerbox::ManualClock::new())
            .unwrap(),
    );
    let client = reqwest_middleware::ClientBuilder::new(plain_client())
        .with(breakerbox_reqwest::CircuitBreakerMiddleware::with_registry(
            registry.clone(),
            HttpJudge::default(),
        ))
        .build();
    client.get(failing.url("/")).send().await.unwrap();
    for _ in 0..3 {
        let response = client.get(other.url("/")).send().await.unwrap();
        assert!(response
            .extensions()
            .get::<breakerbox_http::Judgement>()
            .is_none());
    }
    assert_eq!(other.hits(), 3);
    assert_eq!(registry.len(), 1);
}

#[tokio::test]
async fn a_reset_connection_fails() {
    let (addr, resets, task) = server::resetting_server().await;
    let (h, _clock) = manual(trips_after(1), HttpJudge::default());
    let error = h
        .client
        .get(format!("http://{addr}/"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(transport_error(&error), TransportError::Reset, "{error:?}");
    assert_eq!(resets.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(h.breaker(&addr.to_string()).phase(), Phase::Open);
    task.abort();
}
