//! What a script's reply tells a breaker: its repairs, transitions and local open, and
//! the stored state as news for the node's view (rules 20 and 23: the shadow switch and
//! the ramp's time left).

use std::sync::atomic::Ordering;
use std::time::Duration;

use breakerbox::{Clock, Config, EventKind, Nanos, Phase, Rate};

use super::view::News;
use super::Inner;
use crate::events::Stats;
use crate::store::Answer;
use crate::wire::{Reply, StoredState};

/// How far news may take the view back.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Authority {
    /// Not at all: news older than the view is refused (script replies, messages).
    News,
    /// A read this node sent when the view had had `.0` writes: it replaces the view
    /// whatever its version (Redis may have lost state), unless the view was written
    /// since. Then a reply absorbed meanwhile is newer than the read, which is taken as
    /// news: another task's reply to a later write, absorbed between this read's
    /// arrival and its adoption, was rolled back (a shadow switch undone, so an outage's
    /// fallback rejected what shadow mode must admit).
    ReadSince(u64),
    /// Always: the end of an outage adopts what Redis holds.
    Always,
}

impl<C: Clock + Clone> Inner<C> {
    /// Takes in what a script call (run with jitter sample `r`, if it took one)
    /// answered: repairs, transitions and the view. `authoritative`: Redis's state after
    /// an outage, which replaces the view whatever its version.
    pub(crate) fn absorb(&self, answer: Answer, authoritative: bool, r: Option<f64>) -> Reply {
        Stats::add(&self.stats.redis_calls, 1);
        if let Some(reason) = answer.repaired {
            Stats::add(&self.stats.repairs, 1);
            self.emit(EventKind::CorruptStateRepaired { reason });
        }
        let reply = answer.reply;
        if let Some(r) = r {
            self.settle_sample(r, &reply);
        }
        let authority = if authoritative {
            Authority::Always
        } else {
            Authority::News
        };
        self.observe(&reply.state, reply.now_us, authority);
        for t in &reply.transitions {
            self.emit(EventKind::Transition(*t));
        }
        if let Some((reason, open_for)) = reply.local_open {
            self.enter_local_open(reason, open_for);
        }
        reply
    }

    /// Updates the view from `state` (as of Redis time `now_us`) if it is not older than
    /// the view, or if `authority` says it may be. News of another incarnation (Redis
    /// lost the state) asks for an authoritative re-read, which decides what to restore.
    pub(crate) fn observe(&self, state: &StoredState, now_us: u64, authority: Authority) -> bool {
        let ramp_us = self
            .config
            .ramp
            .map_or(0, |r| crate::wire::micros(r.duration));
        let news = news_of(state, now_us, warm_at(&self.config), ramp_us);
        let now = self.clock.now();
        let mut lost = false;
        #[cfg(feature = "metrics")]
        let before = self.view().phase;
        let accepted = self.view.update_counted(|v, writes| {
            lost = v.known && v.incarnation != news.incarnation;
            let authoritative = match authority {
                Authority::News => false,
                Authority::ReadSince(since) => writes == since,
                Authority::Always => true,
            };
            v.merge(&news, now, authoritative)
        });
        #[cfg(feature = "metrics")]
        if accepted && news.phase != before {
            breakerbox::metrics::set_phase(&self.name, news.phase);
        }
        if accepted {
            // Rule 20: the fallback breaker follows the fleet's shadow switch.
            if self.local.is_shadow() != news.shadow {
                self.local.set_shadow(news.shadow);
            }
            // Only accepted news counts as fresh: nothing refused can starve the refresh.
            self.last_news.store(now.as_u64(), Ordering::Release);
        } else if lost {
            self.request_refresh();
        }
        accepted
    }
}

/// Rule 23: the fraction the stored ramp admits at Redis time `now_us`, if one is active.
pub(super) fn ramp_now(config: &Config, s: &crate::wire::StoredState, now_us: u64) -> Option<Rate> {
    let (ramp, started) = (config.ramp?, s.ramp_started_us?);
    if s.phase != Phase::Closed {
        return None;
    }
    let elapsed = Nanos(now_us.saturating_sub(started).saturating_mul(1_000));
    ramp.fraction_ppm(elapsed)
        .and_then(|ppm| Rate::from_ppm(ppm).ok())
}

pub(super) fn micros_to_duration(us: u64) -> Duration {
    Duration::from_micros(us)
}

/// What a stored state says, as news for a view. `warm_at`: the failure streak from
/// which the next failures may trip the breaker; `ramp_us`: the config's ramp duration
/// (0: none). In closed, the time left is that of the ramp (rule 23; `None` without one).
pub(crate) fn news_of(state: &StoredState, now_us: u64, warm_at: u32, ramp_us: u64) -> News {
    let remaining_us = match state.phase {
        Phase::Closed if ramp_us > 0 => state.ramp_remaining_us(now_us, ramp_us),
        Phase::Closed => None,
        _ => state.remaining_us(now_us),
    };
    News {
        phase: state.phase,
        generation: state.generation,
        remaining_us,
        warm: state.consecutive_failures >= warm_at,
        version: state.version,
        incarnation: state.incarnation,
        shadow: state.shadow,
    }
}

/// The failure streak from which a view is warm: half the consecutive-failure threshold
/// (at least 1), or 2 without that rule (a healthy dependency with a small error rate
/// rarely fails twice in a row; a dead one does at once).
pub(crate) fn warm_at(config: &Config) -> u32 {
    config
        .consecutive_failures
        .map_or(2, |threshold| (threshold / 2).max(1))
}
