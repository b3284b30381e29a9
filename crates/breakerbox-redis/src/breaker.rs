//! [`RedisBreaker`]: one breaker shared by every process that names it, its state in Redis.

mod admission;
mod background;
mod builder;
mod contract;
mod local_open;
mod news;
mod node_flush;
mod outage;
mod permit;
mod view;

pub use builder::{BuildError, RedisBreakerBuilder};
pub use contract::AcquireFuture;
pub use permit::{Recorded, RedisPermit};

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use breakerbox::model::WindowCounts;
use breakerbox::{
    CallError, CircuitBreaker, CircuitOpen, Clock, Config, DefaultJudge, Event, EventKind,
    JitterSource, Judge, Listener, MonotonicClock, Nanos, Phase, Snapshot, Verdict,
};
use tokio::sync::Notify;

use crate::events::{Stats, StatsSnapshot};
use crate::node::RedisNode;
use crate::options::{Backoff, Fallback, LocalView, Mode};
use crate::pubsub::{Listening, MIN_SUBSCRIBE_TIMEOUT};
use crate::store::{BatchItem, ManualOp, RedisStore, StoreError};
use crate::wire::{Reply, ReplyDecision};
use news::{micros_to_duration, ramp_now};
pub(crate) use news::{news_of, Authority};
use view::{View, ViewCell};

/// At most this many lease tokens wait to be cancelled (older ones are left to expire).
const MAX_ORPHANS: usize = 256;

/// A circuit breaker whose state lives in Redis, shared by every process (on any machine)
/// that opens a breaker of the same name on the same Redis. Cloning is cheap; clones share
/// everything.
///
/// In the default [`Mode::LocalView`] a closed breaker admits calls without any Redis round
/// trip and sends outcomes in batches; an open breaker rejects locally until the end of
/// the open phase; half-open probes are reserved in Redis, so `max_probes` caps probes
/// across the whole fleet. [`Mode::Strict`] asks Redis on every acquire and outcome.
///
/// When Redis does not answer within the timeout, the [`Fallback`] decides (a local
/// in-process breaker by default) until Redis is back; see the crate docs for how the
/// state is resynchronised.
pub struct RedisBreaker<C: Clock + Clone = MonotonicClock> {
    inner: Arc<Inner<C>>,
}

impl<C: Clock + Clone> Clone for RedisBreaker<C> {
    fn clone(&self) -> Self {
        RedisBreaker {
            inner: self.inner.clone(),
        }
    }
}

impl<C: Clock + Clone> std::fmt::Debug for RedisBreaker<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBreaker")
            .field("name", &self.inner.name)
            .field("key", &self.inner.store.key())
            .field("mode", &self.inner.mode)
            .finish()
    }
}

pub(crate) struct Inner<C: Clock + Clone> {
    pub(crate) name: String,
    pub(crate) config: Config,
    pub(crate) store: RedisStore,
    pub(crate) mode: Mode,
    pub(crate) fallback: Fallback,
    pub(crate) backoff: Backoff,
    pub(crate) clock: C,
    pub(crate) script_time: bool,
    pub(crate) jitter: Arc<dyn JitterSource>,
    pub(crate) view: ViewCell,
    pub(crate) down: AtomicBool,
    pub(crate) down_since: AtomicU64,
    pub(crate) local: CircuitBreaker<C>,
    pub(crate) local_trip: Arc<Mutex<Option<&'static str>>>,
    pub(crate) pending_manual: Mutex<Option<ManualOp>>,
    /// A shadow switch (rule 20) made during an outage, pushed when Redis is back, after
    /// and apart from `pending_manual` (a switch is no phase and must not displace one).
    pub(crate) pending_shadow: Mutex<Option<bool>>,
    /// Outcomes and releases waiting for the next batch, each with the local time it
    /// was queued (sent as its age, rule 19).
    pub(crate) batch: Mutex<Vec<(BatchItem, Nanos)>>,
    /// A message (or a reply of another incarnation) asked for an authoritative re-read.
    pub(crate) refresh_requested: AtomicBool,
    /// Lease tokens of probe reservations this node may hold without knowing it (an
    /// acquire that timed out) or whose outcome it could not send: cancelled when Redis
    /// answers again.
    pub(crate) orphans: Mutex<Vec<u64>>,
    /// A jitter sample drawn for a script call that did not open the breaker: the next
    /// call uses it, so samples are consumed per re-open, as in the in-memory engine.
    pub(crate) pending_sample: Mutex<Option<f64>>,
    /// A failure waits in the batch: flush within `failure_flush_interval`.
    pub(crate) urgent: AtomicBool,
    /// A failure is queued or on its way to Redis and may trip the shared breaker: local
    /// acquires wait (at most the timeout) for Redis's answer instead of admitting on a
    /// view that may be about to change.
    pub(crate) suspect: AtomicBool,
    /// Woken when no failure is pending any more.
    pub(crate) settled: Notify,
    /// The version a channel message announced (a transition, or a failure streak that
    /// may trip soon; `u64::MAX` for news of another incarnation): until the view holds
    /// that version, acquires ask Redis instead of the view. Cleared by the re-read the
    /// message asked for, so a forged message costs Redis calls for one round trip and
    /// never a wrong answer. 0: no alert.
    pub(crate) alerted: AtomicU64,
    /// Rule 23: this node's count of the closed-phase acquires its view decided during
    /// ramps; each takes its number here (the node ramps its own share of the calls).
    pub(crate) ramp_calls: AtomicU64,
    pub(crate) wake: Arc<Notify>,
    pub(crate) listeners: Vec<Arc<dyn Listener>>,
    pub(crate) stats: Stats,
    /// Outcomes by verdict, for the metrics facade.
    #[cfg(feature = "metrics")]
    pub(crate) counters: breakerbox::metrics::OutcomeCounters,
    /// Local time of the last news from Redis (a script reply or a message).
    pub(crate) last_news: AtomicU64,
    /// Handles the background loop holds while it works (a flush, a refresh): not a
    /// user's, so they do not keep a registry from evicting the breaker.
    pub(crate) loop_handles: AtomicUsize,
    /// The node whose connection and subscription this breaker shares, if any (kept
    /// alive as long as the breaker).
    pub(crate) node: Option<RedisNode>,
    /// Rule 21: the end of this node's local open phase (local clock; 0: none).
    pub(crate) local_open_until: AtomicU64,
    /// Held while a batch is on its way to Redis: one batch in flight at a time, whoever
    /// sends it (this breaker's task, a recording caller, the node's flush task).
    pub(crate) flush_lock: Arc<tokio::sync::Mutex<()>>,
    /// Local time of the last batch sent (by anyone).
    pub(crate) last_flush: AtomicU64,
    /// The node sends this breaker's periodic flushes, with its other breakers'
    /// (`node/flush.rs`); failures, full batches and outages stay with the breaker.
    pub(crate) node_flush: bool,
}

/// A breaker hears its channel's messages: from its own subscription, or from its node's.
impl<C: Clock + Clone> Listening for Inner<C> {
    fn target(&self) -> crate::RedisTarget {
        self.store.target().clone()
    }

    fn backoff(&self) -> Backoff {
        self.backoff
    }

    fn message(&self, _channel: &str, payload: &str) {
        self.on_message(payload);
    }

    fn resubscribed(&self) {
        self.request_refresh();
    }

    fn subscribe_timeout(&self) -> Duration {
        self.store.timeout().max(MIN_SUBSCRIBE_TIMEOUT)
    }
}

impl<C: Clock + Clone> Drop for Inner<C> {
    fn drop(&mut self) {
        // Wake the background task so it notices the breaker is gone.
        self.wake.notify_one();
    }
}

impl<C: Clock + Clone> Inner<C> {
    pub(crate) fn emit(&self, kind: EventKind) {
        breakerbox::emit_event(&self.listeners, &Event::new(&self.name, kind));
    }

    /// The explicit script time, when the breaker's clock drives Redis time (tests).
    pub(crate) fn now_arg(&self) -> Option<u64> {
        self.script_time.then(|| self.clock.now().as_u64() / 1_000)
    }

    /// The jitter sample for the next script call: the one a previous call did not use,
    /// or a new one.
    pub(crate) fn sample(&self) -> f64 {
        if self.config.jitter <= 0.0 {
            return 0.0;
        }
        if let Some(r) = self.pending_sample.lock().ok().and_then(|mut p| p.take()) {
            return r;
        }
        self.jitter.sample()
    }

    /// Keeps `r` for the next call unless the reply shows it was used (an opening).
    fn settle_sample(&self, r: f64, reply: &Reply) {
        if self.config.jitter <= 0.0 || reply.transitions.iter().any(|t| t.to == Phase::Open) {
            return;
        }
        if let Ok(mut pending) = self.pending_sample.lock() {
            pending.get_or_insert(r);
        }
    }

    /// Remembers a lease token to cancel once Redis answers.
    pub(crate) fn orphan(&self, token: u64) {
        if token == 0 {
            return;
        }
        if let Ok(mut orphans) = self.orphans.lock() {
            if orphans.len() >= MAX_ORPHANS {
                orphans.remove(0);
            }
            orphans.push(token);
        }
    }

    /// Waits (at most the Redis timeout) until no failure is pending in Redis: what it
    /// answers may be a trip.
    async fn settle(&self) {
        let notified = self.settled.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if !self.suspect.load(Ordering::Acquire) {
            return;
        }
        let _ = tokio::time::timeout(self.store.timeout(), notified).await;
    }

    /// No failure is pending any more (sent and answered, or Redis is away).
    pub(crate) fn unsuspect(&self) {
        self.suspect.store(false, Ordering::Release);
        self.settled.notify_waiters();
    }

    /// Asks the background task for an authoritative re-read now.
    pub(crate) fn request_refresh(&self) {
        self.refresh_requested.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    pub(crate) fn is_down(&self) -> bool {
        self.down.load(Ordering::Acquire)
    }

    #[inline]
    pub(crate) fn view(&self) -> View {
        self.view.load()
    }

    pub(crate) fn set_view(&self, f: impl FnOnce(&View) -> View) {
        self.view.update(|v| Some(f(v)));
    }

    pub(crate) fn stale(&self, generation: u64) {
        Stats::add(&self.stats.stale, 1);
        self.emit(EventKind::StaleResult { generation });
    }

    pub(crate) fn reject(&self, open: CircuitOpen) -> CircuitOpen {
        if !self.listeners.is_empty() {
            self.emit(EventKind::Rejected(open));
        }
        open
    }

    /// Queues a closed-phase outcome (or a release) for the next batch. Returns whether
    /// the caller is to send the batch now (an outcome that may trip the breaker, with
    /// `failure_flush_interval` zero): from the recording task, as strict mode would,
    /// rather than a wake-up of the background task later.
    pub(crate) fn enqueue(&self, item: BatchItem) -> bool {
        let Mode::LocalView(LocalView {
            batch_size,
            failure_flush_interval,
            ..
        }) = self.mode
        else {
            return false;
        };
        // A failure may trip; while the view is warm, a success ends the streak that
        // makes this node ask Redis: both are sent at once.
        let urgent = match item {
            BatchItem::Outcome(o) => {
                o.verdict == Verdict::Failure
                    || self.config.is_slow(Nanos::from_duration(o.latency))
                    || self.view().warm
            }
            BatchItem::Release(..) => false,
        };
        let queued = self.clock.now();
        let len = match self.batch.lock() {
            Ok(mut batch) => {
                if batch.len() >= batch_size.saturating_mul(20).max(1) {
                    Stats::add(&self.stats.dropped_outcomes, 1);
                    return false;
                }
                batch.push((item, queued));
                batch.len()
            }
            Err(_) => return false,
        };
        if self.is_down() {
            return false;
        }
        let mut wake = len >= batch_size;
        if urgent {
            self.suspect.store(true, Ordering::Release);
            // Marked even when the caller sends: a flush under way then knows a failure
            // came after what it took, and leaves the node suspect.
            let first_urgent = !self.urgent.swap(true, Ordering::AcqRel);
            if failure_flush_interval.is_zero() {
                return true;
            }
            wake |= first_urgent;
        }
        if wake {
            self.wake.notify_one();
        }
        false
    }

    /// Hands an urgent batch to the background task (a send-now that never ran: its
    /// future was dropped with no runtime to finish it).
    pub(crate) fn flush_soon(&self) {
        self.urgent.store(true, Ordering::Release);
        self.wake.notify_one();
    }
}

impl RedisBreaker<MonotonicClock> {
    /// A builder for the breaker `name` on the Redis at `url`: `redis://` (`rediss://`
    /// with the `tls` feature, `redis://user:password@host:port/db` for AUTH and ACL
    /// users), `redis+cluster://HOST:PORT,HOST:PORT` (a Redis Cluster, feature `cluster`)
    /// or `redis+sentinel://HOST:PORT,HOST:PORT/SERVICE` (a primary behind Sentinels,
    /// feature `sentinel`); see [`RedisTarget::parse`](crate::RedisTarget::parse).
    pub fn builder(url: impl Into<String>, name: impl Into<String>) -> RedisBreakerBuilder {
        RedisBreakerBuilder::new(url.into(), name.into())
    }
}

impl<C: Clock + Clone> RedisBreaker<C> {
    /// The breaker's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The breaker's config.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The Redis store (key, channel, and the raw script calls).
    pub fn store(&self) -> &RedisStore {
        &self.inner.store
    }

    /// The node whose connection and subscription this breaker shares, if it was made on
    /// one ([`RedisNode::breaker`]).
    pub fn node(&self) -> Option<&RedisNode> {
        self.inner.node.as_ref()
    }

    /// Counters for metrics.
    pub fn stats(&self) -> StatsSnapshot {
        self.inner.stats.snapshot()
    }

    /// Whether Redis is unreachable and the fallback is deciding.
    pub fn is_degraded(&self) -> bool {
        self.inner.is_down()
    }

    /// The phase as this node sees it (its local view, or the fallback's during an
    /// outage; no Redis call).
    pub fn phase(&self) -> Phase {
        let inner = &self.inner;
        if inner.is_down() && inner.fallback == Fallback::LocalBreaker {
            let view = inner.view();
            if !(view.known && view.holds_at(inner.clock.now())) {
                return inner.local.phase();
            }
        }
        inner.view().phase
    }

    /// The generation as this node sees it.
    pub fn local_generation(&self) -> u64 {
        self.inner.view().generation
    }

    /// Awaits `future` if admitted; `Ok` is a success and `Err` a failure.
    pub async fn call<T, E, F>(&self, future: F) -> Result<T, CallError<E>>
    where
        F: Future<Output = Result<T, E>>,
    {
        self.call_with(&DefaultJudge, future).await
    }

    /// Awaits `future` if admitted and records what `judge` makes of its result and
    /// latency. Dropping the returned future releases the permit.
    pub async fn call_with<T, E, F, J>(&self, judge: &J, future: F) -> Result<T, CallError<E>>
    where
        F: Future<Output = Result<T, E>>,
        J: Judge<T, E> + ?Sized,
    {
        let permit = self.acquire().await.map_err(CallError::Open)?;
        let started = self.inner.clock.now();
        let result = future.await;
        let latency = self.inner.clock.now().saturating_sub(started).as_duration();
        permit
            .record_with_latency(judge.judge(&result, latency), latency)
            .await;
        result.map_err(CallError::Inner)
    }

    async fn manual(&self, op: ManualOp) -> Result<(), StoreError> {
        let inner = &self.inner;
        // Refused before anything changes, here or in Redis.
        op.validate()?;
        let now = inner.clock.now();
        // The node that made the change keeps it through an outage.
        match op {
            ManualOp::ForceOpen(d) | ManualOp::Disable(d) => {
                let phase = if matches!(op, ManualOp::ForceOpen(_)) {
                    Phase::ForcedOpen
                } else {
                    Phase::Disabled
                };
                let until = d.map(|d| now.saturating_add(Nanos::from_duration(d)));
                inner.set_view(|v| v.with_phase(phase, until));
            }
            ManualOp::Reset => {
                inner.local.reset();
                inner.set_view(|v| v.with_phase(Phase::Closed, None));
            }
            ManualOp::Shadow(on) => {
                inner.local.set_shadow(on);
                inner.set_view(|v| View { shadow: on, ..*v });
            }
            ManualOp::Trip(_) | ManualOp::RestoreOpen(_) => {}
        }
        if inner.is_down() {
            inner.keep_for_resync(op);
            return Err(StoreError::Unavailable);
        }
        let r = inner.sample();
        match inner.store.manual(op, inner.now_arg(), r).await {
            Ok(answer) => {
                inner.absorb(answer, false, Some(r));
                Ok(())
            }
            Err(error) => {
                inner.keep_for_resync(op);
                inner.enter_outage(&error);
                Err(error)
            }
        }
    }

    /// Opens the breaker for every node until [`RedisBreaker::reset`]. If Redis cannot be
    /// reached, this node keeps the override and pushes it when Redis is back; the error
    /// says so.
    pub async fn force_open(&self) -> Result<(), StoreError> {
        self.manual(ManualOp::ForceOpen(None)).await
    }

    /// Opens the breaker for every node for `duration`, after which it probes. Kept
    /// locally through an outage, like [`RedisBreaker::force_open`].
    pub async fn force_open_for(&self, duration: Duration) -> Result<(), StoreError> {
        self.manual(ManualOp::ForceOpen(Some(duration))).await
    }

    /// Admits every call and records nothing, on every node, until reset. Kept locally
    /// through an outage, like [`RedisBreaker::force_open`].
    pub async fn disable(&self) -> Result<(), StoreError> {
        self.manual(ManualOp::Disable(None)).await
    }

    /// Admits every call and records nothing, on every node, for `duration`; then it
    /// closes afresh.
    pub async fn disable_for(&self, duration: Duration) -> Result<(), StoreError> {
        self.manual(ManualOp::Disable(Some(duration))).await
    }

    /// Back to a fresh closed phase on every node (and locally, at once). Shadow mode
    /// and its count are kept.
    pub async fn reset(&self) -> Result<(), StoreError> {
        self.manual(ManualOp::Reset).await
    }

    /// Switches shadow mode on or off for every node (rule 20): the switch is stored in
    /// the shared hash and announced on the channel. In shadow mode every rule and
    /// transition runs as usual, but a call that would be rejected is admitted (with a
    /// passthrough permit, recording nothing), counted in Redis
    /// ([`Snapshot::shadow_rejections`], fleet-wide) and reported as
    /// [`EventKind::ShadowRejected`]. While its view would reject, a node asks Redis for
    /// every call (the script decides and counts), so a shadowed breaker that would be
    /// open costs a round trip per call.
    pub async fn set_shadow(&self, on: bool) -> Result<(), StoreError> {
        self.manual(ManualOp::Shadow(on)).await
    }

    /// The shared state, read from Redis (changes nothing).
    pub async fn snapshot(&self) -> Result<Snapshot, StoreError> {
        let inner = &self.inner;
        let answer = inner.store.read(inner.now_arg()).await?;
        let reply = inner.absorb(answer, false, None);
        let window = match reply.decision {
            ReplyDecision::State(counts) => counts,
            _ => WindowCounts::default(),
        };
        let s = &reply.state;
        let rate = |n: u64| (window.calls > 0).then(|| n as f64 / window.calls as f64);
        let hot = crate::wire::micros(inner.config.half_open_timeout);
        let retry_after_us = match s.phase {
            Phase::Open => s.remaining_us(reply.now_us),
            Phase::HalfOpen => Some((s.since_us + hot).saturating_sub(reply.now_us)),
            Phase::ForcedOpen => s.remaining_us(reply.now_us),
            _ => None,
        };
        let mut snapshot = Snapshot::new(inner.name.clone(), s.phase, s.generation);
        snapshot.window = window;
        snapshot.failure_rate = rate(window.failures);
        snapshot.slow_call_rate = rate(window.slow);
        snapshot.consecutive_failures = s.consecutive_failures;
        snapshot.probes_in_flight = s.in_flight;
        snapshot.probe_successes = s.probe_successes;
        snapshot.trips = s.trips;
        snapshot.retry_after = retry_after_us.map(micros_to_duration);
        snapshot.override_left = match s.phase {
            Phase::ForcedOpen | Phase::Disabled => s.remaining_us(reply.now_us),
            _ => None,
        }
        .map(micros_to_duration);
        snapshot.stale_results = inner.stats.stale.load(Ordering::Relaxed);
        snapshot.shadow = s.shadow;
        snapshot.shadow_rejections = s.shadow_rejections;
        snapshot.local_open = inner
            .local_open_left(inner.clock.now())
            .map(Nanos::as_duration);
        snapshot.ramp = ramp_now(&inner.config, s, reply.now_us);
        Ok(snapshot)
    }

    /// Sends the queued closed-phase outcomes now (local-view mode).
    pub async fn flush(&self) {
        self.inner.flush().await;
    }
}
