//! One upstream's breaker: in memory, or shared through Redis, behind the core's
//! [`DynBreaker`] (the engine is chosen by the config file at start). The admin service
//! reads it and acts on it, each operation bounded in time.

use std::sync::Arc;

use breakerbox::contract::DynBreaker;
use breakerbox::CircuitBreaker;
use breakerbox_redis::RedisBreaker;

use super::config::RedisConfig;
use super::metrics::Recorder;

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
