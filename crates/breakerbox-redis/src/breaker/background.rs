//! The tasks behind a breaker: flushing batches, refreshing the view, checking Redis's
//! health during an outage, and listening to the breaker's channel.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use breakerbox::{Clock, Nanos, Phase};
use futures_util::StreamExt;
use tokio::sync::{oneshot, Notify};
use tokio::time::Instant;

use super::Inner;
use crate::events::{RedisEvent, Stats};
use crate::options::{LocalView, Mode};
use crate::store::OutcomeArg;
use crate::wire::ReplyDecision;

impl<C: Clock + Clone> Inner<C> {
    /// Sends the queued outcomes, a batch at a time.
    pub(crate) async fn flush(&self) {
        self.flush_batches(true).await
    }

    /// Sends full batches only (`all == false`: a batch filled up; the rest waits for
    /// the interval), or everything.
    pub(crate) async fn flush_batches(&self, all: bool) {
        let Mode::LocalView(LocalView { batch_size, .. }) = self.mode else {
            return;
        };
        self.urgent.store(false, Ordering::Release);
        // Bounded: the buffer is capped, and each round takes up to a batch.
        for _ in 0..64 {
            if self.is_down() {
                return;
            }
            let chunk: Vec<OutcomeArg> = match self.batch.lock() {
                Ok(mut batch) if !batch.is_empty() && (all || batch.len() >= batch_size) => {
                    let n = batch.len().min(batch_size.max(1));
                    batch.drain(..n).collect()
                }
                _ => return,
            };
            match self
                .store
                .record(&chunk, self.now_arg(), self.sample())
                .await
            {
                Ok(answer) => {
                    Stats::add(&self.stats.flushes, 1);
                    let reply = self.absorb(answer, false);
                    if let ReplyDecision::Batch(codes) = reply.decision {
                        for (outcome, recorded) in chunk.iter().zip(codes) {
                            if !recorded {
                                self.stale(outcome.generation);
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
    }

    /// Re-reads the shared state when nothing has been heard for `every`.
    async fn refresh_if_quiet(&self, every: Duration) {
        let last = Nanos(self.last_news.load(Ordering::Acquire));
        if self.clock.now().saturating_sub(last) < Nanos::from_duration(every) {
            return;
        }
        match self.store.read(self.now_arg()).await {
            Ok(answer) => {
                self.absorb(answer, true);
            }
            Err(error) => self.enter_outage(&error),
        }
    }

    /// One health check during an outage; `true` when the episode is over.
    async fn health_check(&self) -> bool {
        match self.store.read(self.now_arg()).await {
            Ok(answer) => {
                Stats::add(&self.stats.redis_calls, 1);
                if let Some(reason) = answer.repaired {
                    Stats::add(&self.stats.repairs, 1);
                    self.emit(RedisEvent::CorruptRepaired { reason });
                }
                self.resync(answer.reply).await.is_ok()
            }
            Err(_) => false,
        }
    }

    /// A message on the breaker's channel: `phase,generation,remaining_us,now_us`
    /// (remaining -1: never).
    pub(crate) fn on_message(&self, payload: &str) {
        let mut parts = payload.split(',');
        let phase = parts.next().and_then(|p| p.parse::<u8>().ok());
        let generation = parts.next().and_then(|g| g.parse::<u64>().ok());
        let left = parts.next().and_then(|l| l.parse::<i64>().ok());
        let as_of = parts.next().and_then(|t| t.parse::<u64>().ok());
        let (Some(phase), Some(generation), Some(left), Some(as_of)) =
            (phase, generation, left, as_of)
        else {
            return;
        };
        let phase = match phase {
            0 => Phase::Closed,
            1 => Phase::Open,
            2 => Phase::HalfOpen,
            3 => Phase::ForcedOpen,
            4 => Phase::Disabled,
            _ => return,
        };
        let remaining = u64::try_from(left).ok();
        let now = self.clock.now();
        self.last_news.store(now.as_u64(), Ordering::Release);
        self.set_view(|v| v.merge(phase, generation, remaining, (as_of, now), false));
    }
}

/// The main loop: flushes and refreshes (local-view mode), health checks with backoff
/// during an outage. Ends when the breaker is dropped. Scheduling uses tokio's clock.
pub(crate) async fn run<C: Clock + Clone>(weak: Weak<Inner<C>>, wake: Arc<Notify>) {
    let mut delay: Option<Duration> = None;
    let mut last_flush = Instant::now();
    loop {
        let Some(inner) = weak.upgrade() else {
            return;
        };
        let wait = if inner.is_down() {
            if inner.health_check().await {
                delay = None;
                inner.flush().await;
                last_flush = Instant::now();
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
            match inner.mode {
                Mode::LocalView(view) => {
                    let full = inner.batch.lock().map_or(0, |b| b.len()) >= view.batch_size;
                    let urgent = inner.urgent.load(Ordering::Acquire);
                    let since = last_flush.elapsed();
                    if since >= view.flush_interval
                        || (urgent && since >= view.failure_flush_interval)
                    {
                        inner.flush().await;
                        last_flush = Instant::now();
                    } else if full {
                        inner.flush_batches(false).await;
                    }
                    inner.refresh_if_quiet(view.refresh_interval).await;
                    let since = last_flush.elapsed();
                    let mut next = view.flush_interval.saturating_sub(since);
                    if inner.urgent.load(Ordering::Acquire) {
                        next = next.min(view.failure_flush_interval.saturating_sub(since));
                    }
                    next.min(view.refresh_interval)
                        .max(Duration::from_millis(1))
                }
                Mode::Strict => Duration::from_secs(1),
            }
        };
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

/// Listens to the breaker's channel, reconnecting with backoff. Signals `ready` once
/// subscribed the first time.
pub(crate) async fn listen<C: Clock + Clone>(
    weak: Weak<Inner<C>>,
    mut ready: Option<oneshot::Sender<()>>,
) {
    let mut delay: Option<Duration> = None;
    loop {
        let Some((client, channel, timeout, backoff)) = weak.upgrade().map(|inner| {
            (
                inner.store.client().clone(),
                inner.store.channel().to_string(),
                inner.store.timeout().max(Duration::from_millis(500)),
                inner.backoff,
            )
        }) else {
            return;
        };
        if let Ok(Ok(mut pubsub)) = tokio::time::timeout(timeout, client.get_async_pubsub()).await {
            if let Ok(Ok(())) = tokio::time::timeout(timeout, pubsub.subscribe(&channel)).await {
                if let Some(tx) = ready.take() {
                    let _ = tx.send(());
                }
                delay = None;
                let mut stream = pubsub.into_on_message();
                loop {
                    tokio::select! {
                        message = stream.next() => match message {
                            Some(message) => {
                                let Some(inner) = weak.upgrade() else { return };
                                if let Ok(payload) = message.get_payload::<String>() {
                                    inner.on_message(&payload);
                                }
                            }
                            None => break,
                        },
                        _ = tokio::time::sleep(Duration::from_millis(500)) => {
                            if weak.strong_count() == 0 {
                                return;
                            }
                        }
                    }
                }
            }
        }
        let next = match delay {
            None => backoff.min,
            Some(d) => (d * 2).min(backoff.max),
        };
        delay = Some(next);
        tokio::time::sleep(next).await;
    }
}
