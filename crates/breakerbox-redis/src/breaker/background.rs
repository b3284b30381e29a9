//! The tasks behind a breaker: flushing batches, refreshing the view, checking Redis's
//! health during an outage, and listening to the breaker's channel.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use breakerbox::{Clock, Nanos, Phase};
use tokio::sync::Notify;

use super::Inner;
use crate::events::Stats;
use crate::options::{LocalView, Mode};
use crate::store::BatchItem;
use crate::wire::{Reply, ReplyDecision};
use breakerbox::EventKind;

/// A quiet view (see `Inner::quiet`) is re-read this many refresh intervals apart.
pub(crate) const QUIET_REFRESH: u32 = 30;

/// The successes of a quiet view that cannot move a trip (see
/// `Inner::successes_may_wait`) are flushed this many flush intervals apart.
pub(crate) const QUIET_FLUSH: u32 = 4;

impl<C: Clock + Clone> Inner<C> {
    /// Sends the queued outcomes, a batch at a time.
    pub(crate) async fn flush(&self) {
        self.flush_batches(true).await
    }

    /// Sends what is queued now, a batch at a time: full batches only (`all == false`: a
    /// batch filled up; the rest waits for the interval), or everything. Outcomes that
    /// arrive meanwhile wait for the next flush: chasing them would turn one flush per
    /// interval into several.
    pub(crate) async fn flush_batches(&self, all: bool) {
        let Mode::LocalView(LocalView { batch_size, .. }) = self.mode else {
            return;
        };
        let batch_size = batch_size.max(1);
        // One batch in flight at a time (the node's flush task may be sending one).
        let _lock = self.flush_lock.lock().await;
        if all {
            // Everything queued goes now, failures included.
            self.urgent.store(false, Ordering::Release);
        }
        let mut left = self.batch.lock().map_or(0, |b| b.len());
        // Bounded: the buffer is capped, and each round takes up to a batch.
        while left > 0 {
            if self.is_down() {
                return;
            }
            let now = self.clock.now();
            let chunk: Vec<BatchItem> = match self.batch.lock() {
                Ok(mut batch) if !batch.is_empty() && (all || left >= batch_size) => {
                    let n = batch.len().min(batch_size).min(left);
                    left -= n;
                    batch
                        .drain(..n)
                        .map(|(item, queued)| item.aged(now.saturating_sub(queued)))
                        .collect()
                }
                _ => break,
            };
            let r = self.sample();
            match self.store.record_batch(&chunk, self.now_arg(), r).await {
                Ok(answer) => {
                    Stats::add(&self.stats.flushes, 1);
                    self.last_flush
                        .store(self.clock.now().as_u64(), Ordering::Release);
                    let reply = self.absorb(answer, false, Some(r));
                    if let ReplyDecision::Batch(codes) = reply.decision {
                        for (item, recorded) in chunk.iter().zip(codes) {
                            if !recorded && matches!(item, BatchItem::Outcome(_)) {
                                self.stale(item.generation());
                            }
                        }
                    }
                }
                Err(error) => {
                    Stats::add(&self.stats.dropped_outcomes, chunk.len() as u64);
                    self.enter_outage(&error);
                    return;
                }
            }
        }
        // Failures that arrived meanwhile keep the node suspect until the next flush.
        if all && !self.urgent.load(Ordering::Acquire) {
            self.unsuspect();
        }
    }

    /// Re-reads the shared state (authoritatively) when asked to (a message, news of
    /// another incarnation) or when no news was accepted for `every`: refused news (older
    /// versions, replies of a state Redis lost) never counts, so nothing starves this.
    async fn refresh_if_due(&self, every: Duration) {
        let every = if self.quiet() {
            every.saturating_mul(QUIET_REFRESH)
        } else {
            every
        };
        let asked = self.refresh_requested.swap(false, Ordering::AcqRel);
        let last = Nanos(self.last_news.load(Ordering::Acquire));
        if !asked && self.clock.now().saturating_sub(last) < Nanos::from_duration(every) {
            return;
        }
        self.refresh().await;
    }

    /// A view of a node's breaker that only a message can change: the node's subscription
    /// is up (a trip, a warm streak, a manual switch is announced; a lost subscription
    /// asks every breaker to re-read when it is back), and the view is closed, not warm,
    /// not ramping and not alerted. Its periodic re-read waits [`QUIET_REFRESH`] times
    /// longer: at thousands of breakers, one read per breaker per second would be most of
    /// the node's script calls.
    fn quiet(&self) -> bool {
        if !self.node.as_ref().is_some_and(|n| n.subscription_live()) {
            return false;
        }
        let view = self.view();
        view.known
            && view.phase == Phase::Closed
            && !view.warm
            && view.until.is_none()
            && self.alerted.load(Ordering::Acquire) == 0
    }

    /// Whether this breaker's queued successes may wait [`QUIET_FLUSH`] flush intervals
    /// (its node sends them; see `node/flush.rs`) rather than one: the view is quiet, and
    /// the config trips on consecutive failures alone, from 3 on. Then a success counts
    /// toward no rate and no `min_calls` (there is no window): it only ends a failure
    /// streak, and a streak that could trip is announced on the channel before it can
    /// (from 2 failures, or half the threshold), which sends what this node queued at
    /// once (`on_message`); failures and slow calls are sent at once as always. With a
    /// rate rule, successes are the denominator of the rate and count toward
    /// `min_calls` (rules 3 and 6): they keep the flush interval.
    pub(crate) fn successes_may_wait(&self) -> bool {
        self.config.rate.is_none()
            && self.config.consecutive_failures.is_some_and(|n| n >= 3)
            && self.quiet()
    }

    /// One authoritative read: repairs a corrupt value, gives back what Redis lost, adopts
    /// Redis's state.
    pub(crate) async fn refresh(&self) {
        let alerted = self.alerted.load(Ordering::Acquire);
        // The view as the read is sent: a reply absorbed after it is newer than the read.
        let since = self.view.writes();
        let result = match self.read_authoritative().await {
            Ok(read) => self.adopt(read, since).await,
            Err(error) => Err(error),
        };
        // What Redis holds is now the view: an alert this read answers is over (one that
        // came meanwhile waits for the re-read it asked for).
        let _ = self
            .alerted
            .compare_exchange(alerted, 0, Ordering::AcqRel, Ordering::Acquire);
        if let Err(error) = result {
            self.enter_outage(&error);
        }
    }

    /// Reads the stored state for this node's own use (a corrupt value is repaired and
    /// reported).
    async fn read_authoritative(&self) -> Result<crate::wire::Reply, crate::store::StoreError> {
        let alerted = self.alerted.load(Ordering::Acquire) != 0;
        let mut repaired = None;
        // On one server a node's reads go many per script call (`node/read.rs`), except
        // one that a message asked for (it may be a trip): it goes at once, alone.
        if let Some(node) = self
            .node
            .as_ref()
            .filter(|n| !alerted && n.batches_flushes())
        {
            let part = self.store.refresh_part(self.now_arg());
            match node.read(part, self.store.timeout()).await {
                // The call repaired a corrupt value and read nothing: read again alone
                // (the repair is reported once, below).
                Ok(Reply {
                    decision: ReplyDecision::Repaired(why),
                    ..
                }) => repaired = Some(why),
                Ok(reply) => {
                    Stats::add(&self.stats.redis_calls, 1);
                    return Ok(reply);
                }
                // A health check: Redis is still away.
                Err(error) if self.is_down() => return Err(error),
                // One call failed for many breakers at once (one slow answer, a stalled
                // process): before this one starts an outage, it reads alone.
                Err(_) => {}
            }
        }
        // A node's breakers take turns (see `RedisNode::read_slot`), except a read that
        // a message asked for (it may be a trip): it goes ahead of a queue of first reads.
        let _slot = match &self.node {
            Some(node) if self.alerted.load(Ordering::Acquire) == 0 => node.read_slot().await,
            _ => None,
        };
        let answer = self.store.refresh(self.now_arg()).await?;
        Stats::add(&self.stats.redis_calls, 1);
        self.report_repair(repaired.or(answer.repaired));
        Ok(answer.reply)
    }

    fn report_repair(&self, repaired: Option<String>) {
        if let Some(reason) = repaired {
            Stats::add(&self.stats.repairs, 1);
            self.emit(EventKind::CorruptStateRepaired { reason });
        }
    }

    /// Gives back the probe slots of reservations this node may hold without knowing it.
    async fn cancel_orphans(&self) {
        let tokens: Vec<u64> = match self.orphans.lock() {
            Ok(mut orphans) if !orphans.is_empty() => orphans.drain(..).collect(),
            _ => return,
        };
        for (i, token) in tokens.iter().enumerate() {
            match self.store.cancel(*token, self.now_arg(), 0.0).await {
                Ok(answer) => {
                    self.absorb(answer, false, None);
                }
                Err(error) => {
                    for token in &tokens[i..] {
                        self.orphan(*token);
                    }
                    self.enter_outage(&error);
                    return;
                }
            }
        }
    }

    /// One health check during an outage; `true` when the episode is over.
    async fn health_check(&self) -> bool {
        match self.read_authoritative().await {
            Ok(read) => self.resync(read).await.is_ok(),
            Err(_) => false,
        }
    }

    /// A message on the breaker's channel:
    /// `phase,generation,remaining_us,now_us,version,incarnation[,warm]`. A message is
    /// only a hint: news newer than the view (or of another incarnation) triggers an
    /// authoritative re-read, so a forged or stale message cannot move the view to a
    /// state Redis does not hold; until that read answers, acquires ask Redis (the
    /// message may say the breaker tripped, or is about to).
    pub(crate) fn on_message(&self, payload: &str) {
        let fields: Vec<&str> = payload.split(',').collect();
        let number = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
        let (Some(version), Some(incarnation)) = (number(4), number(5)) else {
            return;
        };
        let view = self.view();
        if view.known && view.incarnation == incarnation && version <= view.version {
            return;
        }
        let alert = if view.incarnation == incarnation {
            version
        } else {
            u64::MAX
        };
        self.alerted.fetch_max(alert, Ordering::AcqRel);
        // What this node queued goes now: one of its successes may end the streak the
        // message may announce (rule 19 keeps one that completed before the streak began
        // from ending it), and a quiet view's successes may have waited several flush
        // intervals (`successes_may_wait`).
        if self.batch.lock().is_ok_and(|b| !b.is_empty()) {
            self.flush_soon();
        }
        self.request_refresh();
    }
}

/// The main loop: flushes and refreshes (local-view mode), health checks with backoff
/// during an outage. Ends when the breaker is dropped. The flush cadence is read from the
/// breaker's [`Clock`] (as the refresh cadence is); tokio only sleeps.
pub(crate) async fn run<C: Clock + Clone>(weak: Weak<Inner<C>>, wake: Arc<Notify>) {
    let mut delay: Option<Duration> = None;
    // When the last flush was, by the breaker's clock (the loop's start before the first).
    let mut last_flush = match weak.upgrade() {
        Some(inner) => inner.clock.now(),
        None => return,
    };
    loop {
        let Some(inner) = weak.upgrade() else {
            return;
        };
        // This handle is the loop's, not a user's: a registry may still evict the breaker.
        inner.loop_handles.fetch_add(1, Ordering::AcqRel);
        let wait = if inner.is_down() {
            if inner.health_check().await {
                delay = None;
                inner.cancel_orphans().await;
                inner.flush().await;
                last_flush = inner.clock.now();
                Duration::ZERO
            } else {
                let next = match delay {
                    None => inner.backoff.min,
                    Some(d) => (d * 2).min(inner.backoff.max),
                };
                delay = Some(next);
                next
            }
        } else {
            inner.cancel_orphans().await;
            match inner.mode {
                Mode::LocalView(view) => {
                    let full = inner.batch.lock().map_or(0, |b| b.len()) >= view.batch_size;
                    let urgent = inner.urgent.load(Ordering::Acquire);
                    let since = inner.clock.now().saturating_sub(last_flush).as_duration();
                    // A node breaker's periodic flush is its node's (`node/flush.rs`).
                    let periodic = !inner.node_flush && since >= view.flush_interval;
                    if periodic || (urgent && since >= view.failure_flush_interval) {
                        inner.flush().await;
                        last_flush = inner.clock.now();
                    } else if full {
                        // A full batch counts as the interval's flush: one per interval at
                        // a rate that fills a batch per interval, not two.
                        inner.flush_batches(false).await;
                        last_flush = inner.clock.now();
                    }
                    inner.refresh_if_due(view.refresh_interval).await;
                    let since = inner.clock.now().saturating_sub(last_flush).as_duration();
                    let mut next = if inner.node_flush {
                        Duration::MAX
                    } else {
                        view.flush_interval.saturating_sub(since)
                    };
                    if inner.urgent.load(Ordering::Acquire) {
                        next = next.min(view.failure_flush_interval.saturating_sub(since));
                    }
                    // A quiet view sleeps until its stretched refresh (a message, an
                    // urgent outcome, a full batch or a new subscription wakes it).
                    let refresh = if inner.quiet() {
                        view.refresh_interval.saturating_mul(QUIET_REFRESH)
                    } else {
                        view.refresh_interval
                    };
                    next.min(refresh).max(Duration::from_millis(1))
                }
                Mode::Strict => {
                    // Strict mode decides nothing from the view; a refresh only serves
                    // messages (repairs, restores) and keeps `phase` current.
                    inner.refresh_if_due(Duration::from_secs(1)).await;
                    Duration::from_secs(1)
                }
            }
        };
        inner.loop_handles.fetch_sub(1, Ordering::AcqRel);
        drop(inner);
        if wait.is_zero() {
            continue;
        }
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = wake.notified() => {}
        }
    }
}
