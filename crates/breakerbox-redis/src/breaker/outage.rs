//! Redis outages: the fallback policy, and resynchronisation when Redis is back.
//!
//! Which state wins when Redis returns:
//! 1. A manual override made on this node during the outage is pushed to Redis (the
//!    operator's last word wins).
//! 2. Otherwise, if the local fallback breaker tripped during the outage (it is open or
//!    half-open) and Redis is closed, the trip is pushed (`manual.lua trip`): Redis opens
//!    as if its own policy had tripped. If Redis is in any other phase, Redis wins.
//!    The same holds for an override this node saw before the outage when Redis comes
//!    back without it (restarted empty: its generation went back).
//! 3. In every other case Redis wins: the local view is replaced by the stored state and
//!    the fallback breaker is reset for the next outage.

use std::sync::atomic::Ordering;

use breakerbox::model::PermitKind;
use breakerbox::{CircuitOpen, Clock, Nanos, Phase};

use super::permit::Route;
use super::{Inner, RedisBreaker, RedisPermit};
use crate::events::{RedisEvent, Stats};
use crate::options::Fallback;
use crate::store::{ManualOp, StoreError};
use crate::wire::Reply;

impl<C: Clock + Clone> Inner<C> {
    /// Starts an outage episode (reported once) after `error`.
    pub(crate) fn enter_outage(&self, error: &StoreError) {
        Stats::add(&self.stats.redis_errors, 1);
        if self.down.swap(true, Ordering::AcqRel) {
            return;
        }
        self.down_since
            .store(self.clock.now().as_u64(), Ordering::Release);
        Stats::add(&self.stats.outages, 1);
        tracing::warn!(
            target: "breakerbox_redis",
            breaker = self.name.as_str(),
            key = self.store.key(),
            fallback = ?self.fallback,
            %error,
            "redis unreachable; the fallback decides until it is back"
        );
        self.emit(RedisEvent::OutageStarted {
            error: error.to_string(),
        });
        self.wake.notify_one();
    }

    /// Redis answered `read` again: push what must be pushed, adopt Redis's state, end
    /// the episode.
    pub(crate) async fn resync(&self, read: Reply) -> Result<(), StoreError> {
        let mut pushed = None;
        let mut pending = self.pending_manual.lock().ok().and_then(|mut p| p.take());
        let mut latest = read;
        // Redis lost the state (restarted empty: the generation went back) while this node
        // holds an override it saw: push the override again.
        let view = self.view();
        let now = self.clock.now();
        if pending.is_none()
            && view.known
            && view.holds_at(now)
            && latest.state.generation < view.generation
        {
            let left = view.until.map(|u| u.saturating_sub(now).as_duration());
            pending = match view.phase {
                Phase::ForcedOpen => Some(ManualOp::ForceOpen(left)),
                Phase::Disabled => Some(ManualOp::Disable(left)),
                _ => None,
            };
        }
        if let Some(op) = pending {
            match self.store.manual(op, self.now_arg(), self.sample()).await {
                Ok(answer) => {
                    latest = answer.reply;
                    pushed = Some(match op {
                        ManualOp::ForceOpen(_) => "force_open",
                        ManualOp::Disable(_) => "disable",
                        ManualOp::Reset => "reset",
                        ManualOp::Trip(_) => "trip",
                        ManualOp::Repair => "repair",
                    });
                }
                Err(error) => {
                    if let Ok(mut p) = self.pending_manual.lock() {
                        p.get_or_insert(op);
                    }
                    return Err(error);
                }
            }
        } else if self.fallback == Fallback::LocalBreaker
            && matches!(self.local.phase(), Phase::Open | Phase::HalfOpen)
            && latest.state.phase == Phase::Closed
        {
            let reason = self
                .local_trip
                .lock()
                .ok()
                .and_then(|r| *r)
                .unwrap_or("consecutive_failures");
            let answer = self
                .store
                .manual(ManualOp::Trip(reason), self.now_arg(), self.sample())
                .await?;
            latest = answer.reply;
            pushed = Some("trip");
        }
        for t in &latest.transitions {
            self.emit(RedisEvent::Transition(*t));
        }
        self.observe(&latest.state, latest.now_us, true);
        self.local.reset();
        if let Ok(mut r) = self.local_trip.lock() {
            *r = None;
        }
        let since = Nanos(self.down_since.load(Ordering::Acquire));
        self.down.store(false, Ordering::Release);
        let lasted = self.clock.now().saturating_sub(since).as_duration();
        tracing::info!(
            target: "breakerbox_redis",
            breaker = self.name.as_str(),
            lasted_ms = lasted.as_millis() as u64,
            pushed,
            "redis is back; state resynchronised"
        );
        self.emit(RedisEvent::OutageEnded { lasted, pushed });
        Ok(())
    }
}

impl<C: Clock + Clone> RedisBreaker<C> {
    /// Decides an acquire while Redis is away.
    pub(crate) fn fallback_acquire(&self) -> Result<RedisPermit<C>, CircuitOpen> {
        let inner = &self.inner;
        Stats::add(&inner.stats.fallback_calls, 1);
        // A manual override this node made or saw is kept through the outage.
        let view = inner.view();
        let now = inner.clock.now();
        if view.known && view.holds_at(now) {
            match view.phase {
                Phase::ForcedOpen => {
                    let retry = view.until.map(|u| u.saturating_sub(now).as_duration());
                    return Err(inner.reject(CircuitOpen::new(Phase::ForcedOpen, retry)));
                }
                Phase::Disabled => {
                    return Ok(self.permit(view.generation, PermitKind::Passthrough, Route::Free))
                }
                _ => {}
            }
        }
        match inner.fallback {
            Fallback::FailOpen => Ok(self.permit(0, PermitKind::Normal, Route::Free)),
            Fallback::FailClosed => Err(inner.reject(CircuitOpen::new(Phase::Open, None))),
            Fallback::LocalBreaker => match inner.local.try_acquire_owned() {
                Ok(permit) => {
                    let (generation, kind) = (permit.generation(), permit.kind());
                    Ok(self.permit(generation, kind, Route::Local(Some(permit))))
                }
                Err(open) => Err(inner.reject(open)),
            },
        }
    }
}
