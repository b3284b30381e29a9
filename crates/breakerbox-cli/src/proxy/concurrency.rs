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

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

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

/// One upstream's places, shared by every worker thread.
#[derive(Debug)]
pub struct Limit {
    places: Arc<Semaphore>,
    pending: AtomicUsize,
    config: ConcurrencyConfig,
}

/// A place with the upstream, given back when dropped.
#[derive(Debug)]
pub struct InFlight {
    _place: OwnedSemaphorePermit,
}

/// Takes a place in the queue back when the wait ends, however it ends (a request whose
/// client goes away is dropped while waiting).
struct Queued<'a>(&'a AtomicUsize);

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Limit {
    /// The places of an upstream configured with `config`.
    pub fn new(config: ConcurrencyConfig) -> Limit {
        Limit {
            places: Arc::new(Semaphore::new(config.max_in_flight)),
            pending: AtomicUsize::new(0),
            config,
        }
    }

    /// A place with the upstream: at once when one is free, after a wait of at most
    /// `pending_timeout` when the queue has room, else `Err` at once.
    pub async fn admit(&self) -> Result<InFlight, Overloaded> {
        if let Ok(place) = self.places.clone().try_acquire_owned() {
            return Ok(InFlight { _place: place });
        }
        // Reserve a place in the queue; never more than `max_pending` waiters.
        let queued = self
            .pending
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.config.max_pending).then_some(n + 1)
            });
        if queued.is_err() {
            return Err(Overloaded::Full);
        }
        let _queued = Queued(&self.pending);
        match tokio::time::timeout(
            self.config.pending_timeout,
            self.places.clone().acquire_owned(),
        )
        .await
        {
            Ok(Ok(place)) => Ok(InFlight { _place: place }),
            // The semaphore is never closed; a timeout is the only other way out.
            Ok(Err(_)) | Err(_) => Err(Overloaded::Waited),
        }
    }

    /// Requests with the upstream now.
    pub fn in_flight(&self) -> usize {
        self.config
            .max_in_flight
            .saturating_sub(self.places.available_permits())
    }

    /// Requests waiting for a place now.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    /// The configured limits.
    pub fn config(&self) -> ConcurrencyConfig {
        self.config
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
        let started = tokio::time::Instant::now();
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
}
