//! One upstream's breaker: in memory, or shared through Redis, behind the core's
//! [`DynBreaker`] (the engine is chosen by the config file at start); admin actions on it,
//! bounded in time.

use std::sync::Arc;
use std::time::Duration;

use breakerbox::contract::{Breaker, DynBreaker};
use breakerbox::{CircuitBreaker, Snapshot};
use breakerbox_redis::RedisBreaker;

use super::config::RedisConfig;
use super::metrics::Recorder;

/// How long an admin read or action may wait on Redis.
const REDIS_ADMIN_TIMEOUT: Duration = Duration::from_secs(2);

/// An in-memory breaker reporting to `recorder`.
pub fn local(
    name: &str,
    config: breakerbox::Config,
    recorder: Arc<Recorder>,
) -> anyhow::Result<DynBreaker> {
    let breaker = CircuitBreaker::builder()
        .name(name)
        .config(config)
        .shared_listener(recorder)
        .build()?;
    Ok(DynBreaker::new(breaker))
}

/// A Redis breaker reporting to `recorder`.
pub async fn shared(
    redis: &RedisConfig,
    name: &str,
    config: breakerbox::Config,
    recorder: Arc<Recorder>,
) -> anyhow::Result<DynBreaker> {
    let mut builder = RedisBreaker::builder(&redis.url, name)
        .config(config)
        .shared_listener(recorder);
    if let Some(options) = &redis.options {
        builder = builder.options(options.clone());
    }
    if let Some(prefix) = &redis.prefix {
        builder = builder.prefix(prefix);
    }
    Ok(DynBreaker::new(builder.build().await?))
}

/// The breaker's state (read from Redis for a shared breaker), bounded in time.
pub async fn snapshot(breaker: &DynBreaker) -> Result<Snapshot, String> {
    match tokio::time::timeout(REDIS_ADMIN_TIMEOUT, breaker.snapshot()).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(format!("redis: {}", chain(&e))),
        Err(_) => Err("redis: timed out".to_string()),
    }
}

/// Opens the breaker until reset.
pub async fn trip(breaker: &DynBreaker) -> Result<(), String> {
    action(breaker.force_open()).await
}

/// Back to a fresh closed phase.
pub async fn reset(breaker: &DynBreaker) -> Result<(), String> {
    action(breaker.reset()).await
}

async fn action(
    action: impl std::future::Future<Output = Result<(), breakerbox::contract::DynError>>,
) -> Result<(), String> {
    match tokio::time::timeout(REDIS_ADMIN_TIMEOUT, action).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!(
            "redis: {} (kept locally, pushed when redis is back)",
            chain(&e)
        )),
        Err(_) => Err("redis: timed out".to_string()),
    }
}

/// `error` and every source under it, one after the other.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(source) = next {
        text.push_str(": ");
        text.push_str(&source.to_string());
        next = source.source();
    }
    text
}
