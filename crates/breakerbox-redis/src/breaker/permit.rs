//! The right to make one call through a [`RedisBreaker`](crate::RedisBreaker).
//!
//! Rule numbers ("rule 7") refer to `docs/RULES.md` in the repository.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use breakerbox::model::PermitKind;
use breakerbox::{Clock, MonotonicClock, Nanos, OwnedPermit, Stamp, Verdict};

use super::Inner;
use crate::store::{BatchItem, OutcomeArg};
use crate::wire::ReplyDecision;

/// Where a permit's outcome goes.
pub(crate) enum Route<C: Clock + Clone> {
    /// A script call per outcome (strict mode, half-open probes).
    Redis,
    /// The next batch (closed phase in local-view mode).
    Batched,
    /// The fallback breaker, during an outage.
    Local(Option<OwnedPermit<C>>),
    /// Nowhere (disabled, fail-open).
    Free,
}

/// The right to make one call. Record its verdict with [`RedisPermit::record`]; dropping
/// it unrecorded releases it (in Redis, by a background task or the next batch, so the
/// release applies what is due, as in the model; a half-open probe's slot is freed, and
/// if that cannot reach Redis, its lease runs out and the slot is reclaimed).
#[must_use = "a permit records nothing unless a verdict is given"]
pub struct RedisPermit<C: Clock + Clone = MonotonicClock> {
    inner: Arc<Inner<C>>,
    generation: u64,
    kind: PermitKind,
    /// A probe's lease token (0 for other kinds).
    token: u64,
    route: Route<C>,
    started: Stamp,
    done: bool,
}

impl<C: Clock + Clone> std::fmt::Debug for RedisPermit<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisPermit")
            .field("breaker", &self.inner.name)
            .field("generation", &self.generation)
            .field("kind", &self.kind)
            .finish()
    }
}

impl<C: Clock + Clone> RedisPermit<C> {
    pub(crate) fn new(
        inner: Arc<Inner<C>>,
        generation: u64,
        kind: PermitKind,
        token: u64,
        route: Route<C>,
    ) -> Self {
        let started = inner.clock.stamp();
        RedisPermit {
            inner,
            generation,
            kind,
            token,
            route,
            started,
            done: false,
        }
    }

    /// The generation the permit was issued in.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// What the permit is for.
    pub fn kind(&self) -> PermitKind {
        self.kind
    }

    /// Whether this call is a half-open probe (reserved in Redis, capped fleet-wide).
    pub fn is_probe(&self) -> bool {
        self.kind == PermitKind::Probe
    }

    /// Rule 22: how long this call may take before it is a failure with reason
    /// `timeout`: the core's [`Config::deadline`](breakerbox::Config::deadline) of its
    /// kind, as for the in-memory engine.
    pub fn deadline(&self) -> Option<Duration> {
        self.inner.config.deadline(self.kind)
    }

    /// Whether the permit came from the fallback policy during a Redis outage.
    pub fn is_fallback(&self) -> bool {
        matches!(self.route, Route::Local(_))
    }

    /// Records `verdict`, with the latency measured since the acquire. The record is
    /// committed now; await the answer to wait until it took effect.
    pub fn record(self, verdict: Verdict) -> Recorded {
        let latency = self.inner.clock.elapsed_since(self.started).as_duration();
        self.record_with_latency(verdict, latency)
    }

    /// Records a success.
    pub fn success(self) -> Recorded {
        self.record(Verdict::Success)
    }

    /// Records a failure.
    pub fn failure(self) -> Recorded {
        self.record(Verdict::Failure)
    }

    /// Records a call that says nothing about the dependency (frees a probe slot).
    pub fn ignore(self) -> Recorded {
        self.record(Verdict::Ignore)
    }

    /// Records `verdict` for a call that took `latency`.
    pub fn record_with_latency(self, verdict: Verdict, latency: Duration) -> Recorded {
        self.record_with_retry_hint(verdict, latency, None)
    }

    /// Records `verdict` for a call that took `latency`, with how long the dependency
    /// asked to be left alone (an HTTP `Retry-After`): if this outcome opens the breaker,
    /// the open phase lasts at least that long, capped at `max_open_duration`.
    ///
    /// The record is committed now: a closed-phase outcome joins the next batch, a
    /// fallback one goes to the local breaker, and one that needs a script call (a probe,
    /// strict mode) is sent when the returned future is awaited, or from a task of the
    /// current tokio runtime if it is dropped first.
    pub fn record_with_retry_hint(
        mut self,
        verdict: Verdict,
        latency: Duration,
        retry_hint: Option<Duration>,
    ) -> Recorded {
        self.record_in_place(verdict, Some(latency), retry_hint)
    }

    /// Records `verdict` where the permit lies (as
    /// [`BreakerPermit::record_in_place`](breakerbox::contract::BreakerPermit::record_in_place)):
    /// with `latency`, or the latency measured since the acquire when it is `None`. The
    /// permit is spent afterwards: a second record sends nothing, and its drop releases
    /// nothing.
    pub fn record_in_place(
        &mut self,
        verdict: Verdict,
        latency: Option<Duration>,
        retry_hint: Option<Duration>,
    ) -> Recorded {
        if self.done {
            return Recorded::done();
        }
        let latency =
            latency.unwrap_or_else(|| self.inner.clock.elapsed_since(self.started).as_duration());
        self.done = true;
        // Rule 22, judged here, in nanoseconds as in the model, before the outcome joins a
        // batch (so a late success is a failure there too) or goes to the fallback.
        let verdict =
            self.inner
                .config
                .past_deadline(self.kind, verdict, Nanos::from_duration(latency));
        #[cfg(feature = "metrics")]
        self.inner.counters.record(self.kind, verdict);
        let outcome = OutcomeArg {
            generation: self.generation,
            kind: self.kind,
            verdict,
            latency,
            retry_hint,
            token: self.token,
            age: Duration::ZERO,
        };
        let inner = self.inner.clone();
        if matches!(self.route, Route::Free) && self.disable_expired() {
            // Rule 1: an outcome after a disable expired closes the breaker, in Redis as
            // in the model; the script applies the expiry and answers "stale".
            self.route = Route::Redis;
        }
        match &mut self.route {
            Route::Free => Recorded::done(),
            Route::Local(permit) => {
                if let Some(permit) = permit.take() {
                    permit.record_with_retry_hint(verdict, latency, retry_hint);
                }
                Recorded::done()
            }
            // Kept through an outage too: it belongs to the shared phase (a stale
            // generation makes it harmless if the phase moved on).
            Route::Batched => {
                if !inner.enqueue(BatchItem::Outcome(outcome)) {
                    return Recorded::done();
                }
                // An outcome that may trip: sent now, and the future waits until Redis
                // answered (the failure's, or a concurrent flush's that took it).
                let handoff = Handoff(Some(inner.clone()));
                Recorded::pending(async move {
                    let mut handoff = handoff;
                    if let Some(inner) = handoff.0.take() {
                        inner.flush().await;
                        inner.settle().await;
                    }
                })
            }
            Route::Redis => {
                if inner.is_down() {
                    // The outcome is lost, but not the slot: cancelled when Redis is back.
                    inner.orphan(self.token);
                    return Recorded::done();
                }
                let generation = self.generation;
                let token = self.token;
                Recorded::pending(async move {
                    let r = inner.sample();
                    match inner.store.record(&[outcome], inner.now_arg(), r).await {
                        Ok(answer) => {
                            let reply = inner.absorb(answer, false, Some(r));
                            if reply.decision == ReplyDecision::Batch(vec![false]) {
                                inner.stale(generation);
                            }
                        }
                        Err(error) => {
                            inner.orphan(token);
                            inner.enter_outage(&error);
                        }
                    }
                })
            }
        }
    }
}

/// Waits until a [`RedisPermit`]'s outcome took effect. The outcome is committed when the
/// recording method is called: dropping this unfinished sends it from a task of the
/// current tokio runtime (with no runtime, a probe's lease runs out instead).
#[must_use = "await it to know the outcome reached Redis; dropped, it is sent from a task"]
pub struct Recorded {
    task: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl Recorded {
    fn done() -> Recorded {
        Recorded { task: None }
    }

    fn pending(task: impl Future<Output = ()> + Send + 'static) -> Recorded {
        Recorded {
            task: Some(Box::pin(task)),
        }
    }
}

impl Future for Recorded {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if let Some(task) = self.task.as_mut() {
            ready!(task.as_mut().poll(cx));
            self.task = None;
        }
        Poll::Ready(())
    }
}

impl Drop for Recorded {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                handle.spawn(task);
            }
        }
    }
}

impl std::fmt::Debug for Recorded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorded")
            .field("pending", &self.task.is_some())
            .finish()
    }
}

/// A send-now that has not run yet: if it is dropped unrun, the background task sends.
struct Handoff<C: Clock + Clone>(Option<Arc<Inner<C>>>);

impl<C: Clock + Clone> Drop for Handoff<C> {
    fn drop(&mut self) {
        if let Some(inner) = self.0.take() {
            inner.flush_soon();
        }
    }
}

impl<C: Clock + Clone> RedisPermit<C> {
    /// Whether this is a pass-through permit of a disable whose expiry has passed, as far
    /// as this node's view knows: its outcome or release must reach Redis to close it.
    fn disable_expired(&self) -> bool {
        if self.kind != PermitKind::Passthrough || self.inner.is_down() {
            return false;
        }
        let view = self.inner.view();
        view.known
            && view.phase == breakerbox::Phase::Disabled
            && view.generation == self.generation
            && !view.holds_at(self.inner.clock.now())
    }
}

impl<C: Clock + Clone> Drop for RedisPermit<C> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        match self.route {
            // The next batch carries the release (it applies what is due, as in the model).
            Route::Batched => {
                self.inner
                    .enqueue(BatchItem::Release(self.generation, self.kind, self.token));
                return;
            }
            Route::Redis => {}
            Route::Free if self.disable_expired() => {}
            Route::Free | Route::Local(_) => return,
        }
        if self.inner.is_down() {
            self.inner.orphan(self.token);
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            // No runtime to send it from: a probe's lease runs out instead.
            return;
        };
        let inner = self.inner.clone();
        let (generation, kind, token) = (self.generation, self.kind, self.token);
        handle.spawn(async move {
            let r = inner.sample();
            match inner
                .store
                .release(generation, kind, token, inner.now_arg(), r)
                .await
            {
                Ok(answer) => {
                    inner.absorb(answer, false, Some(r));
                }
                Err(error) => {
                    inner.orphan(token);
                    inner.enter_outage(&error);
                }
            }
        });
    }
}
