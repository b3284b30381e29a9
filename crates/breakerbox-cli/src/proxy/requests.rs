//! The requests of one client connection: how many are in flight, and whether the
//! connection has gone without any (none in flight, none starting or ending) for a
//! stretch of time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The requests of one connection, counted as they start and end.
#[derive(Debug, Default)]
pub struct Requests {
    started: AtomicUsize,
    ended: AtomicUsize,
}

impl Requests {
    /// A connection's counts, none started yet.
    pub fn new() -> Arc<Requests> {
        Arc::new(Requests::default())
    }

    /// Requests started and not yet ended.
    pub fn in_flight(&self) -> usize {
        let (started, ended) = self.reading();
        started.saturating_sub(ended)
    }

    /// Both counts (started, ended), to tell whether anything happened between two
    /// readings. Ended is read first: a request that ends between the two reads is still
    /// counted in flight, so the count is never below the truth.
    fn reading(&self) -> (usize, usize) {
        let ended = self.ended.load(Ordering::Acquire);
        (self.started.load(Ordering::Acquire), ended)
    }

    /// Returns once the connection has had no request in flight, and none has started
    /// or ended, for `idle`: between `idle` and 1.25 times it after the last request
    /// ended (it looks every quarter of `idle`, a timer, not a clock read per request).
    pub async fn idle_for(&self, idle: Duration) {
        let step = (idle / QUIET_STEPS).max(Duration::from_millis(1));
        let mut last = self.reading();
        let mut quiet = 0;
        loop {
            tokio::time::sleep(step).await;
            let now = self.reading();
            if now == last && now.0 == now.1 {
                quiet += 1;
                if quiet >= QUIET_STEPS {
                    return;
                }
            } else {
                quiet = 0;
                last = now;
            }
        }
    }
}

/// How many looks in a row must find nothing changed.
const QUIET_STEPS: u32 = 4;

/// One request in flight on a connection, from its head until its response body has
/// been written or dropped.
#[derive(Debug)]
pub struct Active(Arc<Requests>);

impl Active {
    /// Counts a request starting on the connection of `requests`.
    pub fn new(requests: &Arc<Requests>) -> Active {
        requests.started.fetch_add(1, Ordering::AcqRel);
        Active(requests.clone())
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        self.0.ended.fetch_add(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_in_flight_are_those_started_and_not_ended() {
        let requests = Requests::new();
        assert_eq!(requests.in_flight(), 0);
        let a = Active::new(&requests);
        let b = Active::new(&requests);
        assert_eq!(requests.in_flight(), 2);
        drop(a);
        assert_eq!(requests.in_flight(), 1);
        drop(b);
        assert_eq!(requests.in_flight(), 0);
    }

    /// Whether `watcher` has returned once the paused clock has moved `by` on (timers
    /// due by then have fired and their tasks have run).
    async fn done_after(watcher: &tokio::task::JoinHandle<()>, by: Duration) -> bool {
        tokio::time::sleep(by).await;
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        watcher.is_finished()
    }

    fn watch(requests: &Arc<Requests>, idle: Duration) -> tokio::task::JoinHandle<()> {
        let requests = requests.clone();
        tokio::spawn(async move { requests.idle_for(idle).await })
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_without_requests_is_idle_after_the_idle_time() {
        let requests = Requests::new();
        let watcher = watch(&requests, Duration::from_secs(8));
        // Idle from the start: not before 8 s, by 10 s.
        assert!(!done_after(&watcher, Duration::from_millis(7_900)).await);
        assert!(done_after(&watcher, Duration::from_millis(2_100)).await);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_in_flight_or_one_that_just_ended_keeps_it_busy() {
        let requests = Requests::new();
        let active = Active::new(&requests);
        let watcher = watch(&requests, Duration::from_secs(8));
        // In flight for 20 s: not idle.
        assert!(!done_after(&watcher, Duration::from_secs(20)).await);
        drop(active);
        // Quick requests every 5 s (each starts and ends between two looks): not idle.
        for _ in 0..4 {
            assert!(!done_after(&watcher, Duration::from_secs(5)).await);
            drop(Active::new(&requests));
        }
        // After the last one: idle not before 8 s, by 10 s.
        assert!(!done_after(&watcher, Duration::from_millis(7_900)).await);
        assert!(done_after(&watcher, Duration::from_millis(2_100)).await);
    }
}
