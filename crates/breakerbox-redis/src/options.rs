//! How a Redis breaker talks to Redis and what it does when Redis is away.

use std::time::Duration;

#[cfg(feature = "serde")]
use breakerbox::config::serde_duration;
#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};

/// Functions reading the duration of each named key (for `deserialize_with`), their errors
/// naming the key.
#[cfg(feature = "serde")]
macro_rules! duration_keys {
    ($($name:ident => $key:literal),* $(,)?) => {$(
        fn $name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
            serde_duration::deserialize($key, d)
        }
    )*};
}

#[cfg(feature = "serde")]
mod file;

#[cfg(feature = "serde")]
pub use file::RedisOptions;

/// What decides calls while Redis is unreachable.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fallback {
    /// An in-process [`breakerbox::CircuitBreaker`] with the same config (the default):
    /// the node keeps protecting the dependency on its own.
    #[default]
    LocalBreaker,
    /// Admit every call and record nothing.
    FailOpen,
    /// Reject every call.
    FailClosed,
}

/// How often a breaker goes to Redis.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mode {
    /// One script call per acquire and one per outcome: every decision is made in Redis.
    Strict,
    /// The default: a local view of the shared phase (pub/sub plus a periodic refresh)
    /// admits closed-phase calls and rejects open-phase calls without Redis; closed-phase
    /// outcomes go to Redis in batches. Half-open acquires always go to Redis.
    LocalView(LocalView),
}

impl Default for Mode {
    fn default() -> Self {
        Mode::LocalView(LocalView::default())
    }
}

/// The batching and refreshing of [`Mode::LocalView`].
///
/// ```
/// use breakerbox_redis::{LocalView, Mode};
/// use std::time::Duration;
///
/// let mode = Mode::LocalView(LocalView {
///     flush_interval: Duration::from_millis(100),
///     ..LocalView::default()
/// });
/// # let _ = mode;
/// ```
///
/// With the `serde` feature, it is the `[local_view]` table of [`RedisOptions`]: every key
/// optional, durations as text (`flush_interval = "200ms"`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields, default))]
pub struct LocalView {
    /// Successes are sent at least this often (default 1 s). A breaker of a
    /// [`RedisNode`](crate::RedisNode) whose config trips on consecutive failures alone
    /// (3 or more, no rate rule) sends the successes of a quiet view (closed, no failure
    /// streak, no news pending, the node's subscription up) 4 intervals apart; see the
    /// crate README.
    #[cfg_attr(
        feature = "serde",
        serde(
            serialize_with = "serde_duration::serialize",
            deserialize_with = "flush_interval"
        )
    )]
    pub flush_interval: Duration,
    /// A failure (or a slow call) is sent within this (default 0: at once). Any failure
    /// may be the one that trips the shared breaker, and every millisecond it waits lets
    /// the whole fleet send more calls to a dependency that may be dead; failures arriving
    /// while a batch is on its way share the next one, so a node has at most one batch in
    /// flight. The trade-off: with a steady error rate a node sends up to one script call
    /// per failure (bounded by one round trip at a time); raise this to trade a longer
    /// overshoot for fewer calls.
    #[cfg_attr(
        feature = "serde",
        serde(
            serialize_with = "serde_duration::serialize",
            deserialize_with = "failure_flush_interval"
        )
    )]
    pub failure_flush_interval: Duration,
    /// A batch is sent as soon as this many outcomes wait (default 2,000).
    pub batch_size: usize,
    /// The view is re-read from Redis when no script reply has been accepted for this
    /// long (default 1 s); a message on the breaker's channel triggers a re-read at once.
    #[cfg_attr(
        feature = "serde",
        serde(
            serialize_with = "serde_duration::serialize",
            deserialize_with = "refresh_interval"
        )
    )]
    pub refresh_interval: Duration,
}

impl Default for LocalView {
    fn default() -> Self {
        LocalView {
            flush_interval: Duration::from_secs(1),
            failure_flush_interval: Duration::ZERO,
            batch_size: 2_000,
            refresh_interval: Duration::from_secs(1),
        }
    }
}

/// Reconnection backoff while Redis is away: the first retry after `min`, doubling up to
/// `max`.
///
/// With the `serde` feature, it is the `[backoff]` table of [`RedisOptions`]: `min` and
/// `max`, optional, as text (`min = "50ms"`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields, default))]
pub struct Backoff {
    /// First delay.
    #[cfg_attr(
        feature = "serde",
        serde(serialize_with = "serde_duration::serialize", deserialize_with = "min")
    )]
    pub min: Duration,
    /// Largest delay.
    #[cfg_attr(
        feature = "serde",
        serde(serialize_with = "serde_duration::serialize", deserialize_with = "max")
    )]
    pub max: Duration,
}

#[cfg(feature = "serde")]
duration_keys!(
    flush_interval => "local_view.flush_interval",
    failure_flush_interval => "local_view.failure_flush_interval",
    refresh_interval => "local_view.refresh_interval",
    min => "backoff.min",
    max => "backoff.max",
);

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            min: Duration::from_millis(50),
            max: Duration::from_secs(2),
        }
    }
}
