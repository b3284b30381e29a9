//! A node's local view of the shared phase.

use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Mutex;

use breakerbox::{Nanos, Phase};

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
    /// (`None`: never).
    pub(crate) until: Option<Nanos>,
    /// Whether anything was heard yet.
    pub(crate) known: bool,
    /// The Redis time (microseconds) the news was true at: later news wins.
    pub(crate) as_of_us: u64,
}

impl View {
    pub(crate) const UNKNOWN: View = View {
        phase: Phase::Closed,
        generation: 0,
        until: None,
        known: false,
        as_of_us: 0,
    };

    /// Whether the phase's end (or the override's) is still ahead at `now`.
    pub(crate) fn holds_at(&self, now: Nanos) -> bool {
        self.until.is_none_or(|until| now < until)
    }

    /// The view after news of `phase`/`generation` with `remaining_us` left (`None`:
    /// never), true at Redis time `as_of_us` and heard at local time `now`. News older
    /// than what the view holds (a reply overtaken by a pub/sub message, or the reverse)
    /// is ignored unless `force`. Ordering by Redis time rather than by generation keeps
    /// a breaker whose hash expired or was lost (generation back to 0) in sync.
    pub(crate) fn merge(
        &self,
        phase: Phase,
        generation: u64,
        remaining_us: Option<u64>,
        (as_of_us, now): (u64, Nanos),
        force: bool,
    ) -> View {
        if self.known && !force && as_of_us < self.as_of_us {
            return *self;
        }
        View {
            phase,
            generation,
            until: remaining_us.map(|us| now.saturating_add(Nanos(us.saturating_mul(1_000)))),
            known: true,
            as_of_us,
        }
    }
}

/// The view, readable without a lock: a sequence lock over three atomic words. Writers
/// (script replies, messages, refreshes: rare) serialise on a mutex; readers (every
/// acquire) retry only while a write is in progress.
#[derive(Debug)]
pub(crate) struct ViewCell {
    seq: AtomicU64,
    /// `generation << 4 | known << 3 | phase code`.
    word: AtomicU64,
    /// Local nanoseconds, `u64::MAX` for none.
    until: AtomicU64,
    as_of_us: AtomicU64,
    writer: Mutex<()>,
}

impl ViewCell {
    /// A cell holding [`View::UNKNOWN`].
    pub(crate) fn new() -> ViewCell {
        let cell = ViewCell {
            seq: AtomicU64::new(0),
            word: AtomicU64::new(0),
            until: AtomicU64::new(u64::MAX),
            as_of_us: AtomicU64::new(0),
            writer: Mutex::new(()),
        };
        cell.update(|_| View::UNKNOWN);
        cell
    }

    /// The current view.
    #[inline]
    pub(crate) fn load(&self) -> View {
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 & 1 == 0 {
                let word = self.word.load(Ordering::Relaxed);
                let until = self.until.load(Ordering::Relaxed);
                let as_of_us = self.as_of_us.load(Ordering::Relaxed);
                fence(Ordering::Acquire);
                if self.seq.load(Ordering::Relaxed) == s1 {
                    return View {
                        phase: Phase::from_index((word & 0b111) as usize)
                            .unwrap_or(Phase::Disabled),
                        generation: word >> 4,
                        until: (until != u64::MAX).then_some(Nanos(until)),
                        known: word & 0b1000 != 0,
                        as_of_us,
                    };
                }
            }
            std::hint::spin_loop();
        }
    }

    /// Replaces the view by `f(current)`.
    pub(crate) fn update(&self, f: impl FnOnce(&View) -> View) {
        let _writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let next = f(&self.load());
        let word =
            (next.generation << 4) | (u64::from(next.known) << 3) | next.phase.index() as u64;
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        self.word.store(word, Ordering::Relaxed);
        self.until.store(
            next.until.map_or(u64::MAX, |u| u.as_u64()),
            Ordering::Relaxed,
        );
        self.as_of_us.store(next.as_of_us, Ordering::Relaxed);
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    fn view_of(generation: u64) -> View {
        View {
            phase: Phase::ALL[(generation % 5) as usize],
            generation,
            until: (generation % 3 != 0).then_some(Nanos(generation * 1_000)),
            known: true,
            as_of_us: generation * 7,
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
            cell.update(|_| view_of(generation));
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().unwrap();
        }
        assert_eq!(cell.load(), view_of(200_000));
    }

    #[test]
    fn older_news_is_ignored_unless_forced() {
        let v = View::UNKNOWN.merge(Phase::Open, 3, Some(10), (100, Nanos(5)), false);
        assert_eq!(v.until, Some(Nanos(10_005)));
        let older = v.merge(Phase::Closed, 2, None, (99, Nanos(6)), false);
        assert_eq!(older, v);
        let forced = v.merge(Phase::Closed, 0, None, (1, Nanos(6)), true);
        assert_eq!((forced.phase, forced.generation), (Phase::Closed, 0));
    }
}
