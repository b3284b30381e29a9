#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(unreachable_pub, missing_debug_implementations)]
//! # breakerbox
//!
//! Circuit breakers for Rust services: stop hammering a failing dependency, fail fast,
//! probe carefully, and come back only when it is truly healthy.
//!
//! - **One pure [model]** decides every state change: closed, open, half-open, plus the
//!   manual forced-open and disabled. Engines (this crate's in-memory
//!   [`CircuitBreaker`], the Redis engine of `breakerbox-redis`) implement it and are
//!   tested against it.
//! - **Trip policies** that combine: consecutive failures; failure rate and slow-call
//!   rate over a count window that really slides, or a time window of buckets; a minimum
//!   number of calls before a rate is judged.
//! - **Careful half-open**: at most `max_probes` probes in flight, reserved by
//!   compare-and-swap at admission; close after `required_successes` consecutive
//!   successes; any probe failure re-opens; a half-open phase not confirmed within
//!   `half_open_timeout` re-opens, so lost probes cannot wedge it.
//! - **Permits** are RAII and carry their generation: a late result from an older phase
//!   changes nothing; a dropped permit (a cancelled future) frees its slot.
//! - **Time** comes from an injected [`Clock`]; [`ManualClock`] is public so you can test
//!   your own code deterministically.
//! - **No lock on the hot path**: admitting a call in closed is one atomic load; recording
//!   a success writes only the calling thread's own memory (a rate window counts it in a
//!   per-thread lane); failures and slow calls are filed under the window's lock, and the
//!   window's counts stay exact.
//! - **One contract for every engine** ([`contract::Breaker`], [`contract::BreakerPermit`]):
//!   the in-memory [`CircuitBreaker`] and the Redis engine of `breakerbox-redis` both
//!   implement it, and the tower layer, the reqwest middleware and the keyed [`Registry`]
//!   take any engine ([`contract::DynBreaker`] when the engine is chosen at run time).
//!
//! ## Quick start
//!
//! ```
//! use breakerbox::{CallError, CircuitBreaker};
//! use std::time::Duration;
//!
//! let breaker = CircuitBreaker::builder()
//!     .name("payments")
//!     .consecutive_failures(5)
//!     .recovery_timeout(Duration::from_secs(30))
//!     .build()?;
//!
//! match breaker.call(|| Ok::<_, std::io::Error>("charged")) {
//!     Ok(receipt) => println!("{receipt}"),
//!     Err(CallError::Open(open)) => println!("payments is down; retry in {:?}", open.retry_after()),
//!     Err(CallError::Inner(error)) => println!("payments failed: {error}"),
//! }
//! # Ok::<(), breakerbox::ConfigError>(())
//! ```
//!
//! ## Features
//!
//! | feature   | default | what it adds                                             |
//! |-----------|---------|----------------------------------------------------------|
//! | `tracing` | no      | every event (transition, rejection, stale result) is emitted through `tracing` |
//! | `tokio`   | no      | [`TokioClock`]: reads tokio's time, so a breaker follows `tokio::time::pause` and `advance` in tests; `TokioDeadline`: the timer that cancels a call at its permit's deadline (rule 22), used by the tower layer, the reqwest middleware and the proxy (tokio's `time` feature only) |
//! | `serde`   | no      | `Deserialize` and `Serialize` for [`Config`], with the keys of a config file (`config::ConfigFile`): durations as `"30s"`, windows as `"count:100"` or `"time:10s/20"`; a deserialized `Config` is validated and an error names its key |
//!
//! ## Config files
//!
//! With the `serde` feature, a breaker's table in a TOML, YAML or JSON file reads into a
//! validated [`Config`] (the keys are listed on `config::ConfigFile`); the same keys
//! serve the `breakerbox` command and its proxy.
//!
//! ```
//! # #[cfg(feature = "serde")] {
//! use breakerbox::Config;
//! let config: Config = toml::from_str(r#"
//!     failure_rate = 0.5
//!     window = "time:10s/20"
//!     recovery_timeout = "10s"
//! "#).unwrap();
//! assert_eq!(config.recovery_timeout.as_secs(), 10);
//!
//! let err = toml::from_str::<Config>("recovery_timeout = 10").unwrap_err();
//! assert!(err.message().starts_with("recovery_timeout: invalid duration 10"));
//! # }
//! ```
//!
//! The crate has no I/O and no async runtime; adapters (HTTP judging, tower, reqwest,
//! Redis) live in their own crates.
//!
//! [`TokioClock`]: https://docs.rs/breakerbox/latest/breakerbox/struct.TokioClock.html

mod breaker;
mod clock;
pub mod config;
#[cfg(not(loom))]
pub mod contract;
mod error;
mod events;
mod jitter;
mod judge;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod metrics;
pub mod model;
mod permit;
mod phase;
#[cfg(not(loom))]
mod registry;
mod snapshot;
mod sync;
mod verdict;

pub use breaker::{Builder, CircuitBreaker};
pub use clock::{Clock, ManualClock, MonotonicClock, Nanos, Stamp};
#[cfg(feature = "tokio")]
pub use clock::{TokioClock, TokioDeadline};
pub use config::{Config, ConfigBuilder, Rate};
#[cfg(not(loom))]
pub use contract::{Breaker, BreakerPermit};
pub use error::{CallError, CircuitOpen, ConfigError, DeadlineElapsed, RejectReason};
pub use events::{emit_event, Event, EventKind, Listener};
pub use jitter::{JitterSource, SplitMix};
pub use judge::{DefaultJudge, FnJudge, Judge, SlowerThan};
pub use permit::{OwnedPermit, Permit};
pub use phase::Phase;
#[cfg(not(loom))]
pub use registry::{Registry, RegistryFull};
pub use snapshot::Snapshot;
pub use verdict::Verdict;
