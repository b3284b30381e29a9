//! The running config, replaced whole by a reload. A request reads it without a lock:
//! each worker thread keeps its own [`Worker`] over the config it last saw, and one
//! atomic load per request tells it whether a newer one was published (then, once per
//! reload and thread, it takes the lock and builds its worker over the new config,
//! keeping the idle connections it may). A request keeps the config it started with to
//! its end, so a reload never changes a request half-way: a removed upstream finishes
//! its requests in flight (it drains) and is freed with the last of them.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

use super::draining::Draining;
use super::forward::{Proxy, Worker};

/// The config every new request uses, and the reloads counted so far.
pub struct Live {
    /// Incremented (under the lock) each time `current` is replaced.
    generation: AtomicU64,
    current: Mutex<Arc<Proxy>>,
    /// Tells the worker threads that a new config is out (so an idle one lets go of
    /// the old config at once, not at its next request).
    published: watch::Sender<u64>,
    /// Reloads applied, and reloads refused.
    reloads: [AtomicU64; 2],
    /// The removed upstreams of replaced configs that requests still hold.
    pub draining: Draining,
}

impl Live {
    /// The running config `proxy`, generation 0.
    pub fn new(proxy: Arc<Proxy>) -> Live {
        Live {
            generation: AtomicU64::new(0),
            current: Mutex::new(proxy),
            published: watch::Sender::new(0),
            reloads: [AtomicU64::new(0), AtomicU64::new(0)],
            draining: Draining::default(),
        }
    }

    /// The config new requests use now.
    pub fn current(&self) -> Arc<Proxy> {
        self.snapshot().1
    }

    /// The generation of the config new requests use (0 at start, +1 per reload).
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The current config and its generation, read together.
    fn snapshot(&self) -> (u64, Arc<Proxy>) {
        let current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        (self.generation.load(Ordering::Acquire), current.clone())
    }

    /// Makes `proxy` the config of every request that starts from now on; returns its
    /// generation.
    pub fn publish(&self, proxy: Arc<Proxy>) -> u64 {
        let (generation, old) = {
            let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
            let old = std::mem::replace(&mut *current, proxy);
            (self.generation.fetch_add(1, Ordering::AcqRel) + 1, old)
        };
        // Dropped outside the lock: this may be the old config's last reference.
        drop(old);
        self.published.send_replace(generation);
        generation
    }

    /// A receiver told of every config published from now on (its generation).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.published.subscribe()
    }

    /// Counts a reload: applied (`ok`) or refused.
    pub fn count_reload(&self, ok: bool) {
        self.reloads[usize::from(!ok)].fetch_add(1, Ordering::Relaxed);
    }

    /// Reloads so far: `[applied, refused]`.
    pub fn reloads(&self) -> [u64; 2] {
        [
            self.reloads[0].load(Ordering::Relaxed),
            self.reloads[1].load(Ordering::Relaxed),
        ]
    }
}

thread_local! {
    /// This worker thread's worker, with the generation of the config it is over.
    static WORKER: RefCell<Option<(u64, Arc<Worker>)>> = const { RefCell::new(None) };
}

/// A worker thread's handler: it finds the thread's worker over the current config.
pub struct Station {
    live: Arc<Live>,
}

impl Station {
    /// The handler of the calling worker thread over `live`; it also builds the thread's
    /// first worker (so the first request does not).
    pub fn new(live: Arc<Live>) -> Station {
        let station = Station { live };
        drop(station.worker());
        station
    }

    /// The calling thread's worker over the current config: one atomic load when no
    /// reload happened since this thread last looked.
    #[inline]
    pub fn worker(&self) -> Arc<Worker> {
        let generation = self.live.generation();
        WORKER.with(|slot| {
            let mut slot = slot.borrow_mut();
            if let Some((seen, worker)) = slot.as_ref() {
                if *seen == generation {
                    return worker.clone();
                }
            }
            let (generation, proxy) = self.live.snapshot();
            let worker = Arc::new(match slot.as_ref() {
                Some((_, old)) => old.renew(proxy),
                None => Worker::new(proxy),
            });
            *slot = Some((generation, worker.clone()));
            worker
        })
    }

    /// Follows the published configs on this thread until the sender is gone, so a
    /// thread that serves no request lets go of the old config at once (its removed
    /// upstreams' pools and breakers are freed when their last request ends). Run it as
    /// a task of the worker thread's runtime.
    pub async fn follow(self: Arc<Self>) {
        let mut published = self.live.published.subscribe();
        while published.changed().await.is_ok() {
            drop(self.worker());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::config::Limits;
    use crate::proxy::metrics::Recorder;

    fn proxy() -> Arc<Proxy> {
        Arc::new(Proxy::new(
            Vec::new(),
            Arc::new(Recorder::new([])),
            Limits::default(),
        ))
    }

    #[test]
    fn a_worker_takes_a_published_config_at_once_and_lets_the_old_one_go() {
        let first = proxy();
        let old = Arc::downgrade(&first);
        let live = Arc::new(Live::new(first));
        let station = Station::new(live.clone());
        let worker = station.worker();
        assert!(Arc::ptr_eq(&worker.proxy, &old.upgrade().unwrap()));
        assert!(
            Arc::ptr_eq(&worker, &station.worker()),
            "a new worker without a reload"
        );
        drop(worker);

        let second = proxy();
        assert_eq!(live.publish(second.clone()), 1);
        assert_eq!(live.generation(), 1);
        assert!(Arc::ptr_eq(&station.worker().proxy, &second));
        assert_eq!(old.strong_count(), 0, "the replaced config is still held");
        assert!(Arc::ptr_eq(&live.current(), &second));
    }

    #[test]
    fn reloads_are_counted_by_result() {
        let live = Live::new(proxy());
        live.count_reload(true);
        live.count_reload(false);
        live.count_reload(false);
        assert_eq!(live.reloads(), [1, 2]);
    }
}
