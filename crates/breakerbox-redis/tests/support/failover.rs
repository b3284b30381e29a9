//! Failovers seen from the breakers, the same for a Redis Cluster and for Sentinels:
//! [`Load`] keeps several nodes calling through one shared breaker and measures how long
//! each acquire and record took; [`LostWrites`] sets up what a replica that falls behind
//! loses (an open phase, a half-open phase) and checks what the README says wins.

#![allow(dead_code)]
// Tests measure real elapsed time against real servers.
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use breakerbox::model::TransitionReason;
use breakerbox::{Config, Event, EventKind, Phase};
use breakerbox_redis::{Backoff, Fallback, LocalView, Mode, RedisBreaker, RedisPermit};

/// Every Redis operation's timeout in these tests.
pub const TIMEOUT: Duration = Duration::from_millis(100);

/// How much longer than the timeout a call may take on a busy 2-core machine.
pub const MARGIN: Duration = Duration::from_millis(250);

fn backoff() -> Backoff {
    Backoff {
        min: Duration::from_millis(20),
        max: Duration::from_millis(200),
    }
}

fn local_view() -> Mode {
    Mode::LocalView(LocalView {
        flush_interval: Duration::from_millis(20),
        refresh_interval: Duration::from_millis(200),
        ..LocalView::default()
    })
}

/// What the callers of a [`Load`] saw.
#[derive(Debug, Default)]
pub struct Report {
    /// Calls made (admitted or rejected).
    pub calls: u64,
    /// Calls the fallback admitted (Redis was away).
    pub fallback: u64,
    /// Calls rejected.
    pub rejected: u64,
    /// The longest acquire.
    pub acquire_max: Duration,
    /// The longest record.
    pub record_max: Duration,
    /// Caller tasks that panicked.
    pub panics: usize,
    /// Outage episodes over the breakers.
    pub outages: u64,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "calls={} fallback={} rejected={} acquire_max={:?} record_max={:?} panics={} outages={}",
            self.calls,
            self.fallback,
            self.rejected,
            self.acquire_max,
            self.record_max,
            self.panics,
            self.outages
        )
    }
}

impl Report {
    /// No caller panicked and no acquire or record took longer than `bound`.
    pub fn assert_bounded(&self, bound: Duration) {
        assert_eq!(self.panics, 0, "a caller panicked: {self}");
        assert!(
            self.acquire_max <= bound && self.record_max <= bound,
            "a call blocked past {bound:?}: {self}"
        );
        assert!(self.calls > 100, "the load ran: {self}");
    }
}

type Counts = (u64, u64, u64, Duration, Duration);

/// Three nodes (two in local-view mode, one strict: every call a script call) sharing
/// one breaker, two callers each, a call every 2 ms.
pub struct Load {
    pub breakers: Vec<RedisBreaker>,
    tasks: Vec<tokio::task::JoinHandle<Counts>>,
    stop: Arc<AtomicBool>,
}

impl Load {
    /// Builds the breakers on `url` and starts calling.
    pub async fn start(url: &str, name: &str) -> Load {
        let config = Config::builder()
            .consecutive_failures(5)
            .recovery_timeout(Duration::from_secs(1))
            .build()
            .unwrap();
        let mut breakers = Vec::new();
        for mode in [local_view(), local_view(), Mode::Strict] {
            let b = RedisBreaker::builder(url, name)
                .config(config.clone())
                .mode(mode)
                .timeout(TIMEOUT)
                .backoff(backoff())
                .build()
                .await
                .unwrap();
            assert!(!b.is_degraded(), "reached redis at {url}");
            breakers.push(b);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for b in &breakers {
            for _ in 0..2 {
                let b = b.clone();
                let stop = stop.clone();
                tasks.push(tokio::spawn(async move {
                    let (mut calls, mut fallback, mut rejected) = (0, 0, 0);
                    let (mut acquire_max, mut record_max) = (Duration::ZERO, Duration::ZERO);
                    while !stop.load(Ordering::Relaxed) {
                        calls += 1;
                        let asked = Instant::now();
                        let acquired = b.acquire().await;
                        acquire_max = acquire_max.max(asked.elapsed());
                        match acquired {
                            Ok(permit) => {
                                fallback += u64::from(permit.is_fallback());
                                let recording = Instant::now();
                                permit.success().await;
                                record_max = record_max.max(recording.elapsed());
                            }
                            Err(_) => rejected += 1,
                        }
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                    (calls, fallback, rejected, acquire_max, record_max)
                }));
            }
        }
        Load {
            breakers,
            tasks,
            stop,
        }
    }

    /// Outage episodes so far, per breaker.
    pub fn outages(&self) -> Vec<u64> {
        self.breakers.iter().map(|b| b.stats().outages).collect()
    }

    /// Waits until every breaker has had an outage since `baseline` ([`Load::outages`])
    /// and is back on Redis; returns when that happened.
    pub async fn wait_back(&self, baseline: &[u64], within: Duration) -> Instant {
        let deadline = Instant::now() + within;
        loop {
            let all_back = self
                .breakers
                .iter()
                .zip(baseline)
                .all(|(b, before)| b.stats().outages > *before && !b.is_degraded());
            if all_back {
                return Instant::now();
            }
            assert!(
                Instant::now() < deadline,
                "the breakers did not come back: outages {:?} (before {baseline:?}), degraded {:?}",
                self.outages(),
                self.breakers
                    .iter()
                    .map(|b| b.is_degraded())
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Stops the callers and sums up.
    pub async fn stop(self) -> Report {
        self.stop.store(true, Ordering::Relaxed);
        let mut report = Report::default();
        for task in self.tasks {
            match task.await {
                Ok((calls, fallback, rejected, acquire, record)) => {
                    report.calls += calls;
                    report.fallback += fallback;
                    report.rejected += rejected;
                    report.acquire_max = report.acquire_max.max(acquire);
                    report.record_max = report.record_max.max(record);
                }
                Err(_) => report.panics += 1,
            }
        }
        report.outages = self.breakers.iter().map(|b| b.stats().outages).sum();
        report
    }
}

/// Two breakers on one shard (and an observer of the first on another node), set up so a
/// replica cut off from the primary loses one's trip and the other's half-open phase.
pub struct LostWrites {
    open: RedisBreaker,
    half: RedisBreaker,
    observer: RedisBreaker,
    events: Arc<Mutex<Vec<EventKind>>>,
    pub keys: [String; 2],
}

/// What the primary held when it died.
pub struct Lost {
    tripped: Instant,
    probe: RedisPermit,
}

/// How long the open phase that is lost lasts.
pub const OPEN_FOR: Duration = Duration::from_secs(30);

impl LostWrites {
    /// Builds the breakers and writes their closed state (which the replica gets).
    pub async fn build(url: &str, open_name: &str, half_name: &str) -> LostWrites {
        let events = Arc::new(Mutex::new(Vec::new()));
        let log = events.clone();
        let open_config = Config::builder()
            .consecutive_failures(3)
            .recovery_timeout(OPEN_FOR)
            .build()
            .unwrap();
        let half_config = Config::builder()
            .consecutive_failures(3)
            .recovery_timeout(Duration::from_millis(100))
            .max_probes(1)
            .required_successes(1)
            .build()
            .unwrap();
        let build = |name: &str, config: &Config| {
            RedisBreaker::builder(url, name)
                .config(config.clone())
                .mode(local_view())
                .timeout(TIMEOUT)
                .backoff(backoff())
                .fallback(Fallback::LocalBreaker)
                .probe_lease(Duration::from_secs(30))
        };
        let open = build(open_name, &open_config)
            .listener(move |e: &Event<'_>| log.lock().unwrap().push(e.kind.clone()))
            .build()
            .await
            .unwrap();
        let half = build(half_name, &half_config).build().await.unwrap();
        let log = events.clone();
        let observer = build(open_name, &open_config)
            .listener(move |e: &Event<'_>| log.lock().unwrap().push(e.kind.clone()))
            .build()
            .await
            .unwrap();
        for b in [&open, &half] {
            b.acquire().await.unwrap().success().await;
            b.flush().await;
        }
        LostWrites {
            keys: [format!("bb:{{{open_name}}}"), format!("bb:{{{half_name}}}")],
            open,
            half,
            observer,
            events,
        }
    }

    /// Trips the first breaker (open for 30 s) and the second (then takes its half-open
    /// probe slot and holds the permit): what the cut-off replica will not have.
    pub async fn write_what_the_replica_loses(&self) -> Lost {
        for b in [&self.open, &self.half] {
            for _ in 0..3 {
                b.acquire().await.unwrap().failure().await;
            }
            b.flush().await;
            assert_eq!(b.phase(), Phase::Open, "{b:?} tripped");
        }
        let tripped = Instant::now();
        tokio::time::sleep(Duration::from_millis(120)).await;
        let probe = self.half.acquire().await.unwrap();
        assert!(probe.is_probe());
        assert_eq!(self.half.phase(), Phase::HalfOpen);
        Lost { tripped, probe }
    }

    /// After the failover: once the nodes are back on Redis, the open phase is in Redis
    /// again with the time it had left (`restored`), every node rejects; the half-open
    /// phase came back as an open phase ended at once: the old probe is stale, the next
    /// acquire probes, and its success closes. `phase_in_redis(key)` reads the new
    /// primary's stored phase code.
    pub async fn check_restored(self, lost: Lost, phase_in_redis: impl Fn(&str) -> Option<String>) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.open.is_degraded() || self.half.is_degraded() || self.observer.is_degraded() {
            assert!(Instant::now() < deadline, "the nodes came back on redis");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while phase_in_redis(&self.keys[0]).as_deref() != Some("1") {
            assert!(
                Instant::now() < deadline,
                "the open phase was restored in redis: {:?}",
                phase_in_redis(&self.keys[0])
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let left = self.open.snapshot().await.unwrap().retry_after.unwrap();
        let expected = OPEN_FOR.saturating_sub(lost.tripped.elapsed());
        assert!(
            left <= expected + Duration::from_millis(200)
                && left + Duration::from_secs(2) >= expected,
            "restored with {left:?} left, expected about {expected:?}"
        );
        assert!(
            self.events.lock().unwrap().iter().any(|e| matches!(
                e,
                EventKind::Transition(t) if t.reason == TransitionReason::Restored
            )),
            "a `restored` transition was reported (by the node that restored it)"
        );
        for b in [&self.open, &self.observer] {
            let deadline = Instant::now() + Duration::from_secs(5);
            while b.phase() != Phase::Open {
                assert!(Instant::now() < deadline, "{b:?} sees the restored phase");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert_eq!(b.acquire().await.unwrap_err().phase(), Phase::Open);
        }
        // The half-open phase: restored as open with no time left (or, if a node's
        // acquire got there first, already half-open again); never closed.
        let stored = phase_in_redis(&self.keys[1]);
        assert!(
            matches!(stored.as_deref(), Some("1") | Some("2")),
            "half-open given back as an open phase that ends at once: {stored:?}"
        );
        // The lost phase's probe does not count (its lease is gone with the primary).
        lost.probe.success().await;
        self.half.flush().await;
        let after = self.half.snapshot().await.unwrap();
        assert_ne!(
            after.phase,
            Phase::Closed,
            "a lost probe's success closed it"
        );
        // The next acquire probes, and a success closes.
        let probe = self.half.acquire().await.unwrap();
        assert!(probe.is_probe(), "the next acquire probes");
        assert!(!probe.is_fallback());
        probe.success().await;
        let closed = self.half.snapshot().await.unwrap();
        assert_eq!(closed.phase, Phase::Closed);
    }
}
