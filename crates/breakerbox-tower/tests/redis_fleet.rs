//! The tower layer on the Redis engine, end to end: two processes share one breaker
//! through Redis in front of a real loopback upstream, called with hyper's client.

#![allow(clippy::unwrap_used)] // tests unwrap

#[path = "../../breakerbox-redis/tests/support/redis_server.rs"]
mod redis_server;

#[path = "../../breakerbox-redis/tests/support/http_fleet.rs"]
mod http_fleet;

use breakerbox::CircuitOpen;
use breakerbox_http::HttpJudge;
use breakerbox_tower::CircuitBreakerLayer;
use bytes::Bytes;
use http_body_util::Full;
use http_fleet::Sent;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tower::{ServiceBuilder, ServiceExt};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_share_one_redis_breaker_through_the_layer() {
    http_fleet::run_scenario("http_fleet_worker").await;
}

/// One process of the fleet (run by the test above, ignored otherwise).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a worker process of two_processes_share_one_redis_breaker_through_the_layer"]
async fn http_fleet_worker() {
    let Some((redis, upstream, run_for)) = http_fleet::worker_settings() else {
        return;
    };
    let breaker = http_fleet::breaker(&redis).await;
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let service = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::new(breaker).http(HttpJudge::default()))
        .service(client);
    let uri: http::Uri = upstream.parse().unwrap();
    http_fleet::run_callers(3, run_for, move || {
        let service = service.clone();
        let request = http::Request::get(uri.clone())
            .body(Full::new(Bytes::new()))
            .unwrap();
        async move {
            match service.oneshot(request).await {
                Ok(_) => Sent::Response,
                Err(error) if error.downcast_ref::<CircuitOpen>().is_some() => Sent::Rejected,
                Err(_) => Sent::Error,
            }
        }
    })
    .await;
}
