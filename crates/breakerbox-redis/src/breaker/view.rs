//! A node's local view of the shared phase.

mod seq_cell;

use breakerbox::{Nanos, Phase};

use seq_cell::SeqCell;

/// What this node last heard about the breaker in Redis, with Redis's remaining time
/// turned into a reading of the local clock (so clock skew between machines does not
/// matter: only durations cross the wire).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct View {
    /// The phase.
    pub(crate) phase: Phase,
    /// The generation.
    pub(crate) generation: u64,
    /// Open / ForcedOpen / Disabled: when the phase or override ends, on the local clock
    /// (`None`: never). Closed: when the ramp ends (rule 23; `None`: no ramp).
    pub(crate) until: Option<Nanos>,
    /// Whether anything was heard yet.
    pub(crate) known: bool,
    /// The closed phase's failure streak in Redis is long enough that the next failures
    /// may trip the breaker: acquires ask Redis rather than the view (and successes are
    /// sent at once) until a success ends the streak.
    pub(crate) warm: bool,
    /// The stored state's version (grows with every write within an incarnation).
    pub(crate) version: u64,
    /// The stored state's incarnation (0: nothing was stored).
    pub(crate) incarnation: u64,
    /// Rule 20: the shared breaker is in shadow mode.
    pub(crate) shadow: bool,
}

/// News about the stored state: what a script reply or a read says.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct News {
    pub(crate) phase: Phase,
    pub(crate) generation: u64,
    /// Time left of the phase or override, in microseconds (`None`: never); in closed,
    /// of the ramp (`None`: no ramp).
    pub(crate) remaining_us: Option<u64>,
    /// The closed phase's failure streak is long enough to make the view warm.
    pub(crate) warm: bool,
    pub(crate) version: u64,
    pub(crate) incarnation: u64,
    pub(crate) shadow: bool,
}

impl View {
    pub(crate) const UNKNOWN: View = View {
        phase: Phase::Closed,
        generation: 0,
        until: None,
        known: false,
        warm: false,
        version: 0,
        incarnation: 0,
        shadow: false,
    };

    /// Whether the phase's end (or the override's) is still ahead at `now`.
    pub(crate) fn holds_at(&self, now: Nanos) -> bool {
        self.until.is_none_or(|until| now < until)
    }

    /// Whether `news` is older than this view: the same incarnation at a lower version.
    /// Any state is newer than none (incarnation 0). News of another incarnation is
    /// neither older nor newer: only an authoritative read may replace the view with it (Redis lost the state, or the view is of a state Redis
    /// no longer holds).
    pub(crate) fn is_newer_or_equal(&self, news: &News) -> bool {
        !self.known
            || self.incarnation == 0
            || (news.incarnation == self.incarnation && news.version >= self.version)
    }

    /// Whether `news` says Redis lost what this view knew: another incarnation, or the
    /// same one at a lower version (a failover to a replica that was behind).
    pub(crate) fn is_lost_by(&self, news: &News) -> bool {
        self.known
            && self.incarnation != 0
            && (news.incarnation != self.incarnation || news.version < self.version)
    }

    /// The view after `news`, heard at local time `now`, if it is accepted: news is
    /// ordered by (incarnation, version), which the scripts make monotonic, never by
    /// Redis time (which steps back). `authoritative` news (a read this node's refresh
    /// made) is always accepted.
    pub(crate) fn merge(&self, news: &News, now: Nanos, authoritative: bool) -> Option<View> {
        if !authoritative && !self.is_newer_or_equal(news) {
            return None;
        }
        Some(View {
            phase: news.phase,
            generation: news.generation,
            until: news
                .remaining_us
                .map(|us| now.saturating_add(Nanos(us.saturating_mul(1_000)))),
            known: true,
            warm: news.phase == Phase::Closed && news.warm,
            version: news.version,
            incarnation: news.incarnation,
            shadow: news.shadow,
        })
    }

    /// The view with its phase set by this node (a manual operation), keeping the rest.
    pub(crate) fn with_phase(&self, phase: Phase, until: Option<Nanos>) -> View {
        View {
            phase,
            until,
            known: true,
            warm: false,
            ..*self
        }
    }
}

/// The view, readable without a lock: a [sequence lock](SeqCell) over four words.
/// Writers (script replies, messages, refreshes: rare) serialise; readers (every acquire)
/// retry only while a write is in progress.
#[derive(Debug)]
pub(crate) struct ViewCell {
    /// `[generation << 6 | shadow << 5 | warm << 4 | known << 3 | phase code, until (local nanoseconds,
    /// u64::MAX for none), version, incarnation]`.
    cell: SeqCell<4>,
}

impl ViewCell {
    /// A cell holding [`View::UNKNOWN`].
    pub(crate) fn new() -> ViewCell {
        ViewCell {
            cell: SeqCell::new(encode(&View::UNKNOWN)),
        }
    }

    /// The current view.
    #[inline]
    pub(crate) fn load(&self) -> View {
        decode(self.cell.load())
    }

    /// Replaces the view by `f(current)` if it gives one; returns whether it did.
    pub(crate) fn update(&self, f: impl FnOnce(&View) -> Option<View>) -> bool {
        self.cell
            .update(|words| f(&decode(words)).map(|next| encode(&next)))
    }

    /// How many times the view was replaced so far: what a caller notes before it sends
    /// a read, to know later whether the view moved meanwhile.
    pub(crate) fn writes(&self) -> u64 {
        self.cell.writes()
    }

    /// As [`ViewCell::update`], with `f` also told how many writes were made before this
    /// one (under the writers' lock, so no write comes between).
    pub(crate) fn update_counted(&self, f: impl FnOnce(&View, u64) -> Option<View>) -> bool {
        self.cell
            .update_counted(|words, writes| f(&decode(words), writes).map(|next| encode(&next)))
    }
}

fn encode(view: &View) -> [u64; 4] {
    [
        (view.generation << 6)
            | (u64::from(view.shadow) << 5)
            | (u64::from(view.warm) << 4)
            | (u64::from(view.known) << 3)
            | view.phase.index() as u64,
        view.until.map_or(u64::MAX, Nanos::as_u64),
        view.version,
        view.incarnation,
    ]
}

fn decode([word, until, version, incarnation]: [u64; 4]) -> View {
    View {
        phase: Phase::from_index((word & 0b111) as usize).unwrap_or(Phase::Disabled),
        generation: word >> 6,
        shadow: word & 0b10_0000 != 0,
        until: (until != u64::MAX).then_some(Nanos(until)),
        known: word & 0b1000 != 0,
        warm: word & 0b1_0000 != 0,
        version,
        incarnation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    fn view_of(generation: u64) -> View {
        View {
            phase: Phase::ALL[(generation % 5) as usize],
            generation,
            until: (!generation.is_multiple_of(3)).then_some(Nanos(generation * 1_000)),
            known: true,
            warm: generation % 3 == 1,
            version: generation * 7,
            incarnation: generation % 2 + 1,
            shadow: generation % 4 == 1,
        }
    }

    #[test]
    fn readers_never_see_a_torn_view_while_a_writer_updates_it() {
        let cell = Arc::new(ViewCell::new());
        assert_eq!(cell.load(), View::UNKNOWN);
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let cell = cell.clone();
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut seen = 0u64;
                    while !stop.load(Ordering::Relaxed) && seen < 10_000_000 {
                        let v = cell.load();
                        if v.known {
                            assert_eq!(v, view_of(v.generation));
                        }
                        seen += 1;
                    }
                })
            })
            .collect();
        for generation in 1..=200_000 {
            cell.update(|_| Some(view_of(generation)));
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().unwrap();
        }
        assert_eq!(cell.load(), view_of(200_000));
    }

    fn news(phase: Phase, version: u64, incarnation: u64) -> News {
        News {
            phase,
            generation: version,
            remaining_us: Some(10),
            warm: false,
            version,
            incarnation,
            shadow: false,
        }
    }

    #[test]
    fn news_is_ordered_by_version_not_by_time() {
        let v = View::UNKNOWN
            .merge(&news(Phase::Open, 3, 9), Nanos(5), false)
            .unwrap();
        assert_eq!(v.until, Some(Nanos(10_005)));
        // An older version is refused; the same or a newer one is taken.
        assert_eq!(v.merge(&news(Phase::Closed, 2, 9), Nanos(6), false), None);
        assert!(v.merge(&news(Phase::Open, 3, 9), Nanos(6), false).is_some());
        let newer = v
            .merge(&news(Phase::Closed, 4, 9), Nanos(6), false)
            .unwrap();
        assert_eq!((newer.phase, newer.version), (Phase::Closed, 4));
        // Another incarnation is taken only from an authoritative read, and says Redis
        // lost what the view knew.
        assert_eq!(v.merge(&news(Phase::Closed, 50, 10), Nanos(6), false), None);
        assert!(v.is_lost_by(&news(Phase::Closed, 50, 10)));
        assert!(v.is_lost_by(&news(Phase::Closed, 2, 9)));
        assert!(!v.is_lost_by(&news(Phase::Closed, 4, 9)));
        let read = v
            .merge(&news(Phase::Closed, 1, 10), Nanos(6), true)
            .unwrap();
        assert_eq!((read.phase, read.incarnation), (Phase::Closed, 10));
    }
}
