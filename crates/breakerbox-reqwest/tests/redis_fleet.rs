//! The reqwest middleware on the Redis engine, end to end: two processes share one
//! breaker through Redis in front of a real loopback upstream.

#![allow(clippy::unwrap_used)] // tests unwrap

#[path = "../../breakerbox-redis/tests/support/redis_server.rs"]
mod redis_server;

#[path = "../../breakerbox-redis/tests/support/http_fleet.rs"]
mod http_fleet;

use std::sync::Arc;

use breakerbox::Registry;
use breakerbox_http::HttpJudge;
use breakerbox_reqwest::{circuit_open, CircuitBreakerMiddleware};
use http_fleet::Sent;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_share_one_redis_breaker_through_the_middleware() {
    http_fleet::run_scenario("http_fleet_worker").await;
}

/// One process of the fleet (run by the test above, ignored otherwise).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a worker process of two_processes_share_one_redis_breaker_through_the_middleware"]
async fn http_fleet_worker() {
    let Some((redis, upstream, run_for)) = http_fleet::worker_settings() else {
        return;
    };
    let breaker = http_fleet::breaker(&redis).await;
    // One breaker for every request: the registry's factory hands out the shared one.
    let registry = Registry::with_factory(1, breakerbox::MonotonicClock, move |_, _| {
        Ok(breaker.clone())
    });
    let middleware =
        CircuitBreakerMiddleware::with_registry(Arc::new(registry), HttpJudge::default());
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(middleware)
        .build();
    http_fleet::run_callers(3, run_for, move || {
        let client = client.clone();
        let upstream = upstream.clone();
        async move {
            match client.get(&upstream).send().await {
                Ok(_) => Sent::Response,
                Err(error) if circuit_open(&error).is_some() => Sent::Rejected,
                Err(_) => Sent::Error,
            }
        }
    })
    .await;
}
