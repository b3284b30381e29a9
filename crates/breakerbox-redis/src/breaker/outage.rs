//! Redis outages: the fallback policy, and resynchronisation when Redis is back.
//!
//! The fallback starts from the last shared state this node knew: an open phase (until X
//! on the local clock) keeps rejecting until X under every policy, then the local breaker
//! probes; a half-open phase probes locally; overrides hold as they were.
//!
//! Which state wins when Redis answers again (and on any authoritative read):
//! 1. A manual override made on this node during the outage is pushed to Redis (the
//!    operator's last word wins).
//! 2. Otherwise, if Redis lost the state this node knew (another incarnation: restarted
//!    empty; or a lower version: a failover to a replica that was behind) and the node
//!    knows an open phase, a half-open phase or an override that still holds, it is given
//!    back: an override is pushed as it was (with the time it has left); an open phase is
//!    restored for the time it has left if Redis is closed (`restore_open`); a half-open
//!    phase (or an open phase whose time is up) is restored as an open phase that ends at
//!    once, so the next acquire probes. Whatever the fallback policy.
//! 3. Otherwise, if the local fallback breaker tripped during the outage (it is open or
//!    half-open) and Redis is closed, the trip is pushed (`manual.lua trip`): Redis opens
//!    as if its own policy had tripped. If Redis is in any other phase, Redis wins.
//! 4. In every other case Redis wins: the local view is replaced by the stored state and
//!    the fallback breaker is reset for the next outage.
//!
//! Rule numbers ("rule 7") refer to `docs/RULES.md` in the repository.

use std::sync::atomic::Ordering;
use std::time::Duration;

use breakerbox::model::PermitKind;
use breakerbox::{CircuitOpen, Clock, EventKind, Nanos, Phase};

use super::permit::Route;
use super::{news_of, Authority, Inner, RedisBreaker, RedisPermit};
use crate::events::Stats;
use crate::options::Fallback;
use crate::store::{Chain, ManualOp, StoreError};
use crate::wire::Reply;

impl<C: Clock + Clone> Inner<C> {
    /// Starts an outage episode (reported once) after `error`.
    pub(crate) fn enter_outage(&self, error: &StoreError) {
        Stats::add(&self.stats.redis_errors, 1);
        if self.down.swap(true, Ordering::AcqRel) {
            return;
        }
        let now = self.clock.now();
        self.down_since.store(now.as_u64(), Ordering::Release);
        Stats::add(&self.stats.outages, 1);
        self.unsuspect();
        self.seed_fallback(now);
        tracing::warn!(
            target: "breakerbox_redis",
            breaker = self.name.as_str(),
            key = self.store.key(),
            fallback = ?self.fallback,
            error = %Chain(error),
            "redis unreachable; the fallback decides until it is back"
        );
        self.emit(EventKind::OutageStarted {
            error: Chain(error).to_string(),
        });
        self.wake.notify_one();
    }

    /// The local fallback breaker starts from the shared phase this node knew: open
    /// until its end (then it probes), or half-open (it probes at once).
    fn seed_fallback(&self, now: Nanos) {
        if self.fallback != Fallback::LocalBreaker {
            return;
        }
        let view = self.view();
        if !view.known {
            return;
        }
        let left = match view.phase {
            Phase::Open => view
                .until
                .map_or(Duration::ZERO, |u| u.saturating_sub(now).as_duration()),
            Phase::HalfOpen => Duration::ZERO,
            _ => return,
        };
        self.local.force_open_for(left);
    }

    /// The operation that gives back what Redis lost of the state this node knew, if
    /// anything (rule 2 above).
    pub(crate) fn restore_op(&self, stored: &Reply) -> Option<ManualOp> {
        let view = self.view();
        let now = self.clock.now();
        if !view.is_lost_by(&news_of(&stored.state, stored.now_us, 1, 0)) {
            return None;
        }
        let holds = view.holds_at(now);
        let left = view.until.map(|u| u.saturating_sub(now).as_duration());
        match view.phase {
            // An open phase with the time it had left. A half-open phase (or an open one
            // whose time is up) was not a recovery yet: it comes back as an open phase
            // that ends at once, so the next acquire probes, `max_probes` across the
            // fleet; the lost phase's probes are stale (a new generation).
            Phase::Open | Phase::HalfOpen => Some(ManualOp::RestoreOpen(
                left.filter(|_| holds && view.phase == Phase::Open)
                    .unwrap_or(Duration::ZERO),
            )),
            Phase::ForcedOpen if holds => Some(ManualOp::ForceOpen(left)),
            Phase::Disabled if holds => Some(ManualOp::Disable(left)),
            _ => None,
        }
    }

    /// Keeps a manual operation that did not reach Redis, to push when it is back: a
    /// shadow switch apart from the phase operations.
    pub(crate) fn keep_for_resync(&self, op: ManualOp) {
        match op {
            ManualOp::Shadow(on) => {
                if let Ok(mut pending) = self.pending_shadow.lock() {
                    *pending = Some(on);
                }
            }
            op => {
                if let Ok(mut pending) = self.pending_manual.lock() {
                    *pending = Some(op);
                }
            }
        }
    }

    /// Pushes `op`, returning Redis's state after it.
    async fn push(&self, op: ManualOp) -> Result<Reply, StoreError> {
        let r = self.sample();
        let answer = self.store.manual(op, self.now_arg(), r).await?;
        Ok(self.absorb(answer, false, Some(r)))
    }

    /// Takes in an authoritative read (a refresh) sent when the view had had `since`
    /// writes: gives back what Redis lost, then adopts Redis's state whatever its
    /// version. If the view was written since the read was sent, what it holds is newer
    /// than the read: nothing is given back, and the read is taken as news.
    pub(crate) async fn adopt(&self, read: Reply, since: u64) -> Result<(), StoreError> {
        let mut latest = read;
        let mut since = since;
        let restore = if self.view.writes() == since {
            self.restore_op(&latest)
        } else {
            None
        };
        if let Some(op) = restore {
            tracing::warn!(
                target: "breakerbox_redis",
                breaker = self.name.as_str(),
                pushed = op.name(),
                "redis lost the breaker's state; restoring what this node knew"
            );
            // The push's own reply, absorbed as news, is a write: then the view holds it.
            since = self.view.writes();
            latest = self.push(op).await?;
        }
        self.observe(&latest.state, latest.now_us, Authority::ReadSince(since));
        Ok(())
    }

    /// Redis answered a read again: push what must be pushed, adopt Redis's state, end
    /// the episode.
    pub(crate) async fn resync(&self, read: Reply) -> Result<(), StoreError> {
        let pending = self.pending_manual.lock().ok().and_then(|mut p| p.take());
        let local_tripped = self.fallback == Fallback::LocalBreaker
            && matches!(self.local.phase(), Phase::Open | Phase::HalfOpen);
        let push = pending.or_else(|| self.restore_op(&read)).or_else(|| {
            (local_tripped && read.state.phase == Phase::Closed).then(|| {
                let reason = self
                    .local_trip
                    .lock()
                    .ok()
                    .and_then(|r| *r)
                    .unwrap_or("consecutive_failures");
                ManualOp::Trip(reason)
            })
        });
        let mut latest = read;
        if let Some(op) = push {
            match self.push(op).await {
                Ok(reply) => latest = reply,
                Err(error) => {
                    if let (Some(op), Ok(mut p)) = (pending, self.pending_manual.lock()) {
                        p.get_or_insert(op);
                    }
                    return Err(error);
                }
            }
        }
        // Rule 20: a shadow switch made during the outage, after the phase it concerns.
        let shadow = self.pending_shadow.lock().ok().and_then(|mut p| p.take());
        if let Some(on) = shadow {
            match self.push(ManualOp::Shadow(on)).await {
                Ok(reply) => latest = reply,
                Err(error) => {
                    if let Ok(mut p) = self.pending_shadow.lock() {
                        p.get_or_insert(on);
                    }
                    return Err(error);
                }
            }
        }
        self.observe(&latest.state, latest.now_us, Authority::Always);
        self.local.reset();
        if let Ok(mut r) = self.local_trip.lock() {
            *r = None;
        }
        let since = Nanos(self.down_since.load(Ordering::Acquire));
        self.down.store(false, Ordering::Release);
        let lasted = self.clock.now().saturating_sub(since).as_duration();
        let pushed = push.map(ManualOp::name);
        tracing::info!(
            target: "breakerbox_redis",
            breaker = self.name.as_str(),
            lasted_ms = lasted.as_millis() as u64,
            pushed,
            "redis is back; state resynchronised"
        );
        self.emit(EventKind::OutageEnded { lasted, pushed });
        Ok(())
    }
}

impl<C: Clock + Clone> RedisBreaker<C> {
    /// Decides an acquire while Redis is away.
    pub(crate) fn fallback_acquire(&self) -> Result<RedisPermit<C>, CircuitOpen> {
        let inner = &self.inner;
        Stats::add(&inner.stats.fallback_calls, 1);
        #[cfg(feature = "metrics")]
        metrics::counter!("breakerbox_fallback_calls_total", "breaker" => inner.name.clone())
            .increment(1);
        // The last shared state this node knew holds through the outage, whatever the
        // policy: an open phase until its end, an override until it expires.
        let view = inner.view();
        let now = inner.clock.now();
        // Rule 20: in shadow mode (as last heard) the fallback rejects nothing either; its
        // would-be rejections are reported, not counted in Redis (it is away).
        let refuse = |open: CircuitOpen| {
            if view.known && view.shadow {
                inner.emit(EventKind::ShadowRejected(open));
                Ok(self.permit(view.generation, PermitKind::Passthrough, 0, Route::Free))
            } else {
                Err(inner.reject(open))
            }
        };
        if view.known && view.holds_at(now) {
            let retry = view.until.map(|u| u.saturating_sub(now).as_duration());
            match view.phase {
                Phase::Open | Phase::ForcedOpen => {
                    return refuse(CircuitOpen::new(view.phase, retry));
                }
                Phase::Disabled => {
                    return Ok(self.permit(
                        view.generation,
                        PermitKind::Passthrough,
                        0,
                        Route::Free,
                    ))
                }
                _ => {}
            }
        }
        match inner.fallback {
            Fallback::FailOpen => Ok(self.permit(0, PermitKind::Normal, 0, Route::Free)),
            Fallback::FailClosed => refuse(CircuitOpen::new(Phase::Open, None)),
            Fallback::LocalBreaker => match inner.local.try_acquire_owned() {
                Ok(permit) => {
                    let (generation, kind) = (permit.generation(), permit.kind());
                    Ok(self.permit(generation, kind, 0, Route::Local(Some(permit))))
                }
                Err(open) => refuse(open),
            },
        }
    }
}

#[cfg(test)]
#[path = "outage_tests.rs"]
mod tests;
