//! What the Lua scripts' edge tests (`script_*.rs`) share: a store on a real server with a
//! generous timeout, and a plain failure to record.

#![allow(dead_code)]

use std::time::Duration;

use breakerbox::model::PermitKind;
use breakerbox::{Config, Verdict};
use breakerbox_redis::{OutcomeArg, RedisStore, StoreOptions};

use super::redis_server::RedisServer;

/// Store options whose timeout a busy machine cannot reach (a failed call would kill a
/// mutant that should live, or fail a test).
pub fn options() -> StoreOptions {
    StoreOptions {
        timeout: Duration::from_secs(10),
        ..StoreOptions::default()
    }
}

/// A store of breaker `name` on `server`, with [`options`].
pub fn store(server: &RedisServer, name: &str, config: &Config) -> RedisStore {
    store_with(server, name, config, &options())
}

/// A store of breaker `name` on `server`, with `options`.
pub fn store_with(
    server: &RedisServer,
    name: &str,
    config: &Config,
    options: &StoreOptions,
) -> RedisStore {
    let client = redis::Client::open(server.url()).unwrap();
    RedisStore::new(client, name, config, options)
}

/// An outcome of a normal call in generation 0.
pub fn outcome(verdict: Verdict, latency: Duration) -> OutcomeArg {
    OutcomeArg::new(0, PermitKind::Normal, verdict, latency)
}

/// A failure of a normal call in generation 0, without latency.
pub fn failure() -> OutcomeArg {
    outcome(Verdict::Failure, Duration::ZERO)
}
