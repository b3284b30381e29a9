//! Building a protected client for the tests.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use breakerbox::{CircuitBreaker, Clock, Config, ManualClock, Registry};
use breakerbox_http::{HttpJudge, Judgement};
use breakerbox_reqwest::CircuitBreakerMiddleware;
use reqwest_middleware::ClientWithMiddleware;

pub struct Harness<C: Clock + Clone> {
    pub client: ClientWithMiddleware,
    pub registry: Arc<Registry<String, CircuitBreaker<C>>>,
}

impl<C: Clock + Clone> Harness<C> {
    pub fn breaker(&self, key: &str) -> CircuitBreaker<C> {
        self.registry.get(&key.to_owned()).unwrap()
    }
}

pub fn harness_with<C: Clock + Clone>(
    config: Config,
    judge: HttpJudge,
    clock: C,
    client: reqwest::Client,
) -> Harness<C> {
    let registry = Arc::new(Registry::with_clock(config, 64, clock).unwrap());
    let middleware = CircuitBreakerMiddleware::with_registry(registry.clone(), judge);
    let client = reqwest_middleware::ClientBuilder::new(client)
        .with(middleware)
        .build();
    Harness { client, registry }
}

/// A client whose breakers run on a manual clock.
pub fn manual(config: Config, judge: HttpJudge) -> (Harness<ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let h = harness_with(config, judge, clock.clone(), super::server::plain_client());
    (h, clock)
}

/// Trips after `n` consecutive failures; recovers after 10 s.
pub fn trips_after(n: u32) -> Config {
    Config::builder()
        .consecutive_failures(n)
        .recovery_timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// The judgement the middleware attached to a response.
pub fn judgement(response: &reqwest::Response) -> Judgement {
    response.extensions().get::<Judgement>().cloned().unwrap()
}
