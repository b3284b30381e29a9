//! A breaker's side of its node's periodic flushes (`node/flush.rs`): handing over a due
//! batch, and taking in the answer as its own flush would.

use std::sync::atomic::Ordering;
use std::time::Duration;

use breakerbox::{Clock, Nanos};

use super::background::QUIET_FLUSH;
use super::Inner;
use crate::events::Stats;
use crate::node::{NodeFlush, Taken};
use crate::options::{LocalView, Mode};
use crate::store::{Answer, BatchItem, Part, StoreError};
use crate::wire::{Reply, ReplyDecision};

impl<C: Clock + Clone> NodeFlush for Inner<C> {
    fn take(&self, half: bool) -> Option<(Part, Taken)> {
        let Mode::LocalView(LocalView {
            flush_interval,
            batch_size,
            ..
        }) = self.mode
        else {
            return None;
        };
        // A failure waits: the breaker sends it (and what is queued before it) itself.
        if self.is_down() || self.urgent.load(Ordering::Acquire) {
            return None;
        }
        let now = self.clock.now();
        let interval = if self.successes_may_wait() {
            flush_interval.saturating_mul(QUIET_FLUSH)
        } else {
            flush_interval
        };
        let due = if half { interval / 2 } else { interval };
        let since = now.saturating_sub(Nanos(self.last_flush.load(Ordering::Acquire)));
        if since < Nanos::from_duration(due) || self.batch.lock().map_or(true, |b| b.is_empty()) {
            return None;
        }
        let lock = self.flush_lock.clone().try_lock_owned().ok()?;
        let items: Vec<(BatchItem, Nanos)> = match self.batch.lock() {
            Ok(mut batch) => {
                let n = batch.len().min(batch_size.max(1));
                batch.drain(..n).collect()
            }
            Err(_) => return None,
        };
        if items.is_empty() {
            return None;
        }
        let sent: Vec<BatchItem> = items
            .iter()
            .map(|(item, queued)| item.aged(now.saturating_sub(*queued)))
            .collect();
        let r = self.sample();
        let part = Part {
            key: self.store.key().to_string(),
            args: self.store.record_args(&sent, self.now_arg(), r),
        };
        Some((
            part,
            Taken {
                items,
                sent,
                r,
                lock,
            },
        ))
    }

    fn settle(&self, taken: Taken, answer: Result<Reply, StoreError>) {
        let Taken {
            items,
            sent,
            r,
            lock,
        } = taken;
        self.last_flush
            .store(self.clock.now().as_u64(), Ordering::Release);
        match answer {
            Ok(reply) => {
                if let ReplyDecision::Repaired(why) = &reply.decision {
                    // The repair applied nothing (as for record.lua's own caller): the
                    // entries go again, at the front, through the breaker's own flush.
                    let repaired = Some(why.clone());
                    self.absorb(Answer { reply, repaired }, false, Some(r));
                    if let Ok(mut batch) = self.batch.lock() {
                        batch.splice(0..0, items);
                    }
                    drop(lock);
                    self.flush_soon();
                    return;
                }
                Stats::add(&self.stats.flushes, 1);
                let answer = Answer {
                    reply,
                    repaired: None,
                };
                let reply = self.absorb(answer, false, Some(r));
                if let ReplyDecision::Batch(codes) = reply.decision {
                    for (item, recorded) in sent.iter().zip(codes) {
                        if !recorded && matches!(item, BatchItem::Outcome(_)) {
                            self.stale(item.generation());
                        }
                    }
                }
                if !self.urgent.load(Ordering::Acquire) {
                    self.unsuspect();
                }
            }
            Err(error) => {
                Stats::add(&self.stats.dropped_outcomes, sent.len() as u64);
                self.enter_outage(&error);
            }
        }
    }

    fn timeout(&self) -> Duration {
        self.store.timeout()
    }
}
