//! A node's reads: one task per node sends its breakers' authoritative reads (a new
//! view's first, a periodic refresh, a health check during an outage) many breakers per
//! script call (`read.lua` per key, through `lua/record_many.lua`'s driver).
//!
//! Thousands of breakers made at once each read the shared state once: one script call
//! each cost thousands of calls, and at 64 in flight the last ones timed out behind the
//! first. A health check of 10,000 breakers during an outage took 157 turns of 64
//! reads, each bounded by the timeout: about 15 s to notice Redis was back. The task
//! takes what is queued, up to [`MAX_KEYS`] breakers per call and [`CALLS_IN_FLIGHT`]
//! calls at a time. A read that a channel message asked for (it may be a trip) does not
//! queue here: the breaker sends it at once. A call that fails when the breaker is not
//! in an outage (a first read, a refresh) is not an outage yet: the breaker reads again
//! alone. On a Redis Cluster a script reaches one slot only: there every breaker reads
//! on its own.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{oneshot, Notify, Semaphore};

use crate::store::{Link, Part, StoreError};
use crate::wire::Reply;

/// Breakers per read call (as many as per flush call: `read.lua` is lighter than
/// `record.lua`).
pub(crate) const MAX_KEYS: usize = super::flush::MAX_KEYS;

/// Read calls of one node in flight at once: a health check round of 10,000 breakers
/// against a Redis that is still away takes 79 timeouts in turn, not 157. More would
/// hold the server longer at once, and one stalled answer fails every breaker of a call.
pub(crate) const CALLS_IN_FLIGHT: usize = 2;

/// One breaker's read, waiting for its call.
struct Queued {
    part: Part,
    timeout: Duration,
    answer: oneshot::Sender<Result<Reply, StoreError>>,
}

/// The reads a node's breakers queued.
#[derive(Default)]
pub(crate) struct Reads {
    queue: Mutex<Vec<Queued>>,
    wake: Notify,
}

impl Reads {
    /// Queues a read; the answer comes on the returned channel (an error if the node's
    /// task is gone).
    pub(crate) fn push(
        &self,
        part: Part,
        timeout: Duration,
    ) -> oneshot::Receiver<Result<Reply, StoreError>> {
        let (answer, rx) = oneshot::channel();
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Queued {
                part,
                timeout,
                answer,
            });
        self.wake.notify_one();
        rx
    }

    fn take(&self) -> Vec<Queued> {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        let n = queue.len().min(MAX_KEYS);
        queue.drain(..n).collect()
    }
}

/// Sends one call's reads and hands each breaker its answer.
async fn send(link: Arc<Link>, reads: Vec<Queued>) {
    let timeout = reads.iter().map(|r| r.timeout).max().unwrap_or_default();
    let mut parts = Vec::with_capacity(reads.len());
    let mut answers = Vec::with_capacity(reads.len());
    for r in reads {
        parts.push(r.part);
        answers.push(r.answer);
    }
    match link.read_many(&parts, timeout).await {
        Ok(replies) => {
            for (answer, reply) in answers.into_iter().zip(replies) {
                let _ = answer.send(reply);
            }
        }
        Err(error) => {
            for answer in answers {
                let _ = answer.send(Err(error.again()));
            }
        }
    }
}

/// The node's read task: sends what is queued, until the node is gone.
pub(crate) async fn run(shared: std::sync::Weak<super::Shared>) {
    let calls = Arc::new(Semaphore::new(CALLS_IN_FLIGHT));
    loop {
        let Some(node) = shared.upgrade() else {
            return;
        };
        let (reads, link) = (node.batched_reads.clone(), node.link.clone());
        drop(node);
        // A free call first, then what queued meanwhile: while every call is on its way,
        // the next one fills up.
        let Ok(slot) = calls.clone().acquire_owned().await else {
            return;
        };
        let batch = reads.take();
        if batch.is_empty() {
            drop(slot);
            // Woken by a push, or now and then to notice the node is gone; then the
            // pushes of the tasks woken with it land first.
            let _ = tokio::time::timeout(Duration::from_secs(1), reads.wake.notified()).await;
            tokio::task::yield_now().await;
            continue;
        }
        tokio::spawn(async move {
            send(link, batch).await;
            drop(slot);
        });
    }
}
