//! Spreading connections evenly over the worker threads. Each worker accepts on its own
//! SO_REUSEPORT socket, and the kernel picks the socket by a hash of the client's
//! address: 32 keep-alive connections often land 20 on one worker and 12 on the other,
//! and the busier worker then holds up its clients while the other has time to spare
//! (with wrk's 32 connections on 2 workers, runs split 12/20 were up to 40 % slower than
//! runs split 16/16). A worker that accepts a connection while another serves fewer
//! hands it over, as HAProxy hands connections to its least loaded thread. Only new
//! connections move; one costs a deregistration and a registration.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, OwnedSemaphorePermit};

/// A connection handed from the worker that accepted it to the one that serves it.
pub struct Handoff {
    /// The client's socket, out of the accepting worker's runtime.
    pub stream: std::net::TcpStream,
    /// The client's address.
    pub peer: SocketAddr,
    /// The connection's place under `max_connections`, if limited.
    pub permit: Option<OwnedSemaphorePermit>,
    /// The connection counted against the serving worker.
    pub load: Load,
}

/// One connection counted against the worker serving it, until dropped.
pub struct Load {
    counts: Arc<[AtomicUsize]>,
    worker: usize,
}

impl Drop for Load {
    fn drop(&mut self) {
        self.counts[self.worker].fetch_sub(1, Ordering::AcqRel);
    }
}

/// One worker's side of the spreading: every worker's count of connections, the other
/// workers' inboxes, and its own.
pub struct Balance {
    me: usize,
    counts: Arc<[AtomicUsize]>,
    inboxes: Arc<[mpsc::UnboundedSender<Handoff>]>,
    inbox: mpsc::UnboundedReceiver<Handoff>,
}

/// Where a newly accepted connection goes.
pub enum Target {
    /// This worker serves it.
    Here(Load),
    /// Another worker does: send it there with [`Balance::hand_over`].
    There(Load),
}

impl Balance {
    /// One `Balance` per worker, for `workers` workers.
    pub fn workers(workers: usize) -> Vec<Balance> {
        let counts: Arc<[AtomicUsize]> = (0..workers).map(|_| AtomicUsize::new(0)).collect();
        let (senders, receivers): (Vec<_>, Vec<_>) =
            (0..workers).map(|_| mpsc::unbounded_channel()).unzip();
        let inboxes: Arc<[mpsc::UnboundedSender<Handoff>]> = senders.into();
        receivers
            .into_iter()
            .enumerate()
            .map(|(me, inbox)| Balance {
                me,
                counts: counts.clone(),
                inboxes: inboxes.clone(),
                inbox,
            })
            .collect()
    }

    /// Picks the worker for a connection this one accepted: this one, unless another
    /// serves fewer. The connection counts against the chosen worker from now on.
    pub fn pick(&self) -> Target {
        let mut best = self.me;
        let mut fewest = self.counts[self.me].load(Ordering::Acquire);
        for (i, count) in self.counts.iter().enumerate() {
            let count = count.load(Ordering::Acquire);
            if count < fewest {
                best = i;
                fewest = count;
            }
        }
        self.counts[best].fetch_add(1, Ordering::AcqRel);
        let load = Load {
            counts: self.counts.clone(),
            worker: best,
        };
        if best == self.me {
            Target::Here(load)
        } else {
            Target::There(load)
        }
    }

    /// Sends an accepted connection to the worker `handoff.load` counts it against
    /// (closed if that worker has stopped).
    pub fn hand_over(&self, handoff: Handoff) {
        if let Some(inbox) = self.inboxes.get(handoff.load.worker) {
            let _ = inbox.send(handoff);
        }
    }

    /// The next connection another worker handed to this one.
    pub async fn received(&mut self) -> Option<Handoff> {
        self.inbox.recv().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_go_to_the_worker_serving_fewest_and_stay_counted_until_dropped() {
        let workers = Balance::workers(2);
        let mut held = Vec::new();
        for _ in 0..4 {
            match workers[0].pick() {
                Target::Here(load) | Target::There(load) => held.push(load),
            }
        }
        let on = |w: usize| held.iter().filter(|l| l.worker == w).count();
        assert_eq!((on(0), on(1)), (2, 2));
        held.retain(|l| l.worker == 0);
        assert!(matches!(workers[0].pick(), Target::There(_)));
    }
}
