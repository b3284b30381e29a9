#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(unreachable_pub, missing_debug_implementations)]
//! # breakerbox-redis
//!
//! One circuit breaker shared by many processes and machines, its state in Redis.
//!
//! - Every state change is one atomic Lua script (`lua/*.lua`, one per operation), loaded
//!   with `SCRIPT LOAD`, run with `EVALSHA` and reloaded on `NOSCRIPT`. The scripts port
//!   [`breakerbox::model`] line by line and read Redis `TIME` (microseconds), so machines
//!   with skewed clocks agree.
//! - One hash per breaker at `{prefix}{name}` (the name in a hash tag, so a breaker lives
//!   on one Redis Cluster slot), expiring when abandoned.
//! - Half-open probe slots are reserved in Redis: `max_probes` caps probes across the
//!   fleet. Each slot is a lease with a token (default 2 s): a caller that timed out,
//!   crashed or lost its outcome cannot keep it, and the half-open deadline still bounds
//!   the phase.
//! - Views order news by a version the scripts increment, never by Redis time, so a
//!   clock that steps back or a forged channel message cannot freeze or move them; a
//!   corrupt value is repaired inside the script that finds it, once (rules 14-19 of
//!   `docs/RULES.md` in the repository).
//! - [`RedisBreaker`] keeps a local view (pub/sub plus a periodic refresh): no Redis round
//!   trip per call while closed (outcomes go in batches), none at all while open.
//!   [`Mode::Strict`] asks Redis on every call.
//! - [`RedisBreaker`] implements the core's [`breakerbox::contract::Breaker`], so the tower
//!   layer, the reqwest middleware and [`breakerbox::Registry`] take it as they take the
//!   in-memory breaker; [`RedisNode`] serves any number of breakers over one connection and
//!   one subscription per process ([`RedisNode::registry`]: one breaker per key, on demand).
//! - One server, a Redis Cluster (feature `cluster`: `MOVED`/`ASK` followed, sharded
//!   pub/sub on Redis 7) or a primary found through Sentinels (feature `sentinel`: a
//!   failover followed), named by a URL or a [`RedisTarget`]; a failover is an outage
//!   like any other, and what a promoted replica lost is given back (see the README).
//! - Every Redis call has a timeout; when Redis is away a [`Fallback`] decides (a local
//!   in-process breaker by default), reported once per outage, and the state is
//!   resynchronised when Redis is back (see [`RedisBreaker`] and the README for which
//!   state wins).
//!
//! ```no_run
//! use breakerbox::Config;
//! use breakerbox_redis::RedisBreaker;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let config = Config::builder().consecutive_failures(5).build()?;
//! let breaker = RedisBreaker::builder("redis://127.0.0.1:6379/", "payments")
//!     .config(config)
//!     .build()
//!     .await?;
//! let receipt = breaker.call(async { Ok::<_, std::io::Error>("charged") }).await;
//! # let _ = receipt;
//! # Ok(())
//! # }
//! ```
//!
//! ## Features
//!
//! | feature | default | what it adds                              |
//! |---------|---------|-------------------------------------------|
//! | `tls`   | no      | `rediss://` URLs (redis-rs with rustls)   |
//! | `serde` | no      | `RedisOptions`: the breaker's options as a config file table (durations as text, unknown keys refused, errors naming the key), applied with `RedisBreakerBuilder::options`; serde for `breakerbox::Config` (`breakerbox/serde`) |
//! | `cluster` | no    | `redis+cluster://` URLs and `RedisTarget::cluster`: a Redis Cluster through redis-rs's cluster-async client |
//! | `sentinel` | no   | `redis+sentinel://` URLs and `RedisTarget::sentinel`: the primary of a service through Sentinels |
//! | `metrics` | no    | metrics through the `metrics` facade (`describe_metrics`) |
//! | `lua-mutants` | no | for `scripts/lua_mutants.py` only: the Lua scripts read at run time from the directory `BREAKERBOX_LUA_DIR` names, when set |

mod batch;
mod breaker;
mod digests;
mod events;
#[cfg(feature = "metrics")]
mod metrics;
mod node;
mod options;
mod pubsub;
mod scripts;
mod shared_task;
mod store;
mod target;
mod wire;

pub use breaker::{
    AcquireFuture, BuildError, Recorded, RedisBreaker, RedisBreakerBuilder, RedisPermit,
};
pub use events::{Stats, StatsSnapshot};
#[cfg(feature = "metrics")]
pub use metrics::describe_metrics;
pub use node::RedisNode;
#[cfg(feature = "serde")]
pub use options::RedisOptions;
pub use options::{Backoff, Fallback, LocalView, Mode};
pub use scripts::ScriptKind;
pub use store::{
    breaker_key, process_node_id, Answer, BatchItem, ManualOp, OutcomeArg, RedisStore, StoreError,
    StoreOptions, MAX_OVERRIDE_DURATION, STATE_FORMAT,
};
pub use target::{RedisConnection, RedisTarget, Topology};
pub use wire::{reason_from_str, Reply, ReplyDecision, StoredState};
