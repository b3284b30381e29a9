//! Admission on a [`RedisBreaker`]: from the local view where it can decide, from the
//! fallback during an outage, from Redis otherwise (a half-open probe, strict mode, a
//! failure on its way).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use breakerbox::config::ramp_admits;
use breakerbox::contract::LocalAdmission;
use breakerbox::model::{Decision, PermitKind};
use breakerbox::{CircuitOpen, Clock, EventKind, Nanos, Phase};

use super::permit::Route;
use super::view::View;
use super::{RedisBreaker, RedisPermit};
use crate::events::Stats;
use crate::options::{Fallback, Mode};
use crate::wire::ReplyDecision;

impl<C: Clock + Clone> RedisBreaker<C> {
    /// Whether an acquire now would be rejected as far as this node knows, without a
    /// Redis call, a permit or an event: `Err` while the view (or, during an outage, the
    /// fallback) is open with time left. A half-open breaker answers `Ok`: only Redis
    /// knows whether a probe slot is free.
    pub fn check(&self) -> Result<(), CircuitOpen> {
        let inner = &self.inner;
        let view = inner.view();
        let now = inner.clock.now();
        if view.known && view.shadow {
            // Rule 20: nothing is rejected in shadow mode.
            return Ok(());
        }
        if let Some(open) = inner.locally_open() {
            return Err(open);
        }
        if view.known && view.holds_at(now) && matches!(view.phase, Phase::Open | Phase::ForcedOpen)
        {
            let retry = view.until.map(|u| u.saturating_sub(now).as_duration());
            return Err(CircuitOpen::new(view.phase, retry));
        }
        if !inner.is_down() {
            return Ok(());
        }
        match inner.fallback {
            Fallback::FailOpen => Ok(()),
            Fallback::FailClosed => Err(CircuitOpen::new(Phase::Open, None)),
            Fallback::LocalBreaker => inner.local.check(),
        }
    }

    /// Asks to make one call without waiting: an answer from the local view (closed,
    /// open, disabled) or the fallback during an outage; `Remote` when only Redis can
    /// answer (a half-open probe, strict mode, a failure on its way to Redis): then
    /// [`RedisBreaker::acquire`].
    #[inline]
    pub fn try_acquire_local(&self) -> LocalAdmission<RedisPermit<C>> {
        let inner = &self.inner;
        if let Some(open) = inner.locally_open() {
            Stats::add(&inner.stats.local_rejects, 1);
            return LocalAdmission::Rejected(inner.reject(open));
        }
        let answer = if inner.is_down() {
            Some(self.fallback_acquire())
        } else if matches!(inner.mode, Mode::LocalView(_)) && !inner.suspect.load(Ordering::Acquire)
        {
            self.decide_from_view()
        } else {
            None
        };
        match answer {
            Some(Ok(permit)) => LocalAdmission::Admitted(permit),
            Some(Err(open)) => LocalAdmission::Rejected(open),
            None => LocalAdmission::Remote,
        }
    }

    /// Asks to make one call. Never waits longer than the Redis timeout.
    pub async fn acquire(&self) -> Result<RedisPermit<C>, CircuitOpen> {
        let inner = &self.inner;
        if let Some(open) = inner.locally_open() {
            Stats::add(&inner.stats.local_rejects, 1);
            return Err(inner.reject(open));
        }
        if inner.is_down() {
            return self.fallback_acquire();
        }
        if let Mode::LocalView(_) = inner.mode {
            // A failure on its way to Redis may trip the breaker: wait for the answer
            // rather than admit calls to a dependency that may be dead.
            if inner.suspect.load(Ordering::Acquire) {
                inner.settle().await;
            }
            if let Some(answer) = self.decide_from_view() {
                return answer;
            }
        }
        self.remote_acquire().await
    }

    /// What the local view answers on its own (local-view mode): admit while closed and
    /// not warm or disabled, reject while open; `None` when Redis must decide.
    #[inline]
    fn decide_from_view(&self) -> Option<Result<RedisPermit<C>, CircuitOpen>> {
        let inner = &self.inner;
        let view = inner.view();
        if !view.known || view.version < inner.alerted.load(Ordering::Acquire) {
            return None;
        }
        match view.phase {
            Phase::Closed if !view.warm && view.until.is_some() => self.decide_ramp(&view),
            Phase::Closed if !view.warm => {
                Stats::add(&inner.stats.local_admits, 1);
                Some(Ok(self.permit(
                    view.generation,
                    PermitKind::Normal,
                    0,
                    Route::Batched,
                )))
            }
            Phase::Disabled if view.holds_at(inner.clock.now()) => {
                Stats::add(&inner.stats.local_admits, 1);
                Some(Ok(self.permit(
                    view.generation,
                    PermitKind::Passthrough,
                    0,
                    Route::Free,
                )))
            }
            Phase::Open | Phase::ForcedOpen => {
                let now = inner.clock.now();
                // Rule 20: in shadow mode Redis admits and counts what the view would
                // reject.
                if view.shadow || !view.holds_at(now) {
                    return None;
                }
                Stats::add(&inner.stats.local_rejects, 1);
                let retry = view.until.map(|u| u.saturating_sub(now).as_duration());
                Some(Err(inner.reject(CircuitOpen::new(view.phase, retry))))
            }
            _ => None,
        }
    }

    /// Rule 23 from the view: while the view's ramp runs, this node numbers its own
    /// closed-phase acquires and admits the n-th iff `ramp_admits(n, fraction now)`, so
    /// each node passes its share of its own calls (the fleet's share is the same within
    /// the per-node bound of `ramp_admits`), with no Redis call. In shadow mode the call
    /// the view would reject goes to Redis (rule 20), whose acquire script decides.
    fn decide_ramp(&self, view: &View) -> Option<Result<RedisPermit<C>, CircuitOpen>> {
        let inner = &self.inner;
        let now = inner.clock.now_coarse();
        let fraction = match (inner.config.ramp, view.until) {
            (Some(ramp), Some(end)) if now < end => {
                let total = Nanos::from_duration(ramp.duration);
                ramp.fraction_ppm(total.saturating_sub(end.saturating_sub(now)))
            }
            _ => None,
        };
        let admitted = match fraction {
            Some(fraction) => {
                let n = inner.ramp_calls.fetch_add(1, Ordering::Relaxed);
                ramp_admits(n, fraction)
            }
            None => true,
        };
        if admitted {
            Stats::add(&inner.stats.local_admits, 1);
            return Some(Ok(self.permit(
                view.generation,
                PermitKind::Normal,
                0,
                Route::Batched,
            )));
        }
        if view.shadow {
            return None;
        }
        Stats::add(&inner.stats.local_rejects, 1);
        Some(Err(inner.reject(CircuitOpen::new(Phase::Closed, None))))
    }

    /// Whether a registry may forget this breaker: no other handle or permit, nothing
    /// queued for Redis, closed as far as this node knows, and not open locally (rule 21).
    pub fn is_idle(&self) -> bool {
        let inner = &self.inner;
        let view = inner.view();
        let loop_handles = inner.loop_handles.load(Ordering::Acquire);
        Arc::strong_count(&self.inner).saturating_sub(loop_handles) == 1
            && (!view.known || view.phase == Phase::Closed)
            && !inner.suspect.load(Ordering::Acquire)
            && inner.local_open_left(inner.clock.now()).is_none()
            && inner.batch.lock().is_ok_and(|b| b.is_empty())
    }

    async fn remote_acquire(&self) -> Result<RedisPermit<C>, CircuitOpen> {
        let inner = &self.inner;
        let r = inner.sample();
        // The token is ours before the call: if the reply never comes (a timeout), Redis
        // may still run the acquire, and the token cancels whatever slot it took.
        let token = inner.store.new_token();
        match inner
            .store
            .acquire_with_token(token, inner.now_arg(), r)
            .await
        {
            Ok(answer) => {
                let reply = inner.absorb(answer, false, Some(r));
                if let Some((phase, retry_after)) = reply.shadowed {
                    inner.emit(EventKind::ShadowRejected(CircuitOpen::new(
                        phase,
                        retry_after.map(Nanos::as_duration),
                    )));
                }
                match reply.decision {
                    ReplyDecision::Model(Decision::Admitted { generation, kind }) => {
                        let route = match (inner.mode, kind) {
                            (_, PermitKind::Passthrough) => Route::Free,
                            (Mode::LocalView(_), PermitKind::Normal) => Route::Batched,
                            _ => Route::Redis,
                        };
                        Ok(self.permit(generation, kind, reply.lease, route))
                    }
                    ReplyDecision::Model(Decision::Rejected { phase, retry_after }) => {
                        Err(inner
                            .reject(CircuitOpen::new(phase, retry_after.map(Nanos::as_duration))))
                    }
                    other => {
                        tracing::warn!(
                            target: "breakerbox_redis",
                            breaker = inner.name.as_str(),
                            "acquire.lua answered {other:?}; using the fallback"
                        );
                        self.fallback_acquire()
                    }
                }
            }
            Err(error) => {
                inner.orphan(token);
                inner.enter_outage(&error);
                self.fallback_acquire()
            }
        }
    }

    pub(super) fn permit(
        &self,
        generation: u64,
        kind: PermitKind,
        token: u64,
        route: Route<C>,
    ) -> RedisPermit<C> {
        RedisPermit::new(self.inner.clone(), generation, kind, token, route)
    }
}
