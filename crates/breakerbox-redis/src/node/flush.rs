//! A node's periodic flushes: one task per node gathers every breaker's due batch and
//! sends them together, many breakers per script call (`lua/record_many.lua`).
//!
//! With a breaker per host, a node may serve thousands of breakers, each with a trickle of
//! calls. Each flushing on its own timer cost a script call per breaker per flush
//! interval: at 10,000 breakers, thousands of calls a second for traffic that a single
//! breaker would send in one. The node's task wakes every [`TICK`], takes the batches
//! that are due (nothing sent for `flush_interval`), tops the call up with batches at
//! least half due, and sends them [`MAX_KEYS`] breakers per call. Each breaker's entries
//! are applied by `record.lua` itself, in the order queued, and its reply absorbed as its
//! own flush's would be. What stays with the breaker: failures and slow calls (sent at
//! once, or within `failure_flush_interval`), full batches, and everything during an
//! outage. A breaker never has two batches in flight (its flush lock).
//!
//! On a Redis Cluster each breaker's key hashes to its own slot, and a script may only
//! touch keys of one slot: there every breaker flushes on its own, as before.

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use breakerbox::Nanos;

use crate::store::{BatchItem, Link, Part, StoreError};
use crate::wire::Reply;

/// How often the node looks for due batches: a success waits at most `flush_interval`
/// plus this.
pub(crate) const TICK: Duration = Duration::from_millis(100);

/// Breakers per script call: a call runs `record.lua` once per breaker, so this bounds
/// how long one call holds the server (tens of microseconds per breaker).
pub(crate) const MAX_KEYS: usize = 64;

/// A breaker whose periodic flushes its node sends.
pub(crate) trait NodeFlush: Send + Sync {
    /// Takes the breaker's queued batch if it is due (`half`: at least half due, to top
    /// up a call), with its flush lock; `None` if not due, empty, busy or in an outage.
    fn take(&self, half: bool) -> Option<(Part, Taken)>;

    /// Takes in the answer to a batch [`NodeFlush::take`] gave.
    fn settle(&self, taken: Taken, answer: Result<Reply, StoreError>);

    /// The per-call timeout of the breaker's store.
    fn timeout(&self) -> Duration;
}

/// One breaker's batch on its way: what it needs back when the answer comes.
pub(crate) struct Taken {
    /// The items as queued (with the local time each was queued).
    pub(crate) items: Vec<(BatchItem, Nanos)>,
    /// The items as sent (aged).
    pub(crate) sent: Vec<BatchItem>,
    /// The jitter sample sent.
    pub(crate) r: f64,
    /// Held while the batch is on its way.
    pub(crate) lock: tokio::sync::OwnedMutexGuard<()>,
}

/// The breakers whose periodic flushes a node sends.
#[derive(Default)]
pub(crate) struct Flushers {
    breakers: Mutex<Vec<Weak<dyn NodeFlush>>>,
}

impl Flushers {
    /// Adds a breaker; forgets breakers that are gone now and then (amortised).
    pub(crate) fn add(&self, breaker: Weak<dyn NodeFlush>) -> bool {
        let mut all = self.breakers.lock().unwrap_or_else(PoisonError::into_inner);
        let first = all.is_empty();
        if all.len() >= 64 && all.len().is_power_of_two() {
            all.retain(|b| b.strong_count() > 0);
        }
        all.push(breaker);
        first
    }

    fn live(&self) -> Vec<Arc<dyn NodeFlush>> {
        let mut all = self.breakers.lock().unwrap_or_else(PoisonError::into_inner);
        let mut live = Vec::with_capacity(all.len());
        all.retain(|b| match b.upgrade() {
            Some(b) => {
                live.push(b);
                true
            }
            None => false,
        });
        live
    }
}

/// One round: every due batch, topped up with half-due ones to fill the last call, sent
/// [`MAX_KEYS`] breakers per call.
pub(crate) async fn round(flushers: &Flushers, link: &Link) {
    let live = flushers.live();
    let mut taken: Vec<(Arc<dyn NodeFlush>, Part, Taken)> = Vec::new();
    let mut rest = Vec::new();
    for b in live {
        match b.take(false) {
            Some((part, t)) => taken.push((b, part, t)),
            None => rest.push(b),
        }
    }
    if taken.is_empty() {
        return;
    }
    let mut room = taken.len().div_ceil(MAX_KEYS) * MAX_KEYS - taken.len();
    for b in rest {
        if room == 0 {
            break;
        }
        if let Some((part, t)) = b.take(true) {
            taken.push((b, part, t));
            room -= 1;
        }
    }
    while !taken.is_empty() {
        let n = taken.len().min(MAX_KEYS);
        let mut breakers = Vec::with_capacity(n);
        let mut parts = Vec::with_capacity(n);
        for (b, part, t) in taken.drain(..n) {
            breakers.push((b, t));
            parts.push(part);
        }
        let timeout = breakers
            .iter()
            .map(|(b, _)| b.timeout())
            .max()
            .unwrap_or_default();
        match link.record_many(&parts, timeout).await {
            Ok(answers) => {
                for ((b, t), answer) in breakers.into_iter().zip(answers) {
                    b.settle(t, answer);
                }
            }
            Err(error) => {
                for (b, t) in breakers {
                    b.settle(t, Err(error.again()));
                }
            }
        }
    }
}

/// The node's flush task: a round every [`TICK`] until the node is gone.
pub(crate) async fn run(shared: Weak<super::Shared>) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(node) = shared.upgrade() else {
            return;
        };
        let (flushers, link) = (node.flushers.clone(), node.link.clone());
        drop(node);
        round(&flushers, &link).await;
    }
}
