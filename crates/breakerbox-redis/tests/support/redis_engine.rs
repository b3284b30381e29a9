//! The Redis engine behind the core's engine-generic scenarios: a [`RedisBreaker`] in
//! strict mode (every acquire and outcome is a script call), the scripts' time taken from
//! the scenario's `ManualClock`, on its own `redis-server`, driven through a
//! current-thread tokio runtime owned by the adapter (`block_on` per operation). It is
//! driven through the breaker contract (`breakerbox::contract`), what every integration
//! uses.
//!
//! By default each engine starts its own `redis-server`; [`share`] makes every engine
//! built afterwards a breaker of its own name on one given Redis (a cluster's URL, say).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use breakerbox::contract::{Breaker, BreakerPermit};
use breakerbox::model::PermitKind;
use breakerbox::{
    CallError, CircuitOpen, ConfigBuilder, Event, EventKind, ManualClock, Phase, Snapshot, Verdict,
};
use breakerbox_redis::{Mode, RedisBreaker, RedisPermit};
use tokio::runtime::Runtime;

use crate::redis_server::RedisServer;
use crate::scenarios::engine::{Jitter, ScenarioEngine, ScenarioPermit};

/// Where engines built from now on keep their breakers: `Some(url)`, a shared Redis (each
/// engine a breaker of its own name); `None`, a fresh server per engine.
static SHARED: Mutex<Option<String>> = Mutex::new(None);

/// Names the breakers made on a shared Redis.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Makes engines built from now on use the Redis at `url` (or their own servers).
#[allow(dead_code)] // the single-server suite never shares
pub(crate) fn share(url: Option<String>) {
    *SHARED.lock().unwrap() = url;
}

/// A strict-mode `RedisBreaker<ManualClock>` with its runtime, server and event log.
pub(crate) struct RedisEngine {
    /// `None` only while dropping (the breaker is dropped inside the runtime).
    breaker: Option<RedisBreaker<ManualClock>>,
    events: Arc<Mutex<Vec<EventKind>>>,
    runtime: Runtime,
    _server: Option<RedisServer>,
}

impl RedisEngine {
    fn breaker(&self) -> &RedisBreaker<ManualClock> {
        self.breaker.as_ref().expect("the breaker lives until drop")
    }

    fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }
}

impl Drop for RedisEngine {
    fn drop(&mut self) {
        let _inside = self.runtime.enter();
        drop(self.breaker.take());
    }
}

impl ScenarioEngine for RedisEngine {
    /// A script call needs its sample up front; an unused one is kept for the next call.
    const SAMPLES_DRAWN_AHEAD: usize = 1;

    type Permit<'a> = RedisHandle<'a>;

    fn build(config: ConfigBuilder, clock: &ManualClock, jitter: Option<Jitter>) -> Self {
        let shared = SHARED.lock().unwrap().clone();
        let (server, url, name) = match shared {
            Some(url) => {
                let n = NEXT.fetch_add(1, Ordering::Relaxed);
                (None, url, format!("scenario-{}-{n}", std::process::id()))
            }
            None => {
                let server = RedisServer::start();
                let url = server.url();
                (Some(server), url, "scenario".to_string())
            }
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let events = Arc::new(Mutex::new(Vec::new()));
        let log = events.clone();
        let mut builder = RedisBreaker::builder(url, name)
            .config(config.build().unwrap())
            .mode(Mode::Strict)
            .timeout(Duration::from_secs(2))
            .clock(clock.clone())
            .script_time_from_clock()
            // The model's scenarios: probe leases (a Redis rule of their own) never run out.
            .probe_lease(Duration::from_secs(24 * 3600))
            .listener(move |e: &Event<'_>| log.lock().unwrap().push(e.kind.clone()));
        if let Some(jitter) = jitter {
            builder = builder.jitter_source(move || jitter());
        }
        let breaker = runtime.block_on(builder.build()).unwrap();
        RedisEngine {
            breaker: Some(breaker),
            events,
            runtime,
            _server: server,
        }
    }

    fn try_acquire(&self) -> Result<Self::Permit<'_>, CircuitOpen> {
        let permit = self.block_on(Breaker::acquire(self.breaker()))?;
        assert!(!permit.is_fallback(), "Redis answered every acquire");
        Ok(RedisHandle {
            engine: self,
            permit: Some(permit),
        })
    }

    fn call<T, E>(&self, f: impl FnOnce() -> Result<T, E>) -> Result<T, CallError<E>> {
        self.block_on(self.breaker().call(async move { f() }))
    }

    fn snapshot(&self) -> Snapshot {
        self.block_on(Breaker::snapshot(self.breaker())).unwrap()
    }

    fn phase(&self) -> Phase {
        self.snapshot().phase
    }

    fn force_open(&self) {
        self.block_on(Breaker::force_open(self.breaker())).unwrap()
    }

    fn force_open_for(&self, duration: Duration) {
        self.block_on(Breaker::force_open_for(self.breaker(), duration))
            .unwrap()
    }

    fn disable(&self) {
        self.block_on(Breaker::disable(self.breaker())).unwrap()
    }

    fn disable_for(&self, duration: Duration) {
        self.block_on(Breaker::disable_for(self.breaker(), duration))
            .unwrap()
    }

    fn reset(&self) {
        self.block_on(Breaker::reset(self.breaker())).unwrap()
    }

    fn set_shadow(&self, on: bool) {
        self.block_on(Breaker::set_shadow(self.breaker(), on))
            .unwrap()
    }

    fn take_events(&self) -> Vec<EventKind> {
        std::mem::take(&mut *self.events.lock().unwrap())
            .into_iter()
            .filter_map(|event| match event {
                EventKind::Transition(t) => Some(EventKind::Transition(t)),
                EventKind::Rejected(open) => Some(EventKind::Rejected(open)),
                EventKind::ShadowRejected(open) => Some(EventKind::ShadowRejected(open)),
                EventKind::StaleResult { generation } => {
                    Some(EventKind::StaleResult { generation })
                }
                _ => None,
            })
            .collect()
    }
}

/// A [`RedisPermit`] tied to its engine, so its outcome and its drop run on the
/// engine's runtime.
#[derive(Debug)]
pub(crate) struct RedisHandle<'a> {
    engine: &'a RedisEngine,
    /// `None` once recorded.
    permit: Option<RedisPermit<ManualClock>>,
}

impl std::fmt::Debug for RedisEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisEngine")
            .field("breaker", &self.breaker)
            .finish()
    }
}

impl RedisHandle<'_> {
    fn permit(&self) -> &RedisPermit<ManualClock> {
        self.permit.as_ref().expect("not yet recorded")
    }

    fn take(mut self) -> RedisPermit<ManualClock> {
        self.permit.take().expect("not yet recorded")
    }
}

impl ScenarioPermit for RedisHandle<'_> {
    fn generation(&self) -> u64 {
        self.permit().generation()
    }

    fn kind(&self) -> PermitKind {
        self.permit().kind()
    }

    fn record(self, verdict: Verdict) {
        let engine = self.engine;
        engine.block_on(BreakerPermit::record(self.take(), verdict))
    }

    fn record_with_latency(self, verdict: Verdict, latency: Duration) {
        let engine = self.engine;
        engine.block_on(BreakerPermit::record_with_latency(
            self.take(),
            verdict,
            latency,
        ))
    }
}

impl Drop for RedisHandle<'_> {
    /// An unrecorded permit is released by a task it spawns on the runtime (every kind:
    /// a release applies what is due); wait (bounded) until Redis has answered it, so
    /// the release has taken effect on return, as it has in the in-memory engine.
    fn drop(&mut self) {
        let Some(permit) = self.permit.take() else {
            return;
        };
        let breaker = self.engine.breaker();
        let calls_before = breaker.stats().redis_calls;
        // The release runs in a task of its own; other Redis calls (a background re-read
        // after a pub/sub message) also count in `redis_calls`, so wait for that task too.
        let tasks_before = self.engine.runtime.metrics().num_alive_tasks();
        // A pass-through permit dropped after its disable expired also releases in Redis
        // (that closes the breaker); before the expiry it sends nothing.
        let passthrough = permit.kind() == breakerbox::model::PermitKind::Passthrough;
        {
            let _inside = self.engine.runtime.enter();
            drop(permit);
        }
        self.engine.block_on(async {
            for _ in 0..if passthrough { 20 } else { 400 } {
                let released = self.engine.runtime.metrics().num_alive_tasks() <= tasks_before;
                if breaker.stats().redis_calls > calls_before && released {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            assert!(
                passthrough,
                "the dropped permit's release never reached Redis"
            );
        });
    }
}
