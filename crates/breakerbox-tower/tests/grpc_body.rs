//! The end of a gRPC response body through the HTTP form, with scripted bodies: no
//! trailers, a broken body, trailers with a status, and (feature `tokio`) a body that
//! hangs past the call's deadline. Each decides the verdict only when the body ends.
#![allow(clippy::unwrap_used)] // tests unwrap

use std::convert::Infallible;
use std::time::Duration;

use breakerbox::{CircuitBreaker, Phase};
use breakerbox_http::HttpJudge;
use breakerbox_tower::CircuitBreakerLayer;
use bytes::Bytes;
use http::HeaderMap;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use tokio_stream::{Stream, StreamExt};
use tower::{service_fn, ServiceBuilder, ServiceExt};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Frames = std::pin::Pin<Box<dyn Stream<Item = Result<Frame<Bytes>, BoxError>> + Send>>;

fn breaker() -> CircuitBreaker {
    let builder = CircuitBreaker::builder()
        .consecutive_failures(1)
        .recovery_timeout(Duration::from_secs(30));
    #[cfg(feature = "tokio")]
    let builder = builder.call_timeout(Duration::from_millis(200));
    builder.build().unwrap()
}

fn trailers(code: &'static str) -> Frame<Bytes> {
    let mut map = HeaderMap::new();
    map.insert("grpc-status", code.parse().unwrap());
    Frame::trailers(map)
}

/// One call through the layer whose upstream answers a gRPC head (no status in it) and
/// `frames` as its body; the body is read to its end (or error) by the caller.
async fn call(breaker: &CircuitBreaker, frames: Frames) -> Result<(), BoxError> {
    let frames = std::sync::Arc::new(std::sync::Mutex::new(Some(frames)));
    let upstream = service_fn(move |_: http::Request<String>| {
        let body = StreamBody::new(frames.lock().unwrap().take().unwrap());
        async move {
            let response = http::Response::builder()
                .header("content-type", "application/grpc")
                .body(body)
                .unwrap();
            Ok::<_, Infallible>(response)
        }
    });
    let judge = HttpJudge::builder().grpc(true).build().unwrap();
    let service = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::new(breaker.clone()).http(judge))
        .service(upstream);
    let response = service.oneshot(http::Request::new(String::new())).await?;
    assert_eq!(breaker.phase(), Phase::Closed, "nothing judged at the head");
    response.into_body().collect().await.map(|_| ())
}

fn data(text: &'static str) -> Result<Frame<Bytes>, BoxError> {
    Ok(Frame::data(Bytes::from_static(text.as_bytes())))
}

#[tokio::test]
async fn ok_in_the_trailers_is_a_success_and_unavailable_a_failure() {
    let breaker = breaker();
    call(
        &breaker,
        Box::pin(tokio_stream::iter([data("m"), Ok(trailers("0"))])),
    )
    .await
    .unwrap();
    assert_eq!(breaker.phase(), Phase::Closed);
    call(
        &breaker,
        Box::pin(tokio_stream::iter([data("m"), Ok(trailers("14"))])),
    )
    .await
    .unwrap();
    assert_eq!(breaker.phase(), Phase::Open);
}

#[tokio::test]
async fn a_body_that_ends_without_trailers_is_a_failure() {
    let breaker = breaker();
    call(&breaker, Box::pin(tokio_stream::iter([data("m")])))
        .await
        .unwrap();
    assert_eq!(breaker.phase(), Phase::Open, "grpc-status missing");
}

#[tokio::test]
async fn a_body_that_breaks_before_its_end_is_a_failure() {
    let breaker = breaker();
    let broken: Result<Frame<Bytes>, BoxError> = Err(std::io::Error::other("reset").into());
    let result = call(&breaker, Box::pin(tokio_stream::iter([data("m"), broken]))).await;
    assert!(result.is_err(), "the caller sees the error");
    assert_eq!(breaker.phase(), Phase::Open);
}

#[cfg(feature = "tokio")]
#[tokio::test]
async fn a_body_that_hangs_past_the_deadline_is_a_timeout_failure() {
    let breaker = breaker();
    let hangs: Frames = Box::pin(tokio_stream::iter([data("m")]).chain(tokio_stream::pending()));
    let started = tokio::time::Instant::now();
    let error = tokio::time::timeout(Duration::from_secs(10), call(&breaker, hangs))
        .await
        .expect("ended at the deadline")
        .unwrap_err();
    assert!(
        error
            .downcast_ref::<breakerbox::DeadlineElapsed>()
            .is_some(),
        "{error}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(breaker.phase(), Phase::Open);
}
