//! The counters of a [`RedisBreaker`](crate::RedisBreaker), for metrics. (Its events go
//! to the core's [`breakerbox::Listener`], outages and repairs included.)

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of one Redis breaker, for metrics.
#[derive(Debug, Default)]
pub struct Stats {
    pub(crate) redis_calls: AtomicU64,
    pub(crate) redis_errors: AtomicU64,
    pub(crate) local_admits: AtomicU64,
    pub(crate) local_rejects: AtomicU64,
    pub(crate) fallback_calls: AtomicU64,
    pub(crate) outages: AtomicU64,
    pub(crate) stale: AtomicU64,
    pub(crate) repairs: AtomicU64,
    pub(crate) flushes: AtomicU64,
    pub(crate) dropped_outcomes: AtomicU64,
}

/// A copy of [`Stats`] at one moment.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// Script calls sent to Redis.
    pub redis_calls: u64,
    /// Script calls that failed or timed out.
    pub redis_errors: u64,
    /// Calls admitted from the local view, without Redis.
    pub local_admits: u64,
    /// Calls rejected from the local view, without Redis.
    pub local_rejects: u64,
    /// Acquires decided by the fallback policy during an outage.
    pub fallback_calls: u64,
    /// Outage episodes.
    pub outages: u64,
    /// Results dropped as stale.
    pub stale: u64,
    /// Corrupt values repaired.
    pub repairs: u64,
    /// Batches of outcomes sent.
    pub flushes: u64,
    /// Outcomes dropped because Redis was unreachable or the buffer was full.
    pub dropped_outcomes: u64,
}

impl Stats {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Reads every counter.
    pub fn snapshot(&self) -> StatsSnapshot {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        StatsSnapshot {
            redis_calls: r(&self.redis_calls),
            redis_errors: r(&self.redis_errors),
            local_admits: r(&self.local_admits),
            local_rejects: r(&self.local_rejects),
            fallback_calls: r(&self.fallback_calls),
            outages: r(&self.outages),
            stale: r(&self.stale),
            repairs: r(&self.repairs),
            flushes: r(&self.flushes),
            dropped_outcomes: r(&self.dropped_outcomes),
        }
    }
}
