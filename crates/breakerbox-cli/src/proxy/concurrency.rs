//! Concurrency limits per upstream (what Envoy and Istio call circuit breaking, beside
//! the breaker): at most `max_in_flight` requests are with the upstream at once, at most
//! `max_pending` more wait for one of their places (each for at most `pending_timeout`),
//! and every other request is answered 503 `overloaded` at once. An overloaded request
//! never reaches the breaker: it is neither a call nor a failure, and it takes no probe
//! slot, so a burst of clients cannot trip a healthy upstream's breaker or starve its
//! probes; it is counted apart.
//!
//! A place is taken before the breaker is asked and held until the upstream's share of
//! the exchange is over (its response body relayed to the end, or the exchange failed):
//! a slow upstream holds at most `max_in_flight + max_pending` of the proxy's requests
//! (and of its client connections), however many clients it has.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;

/// The limits of one upstream, as configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConcurrencyConfig {
    /// Requests with the upstream at once.
    pub max_in_flight: usize,
    /// Requests that may wait for a place (0: none wait).
    pub max_pending: usize,
    /// How long a waiting request waits for a place before it is answered 503.
    pub pending_timeout: Duration,
}

/// The default `pending_timeout`: a queue is for smoothing bursts, not for holding
/// requests as long as the upstream itself may take.
pub const DEFAULT_PENDING_TIMEOUT: Duration = Duration::from_secs(1);

/// Why a request was not let through to the upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overloaded {
    /// Every place was taken and so was every place in the queue.
    Full,
    /// It waited `pending_timeout` in the queue without getting a place.
    Waited,
}

impl Overloaded {
    /// The reason given to the client and in the counters.
    pub fn reason(self) -> &'static str {
        match self {
            Overloaded::Full => "max_in_flight and max_pending reached",
            Overloaded::Waited => "no place freed within pending_timeout",
        }
    }
}

/// One upstream's places, shared by every worker thread. Clones share the places: a
/// reload that keeps the upstream keeps its `Limit` and resizes it in place
/// ([`Limit::resize`]), so requests in flight under the old limits still count.
#[derive(Clone, Debug)]
pub struct Limit {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// The free places; a taken place is forgotten and added back by [`InFlight`]'s drop.
    places: Semaphore,
    pending: AtomicUsize,
    /// Places taken beyond a lowered `max_in_flight`: the next this many places given back
    /// are dropped instead of freed.
    owed: AtomicUsize,
    max_in_flight: AtomicUsize,
    max_pending: AtomicUsize,
    pending_timeout_nanos: AtomicU64,
    /// Held by a resize (a reload), never on a request's path.
    resizing: Mutex<()>,
}

/// A place with the upstream, given back when dropped.
#[derive(Debug)]
pub struct InFlight {
    shared: Arc<Shared>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let s = &self.shared;
        let owed = s.owed.load(Ordering::Acquire) > 0
            && s.owed
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
                .is_ok();
        if !owed {
            s.places.add_permits(1);
        }
    }
}

/// Takes a place in the queue back when the wait ends, however it ends (a request whose
/// client goes away is dropped while waiting).
struct Queued<'a>(&'a AtomicUsize);

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Limit {
    /// The places of an upstream configured with `config`.
    pub fn new(config: ConcurrencyConfig) -> Limit {
        Limit {
            shared: Arc::new(Shared {
                places: Semaphore::new(config.max_in_flight),
                pending: AtomicUsize::new(0),
                owed: AtomicUsize::new(0),
                max_in_flight: AtomicUsize::new(config.max_in_flight),
                max_pending: AtomicUsize::new(config.max_pending),
                pending_timeout_nanos: AtomicU64::new(nanos(config.pending_timeout)),
                resizing: Mutex::new(()),
            }),
        }
    }

    /// A place with the upstream: at once when one is free, after a wait of at most
    /// `pending_timeout` when the queue has room, else `Err` at once.
    pub async fn admit(&self) -> Result<InFlight, Overloaded> {
        let s = &self.shared;
        if let Ok(place) = s.places.try_acquire() {
            place.forget();
            return Ok(InFlight {
                shared: self.shared.clone(),
            });
        }
        // Reserve a place in the queue; never more than `max_pending` waiters.
        let max_pending = s.max_pending.load(Ordering::Acquire);
        let queued = s
            .pending
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max_pending).then_some(n + 1)
            });
        if queued.is_err() {
            return Err(Overloaded::Full);
        }
        let _queued = Queued(&s.pending);
        let wait = Duration::from_nanos(s.pending_timeout_nanos.load(Ordering::Acquire));
        match tokio::time::timeout(wait, s.places.acquire()).await {
            Ok(Ok(place)) => {
                place.forget();
                Ok(InFlight {
                    shared: self.shared.clone(),
                })
            }
            // The semaphore is never closed; a timeout is the only other way out.
            Ok(Err(_)) | Err(_) => Err(Overloaded::Waited),
        }
    }

    /// Applies new limits in place (a reload): a raised `max_in_flight` frees places at
    /// once; a lowered one takes free places away at once and the rest as requests in
    /// flight finish, so the upstream never has more than the new limit once the old
    /// requests are done, and never more than the old one meanwhile. `max_pending` and
    /// `pending_timeout` apply to requests that start waiting from now on.
    pub fn resize(&self, config: ConcurrencyConfig) {
        let s = &self.shared;
        let _one = s.resizing.lock();
        let old = s.max_in_flight.load(Ordering::Acquire);
        let new = config.max_in_flight;
        if new > old {
            let mut add = new - old;
            // Pay back places still owed from an earlier lowering first.
            if let Ok(owed) = s
                .owed
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                    Some(n.saturating_sub(add))
                })
            {
                add -= owed.min(add);
            }
            s.places.add_permits(add);
        } else if new < old {
            let cut = old - new;
            let taken = s.places.forget_permits(cut);
            s.owed.fetch_add(cut - taken, Ordering::AcqRel);
        }
        s.max_in_flight.store(new, Ordering::Release);
        s.max_pending.store(config.max_pending, Ordering::Release);
        s.pending_timeout_nanos
            .store(nanos(config.pending_timeout), Ordering::Release);
    }

    /// Requests with the upstream now.
    pub fn in_flight(&self) -> usize {
        let s = &self.shared;
        (s.max_in_flight.load(Ordering::Acquire) + s.owed.load(Ordering::Acquire))
            .saturating_sub(s.places.available_permits())
    }

    /// Requests waiting for a place now.
    pub fn pending(&self) -> usize {
        self.shared.pending.load(Ordering::Acquire)
    }

    /// The configured limits.
    pub fn config(&self) -> ConcurrencyConfig {
        let s = &self.shared;
        ConcurrencyConfig {
            max_in_flight: s.max_in_flight.load(Ordering::Acquire),
            max_pending: s.max_pending.load(Ordering::Acquire),
            pending_timeout: Duration::from_nanos(s.pending_timeout_nanos.load(Ordering::Acquire)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(in_flight: usize, pending: usize, wait_ms: u64) -> Limit {
        Limit::new(ConcurrencyConfig {
            max_in_flight: in_flight,
            max_pending: pending,
            pending_timeout: Duration::from_millis(wait_ms),
        })
    }

    #[tokio::test(start_paused = true)]
    async fn beyond_the_places_and_the_queue_requests_are_refused_at_once() {
        let limit = limit(2, 0, 1000);
        let a = limit.admit().await.unwrap();
        let _b = limit.admit().await.unwrap();
        assert_eq!(limit.in_flight(), 2);
        assert_eq!(limit.admit().await.unwrap_err(), Overloaded::Full);
        drop(a);
        assert_eq!(limit.in_flight(), 1);
        assert!(limit.admit().await.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_request_gets_the_first_place_freed() {
        let limit = Arc::new(limit(1, 1, 1000));
        let first = limit.admit().await.unwrap();
        let waiter = tokio::spawn({
            let limit = limit.clone();
            async move { limit.admit().await.map(|_| ()) }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(limit.pending(), 1);
        // The queue is full: a third request is refused without waiting.
        assert_eq!(limit.admit().await.unwrap_err(), Overloaded::Full);
        drop(first);
        assert_eq!(waiter.await.unwrap(), Ok(()));
        assert_eq!(limit.pending(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_waits_at_most_the_pending_timeout() {
        let limit = limit(1, 4, 250);
        let _held = limit.admit().await.unwrap();
        let started = breakerbox::TokioClock::new().instant();
        assert_eq!(limit.admit().await.unwrap_err(), Overloaded::Waited);
        assert_eq!(started.elapsed(), Duration::from_millis(250));
        assert_eq!(limit.pending(), 0, "the queue place is given back");
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_dropped_early_gives_its_queue_place_back() {
        let limit = limit(1, 1, 10_000);
        let _held = limit.admit().await.unwrap();
        let waiting = tokio::time::timeout(Duration::from_millis(5), limit.admit()).await;
        assert!(waiting.is_err(), "still waiting when dropped");
        assert_eq!(limit.pending(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_raised_limit_frees_places_at_once() {
        let limit = limit(1, 0, 1000);
        let _a = limit.admit().await.unwrap();
        assert_eq!(limit.admit().await.unwrap_err(), Overloaded::Full);
        limit.resize(ConcurrencyConfig {
            max_in_flight: 3,
            max_pending: 0,
            pending_timeout: Duration::from_millis(1000),
        });
        let _b = limit.admit().await.unwrap();
        let _c = limit.admit().await.unwrap();
        assert_eq!(limit.in_flight(), 3);
        assert_eq!(limit.admit().await.unwrap_err(), Overloaded::Full);
    }

    #[tokio::test(start_paused = true)]
    async fn a_lowered_limit_counts_the_requests_in_flight_and_frees_no_place_until_below_it() {
        let limit = limit(3, 0, 1000);
        let a = limit.admit().await.unwrap();
        let b = limit.admit().await.unwrap();
        limit.resize(ConcurrencyConfig {
            max_in_flight: 1,
            max_pending: 0,
            pending_timeout: Duration::from_millis(1000),
        });
        assert_eq!(limit.in_flight(), 2);
        assert_eq!(limit.admit().await.unwrap_err(), Overloaded::Full);
        drop(a);
        assert_eq!(limit.in_flight(), 1);
        assert_eq!(
            limit.admit().await.unwrap_err(),
            Overloaded::Full,
            "one request is still in flight under a limit of one"
        );
        drop(b);
        assert_eq!(limit.in_flight(), 0);
        let _c = limit.admit().await.unwrap();
        assert_eq!(limit.admit().await.unwrap_err(), Overloaded::Full);
        // Raised again: what was owed is paid first, then places are freed.
        limit.resize(ConcurrencyConfig {
            max_in_flight: 2,
            max_pending: 0,
            pending_timeout: Duration::from_millis(1000),
        });
        let _d = limit.admit().await.unwrap();
        assert_eq!(limit.in_flight(), 2);
        assert_eq!(limit.admit().await.unwrap_err(), Overloaded::Full);
    }
}
