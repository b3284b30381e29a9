//! A count window: the last `size` non-ignored outcomes of one closed generation (rule 7).
//!
//! Plain successes and events are kept apart, because plain successes are most of the
//! traffic and all alike:
//! - An *event* (a failure or a slow call) is filed under the window's lock. It is given
//!   its number in the phase's sequence of outcomes (every outcome filed so far, itself
//!   included), and kept in a queue while it is among the last `size`.
//! - A *plain success* only needs counting. Once the window holds `min_calls` calls (the
//!   gate) no plain success can trip the breaker (it never raises a rate), so from then on
//!   it is counted in its thread's lane ([`super::lanes`]) with a plain store: no shared
//!   write, no lock. Before the gate, and on threads without a lane, it is filed under the
//!   lock, where it is evaluated (rule 3: a success can bring the window to `min_calls`).
//! - A *quiet* window (full: `size` outcomes or more, and no event among the last `size`)
//!   needs no counting at all: until the next event its counts are `size` calls and
//!   nothing else, however many plain successes arrive, so they return after one load,
//!   like a consecutive-failures breaker's. The next event ends the quiet under the lock; a
//!   plain success that saw the quiet before that is placed before the event, which its
//!   call overlaps or precedes (the event's call has not returned yet).
//!
//!   A window becomes quiet under the lock: when an outcome filed there leaves it so, or
//!   when a thread's lane count reaches a multiple of its look interval and the thread
//!   looks. The interval starts at the next power of two of `size` (at least 64) and
//!   doubles after each look that finds an event, up to 2^20 plain successes of a thread:
//!   steady failures pay almost nothing for looks, and a window whose failures stopped is
//!   quiet again within that many successes of a thread.
//!
//! Counts are exact: the number of outcomes filed, summed under the lock, is the true total
//! at an instant within the event's own call (see [`super::lanes`]), so the counts each
//! event sees are those of a sequential order of all outcomes consistent with real time.
//! The queue holds only events among the last `size` outcomes: memory is
//! O(min(size, events)), and filing an event costs O(1) amortized plus one sweep of the
//! lanes in use.
//!
//! Everything is keyed by the closed phase's full generation, so outcomes of an older phase
//! (stale permits) change nothing, however many generations pass.

use std::collections::VecDeque;

use super::lanes::Lanes;
use super::padded::Padded;
use crate::model::WindowCounts;
use crate::sync::{lock, AtomicU64, AtomicU8, Mutex, Ordering};

/// The window has not reached the gate: plain successes are filed under the lock.
const FILLING: u8 = 0;
/// Past the gate: plain successes are counted in their thread's lane.
const COUNTING: u8 = 1;
/// Full and without events: plain successes change nothing and are not counted.
const QUIET: u8 = 2;

pub(crate) struct CountWindow {
    size: u64,
    gate: u64,
    /// The lanes' look interval minus one: a lane whose count is a multiple of the interval
    /// looks whether the window has become quiet. It starts at `check_interval(size)` and
    /// doubles after each look that finds an event (up to `MAX_CHECK_INTERVAL`), so that
    /// steady failures do not pay for looks; entering the quiet starts it afresh. Written
    /// under the lock.
    check_mask: AtomicU64,
    /// `FILLING`, `COUNTING` or `QUIET`, for the current phase (written under the lock).
    mode: AtomicU8,
    lanes: Lanes,
    /// Locked by every event: kept off the line of `mode`, which every success reads.
    log: Padded<Mutex<Log>>,
}

/// A failure or slow call among the last `size` outcomes.
struct Event {
    number: u64,
    failed: bool,
    slow: bool,
}

/// The exact part of the window, under its lock.
struct Log {
    generation: u64,
    /// Outcomes filed under the lock (events, and plain successes that took it).
    filed: u64,
    events: VecDeque<Event>,
    failures: u64,
    slow: u64,
}

impl Log {
    fn new(generation: u64) -> Log {
        Log {
            generation,
            filed: 0,
            events: VecDeque::new(),
            failures: 0,
            slow: 0,
        }
    }
}

impl CountWindow {
    /// A window of the last `size` outcomes for generation `generation`; plain successes
    /// are evaluated until it holds `min_calls` calls.
    pub(crate) fn new(size: u32, min_calls: u32, generation: u64) -> CountWindow {
        let size = u64::from(size.max(1));
        CountWindow {
            size,
            gate: u64::from(min_calls).clamp(1, size),
            check_mask: AtomicU64::new(first_mask(size)),
            mode: AtomicU8::new(FILLING),
            lanes: Lanes::new(),
            log: Padded(Mutex::new(Log::new(generation))),
        }
    }

    /// Starts the window of a new closed phase (called under the breaker's lock).
    pub(crate) fn reset(&self, generation: u64) {
        let mut log = lock(&self.log);
        *log = Log::new(generation);
        self.mode.store(FILLING, Ordering::Release);
        self.check_mask
            .store(first_mask(self.size), Ordering::Relaxed);
    }

    /// What the window holds for the closed phase `generation`.
    pub(crate) fn counts(&self, generation: u64) -> WindowCounts {
        let mut log = lock(&self.log);
        if log.generation != generation {
            return WindowCounts::default();
        }
        let total = self.total(&log, generation);
        self.slide(&mut log, total)
    }

    /// Files one outcome of the closed phase `generation`. Returns the counts to evaluate,
    /// or `None` when nothing could trip (a plain success past the gate) or when the
    /// writer belongs to an older phase.
    #[inline(always)]
    pub(crate) fn record(&self, generation: u64, failed: bool, slow: bool) -> Option<WindowCounts> {
        if !failed && !slow {
            let mode = self.mode.load(Ordering::Acquire);
            if mode == QUIET {
                return None;
            }
            if mode == COUNTING {
                if let Some(lane) = self.lanes.mine() {
                    if let Some(count) = lane.try_add(generation, 0) {
                        if count & self.check_mask.load(Ordering::Relaxed) == 0 {
                            self.look_for_quiet(generation);
                        }
                        return None;
                    }
                }
            }
        }
        self.record_locked(generation, failed, slow)
    }

    /// A lane's periodic look: makes the window quiet if it is full and holds no event.
    #[cold]
    #[inline(never)]
    fn look_for_quiet(&self, generation: u64) {
        let mut log = lock(&self.log);
        if log.generation != generation {
            return;
        }
        let total = self.total(&log, generation);
        let counts = self.slide(&mut log, total);
        self.settle_mode(&log, total, counts);
        if self.mode.load(Ordering::Relaxed) != QUIET {
            let mask = self.check_mask.load(Ordering::Relaxed);
            let longer = (mask + 1).saturating_mul(2).min(MAX_CHECK_INTERVAL);
            self.check_mask.store(longer - 1, Ordering::Relaxed);
        }
    }

    /// Sets the mode the window is in after `total` outcomes with `counts` (under the
    /// lock, where every change of mode is made). Writes only a change: a store on every
    /// event would take the line from the other cores, whose plain successes read it.
    fn settle_mode(&self, log: &Log, total: u64, counts: WindowCounts) {
        let mode = if total >= self.size && log.events.is_empty() {
            QUIET
        } else if counts.calls >= self.gate {
            COUNTING
        } else {
            FILLING
        };
        if self.mode.load(Ordering::Relaxed) != mode {
            if mode == QUIET {
                self.check_mask
                    .store(first_mask(self.size), Ordering::Relaxed);
            }
            self.mode.store(mode, Ordering::Release);
        }
    }

    #[inline(never)]
    fn record_locked(&self, generation: u64, failed: bool, slow: bool) -> Option<WindowCounts> {
        let mut log = lock(&self.log);
        if log.generation != generation {
            return None;
        }
        // Every outcome that takes the lock is counted here, events and plain successes
        // alike; the thread's lane is only keyed to the phase on the way, so that its next
        // plain successes take the fast path.
        let event = failed || slow;
        log.filed += 1;
        if let Some(lane) = self.lanes.mine() {
            if !lane.holds(generation) {
                // The lane held an older phase's successes: they count for nothing now.
                lane.rekey(generation, 0, u64::MAX);
            }
        }
        let total = self.total(&log, generation);
        if event {
            log.events.push_back(Event {
                number: total,
                failed,
                slow,
            });
            log.failures += u64::from(failed);
            log.slow += u64::from(slow);
        }
        let counts = self.slide(&mut log, total);
        self.settle_mode(&log, total, counts);
        Some(counts)
    }

    /// How many outcomes of `generation` have been filed (under the lock).
    fn total(&self, log: &Log, generation: u64) -> u64 {
        let mut total = log.filed;
        self.lanes
            .each(generation, |lane| total = total.wrapping_add(lane.count));
        total
    }

    /// Drops the events no longer among the last `size` of `total` outcomes; returns the
    /// counts.
    fn slide(&self, log: &mut Log, total: u64) -> WindowCounts {
        while let Some(oldest) = log.events.front() {
            if oldest.number.saturating_add(self.size) > total {
                break;
            }
            log.failures -= u64::from(oldest.failed);
            log.slow -= u64::from(oldest.slow);
            log.events.pop_front();
        }
        WindowCounts {
            calls: total.min(self.size),
            failures: log.failures,
            slow: log.slow,
        }
    }
}

/// The longest interval between two looks of a lane: a window that had failures becomes
/// quiet again within this many plain successes of a thread once they have slid out.
const MAX_CHECK_INTERVAL: u64 = if cfg!(loom) { 8 } else { 1 << 20 };

/// How many plain successes a thread counts in its lane between two first looks for quiet: a
/// power of two (so that the test is a mask), at least the window's size, so that a full
/// window of successes since the last event can have passed; under loom, no more than that,
/// so that a model reaches it.
fn check_interval(size: u64) -> u64 {
    // `size` comes from a `u32`: its next power of two is at most 2^32.
    let interval = size.next_power_of_two();
    if cfg!(loom) {
        interval
    } else {
        interval.max(64)
    }
}

/// The look mask a phase starts with: its first interval, minus one.
fn first_mask(size: u64) -> u64 {
    check_interval(size) - 1
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn triple(c: WindowCounts) -> (u64, u64, u64) {
        (c.calls, c.failures, c.slow)
    }

    #[test]
    fn slides_over_the_last_size_outcomes() {
        let w = CountWindow::new(4, 1, 1);
        successes(&w, 10);
        assert_eq!(w.counts(1).calls, 4);
        assert_eq!(w.counts(1).failures, 0);
        w.record(1, true, true);
        w.record(1, true, false);
        assert_eq!(triple(w.counts(1)), (4, 2, 1));
        successes(&w, 2);
        assert_eq!(triple(w.counts(1)), (4, 2, 1));
        w.record(1, false, false);
        assert_eq!(triple(w.counts(1)), (4, 1, 0), "the slow failure slid out");
        w.record(1, false, false);
        assert_eq!(triple(w.counts(1)), (4, 0, 0));
    }

    /// Files `n` plain successes of generation 1.
    fn successes(w: &CountWindow, n: u32) {
        for _ in 0..n {
            w.record(1, false, false);
        }
    }

    fn mode(w: &CountWindow) -> u8 {
        w.mode.load(Ordering::Relaxed)
    }

    #[test]
    fn a_full_window_without_events_is_quiet_and_the_next_event_slides_as_if_counted() {
        // The gate is the size: the success that fills the window, filed under the lock,
        // leaves it quiet.
        let w = CountWindow::new(4, 4, 1);
        successes(&w, 3);
        assert_eq!(mode(&w), FILLING);
        w.record(1, false, false);
        assert_eq!(mode(&w), QUIET, "full, and no event among the last 4");
        for _ in 0..1_000 {
            assert_eq!(w.record(1, false, false), None);
        }
        assert_eq!(triple(w.counts(1)), (4, 0, 0));
        let c = w.record(1, true, false).expect("an event is evaluated");
        assert_eq!(triple(c), (4, 1, 0), "the quiet successes fill the window");
        assert_eq!(mode(&w), COUNTING, "the event ends the quiet");
        successes(&w, 3);
        assert_eq!(
            triple(w.counts(1)),
            (4, 1, 0),
            "the failure is among the last 4"
        );
        w.record(1, false, false);
        assert_eq!(
            triple(w.counts(1)),
            (4, 0, 0),
            "the 4th success after it slid it out"
        );
        assert_eq!(
            mode(&w),
            COUNTING,
            "`counts` only reads; the lane has not looked yet"
        );
    }

    #[test]
    fn a_lane_looks_for_quiet_every_interval_and_not_while_an_event_is_in_the_window() {
        let w = CountWindow::new(100, 1, 1);
        assert_eq!(check_interval(100), 128);
        w.record(1, false, false);
        w.record(1, true, false);
        assert_eq!(mode(&w), COUNTING);
        // The lane's 128th success looks: 130 outcomes, the failure 2nd of them, is out.
        successes(&w, 127);
        assert_eq!(mode(&w), COUNTING, "the lane has not looked yet");
        w.record(1, false, false);
        assert_eq!(mode(&w), QUIET);
        assert_eq!(triple(w.counts(1)), (100, 0, 0));

        // A failure now, and the lane's next look finds it within the window.
        let w = CountWindow::new(200, 1, 1);
        w.record(1, false, false);
        successes(&w, 200);
        w.record(1, true, false);
        successes(&w, 127);
        assert_eq!(mode(&w), COUNTING, "the failure is among the last 200");
        assert_eq!(
            w.check_mask.load(Ordering::Relaxed),
            511,
            "the interval doubled"
        );
        assert_eq!(triple(w.counts(1)), (200, 1, 0));
        successes(&w, 72);
        assert_eq!(
            triple(w.counts(1)),
            (200, 1, 0),
            "199 outcomes after the failure"
        );
        w.record(1, false, false);
        assert_eq!(triple(w.counts(1)), (200, 0, 0));
        // The look that found the failure doubled the interval: the next is at the lane's
        // 512th success (it has counted 400).
        successes(&w, 111);
        assert_eq!(mode(&w), COUNTING, "no look since the one at 256");
        w.record(1, false, false);
        assert_eq!(mode(&w), QUIET, "the look at 512");
        assert_eq!(
            w.check_mask.load(Ordering::Relaxed),
            255,
            "afresh once quiet"
        );
    }

    #[test]
    fn steady_failures_stretch_the_look_interval_to_its_cap() {
        let w = CountWindow::new(100, 1, 1);
        // A failure every 50 outcomes: every look finds one in the window.
        for i in 0..2_200_000u64 {
            w.record(1, i % 50 == 0, false);
        }
        assert_eq!(
            w.check_mask.load(Ordering::Relaxed),
            MAX_CHECK_INTERVAL - 1,
            "doubled at each look, and no further than the cap"
        );
        assert_eq!(mode(&w), COUNTING);
    }

    #[test]
    fn a_new_phase_looks_at_the_first_interval_again() {
        let w = CountWindow::new(4, 1, 1);
        assert_eq!(w.check_mask.load(Ordering::Relaxed), 63);
        w.check_mask.store(4095, Ordering::Relaxed);
        w.reset(2);
        assert_eq!(w.check_mask.load(Ordering::Relaxed), 63);
    }

    #[test]
    fn a_quiet_window_of_an_older_phase_starts_the_next_one_filling() {
        let w = CountWindow::new(2, 2, 1);
        w.record(1, false, false);
        w.record(1, false, false);
        assert_eq!(mode(&w), QUIET);
        w.reset(3);
        assert_eq!(mode(&w), FILLING);
        assert_eq!(w.record(1, true, false), None, "an older phase's event");
        let c = w.record(3, true, false).expect("evaluated");
        assert_eq!(triple(c), (1, 1, 0));
    }

    #[test]
    fn a_new_generation_starts_empty_and_ignores_older_writers() {
        let w = CountWindow::new(3, 1, 1);
        w.record(1, true, false);
        w.record(1, true, false);
        w.reset(3);
        assert_eq!(w.counts(3), WindowCounts::default());
        assert_eq!(w.counts(1), WindowCounts::default());
        assert_eq!(w.record(1, true, false), None);
        assert_eq!(w.record(1, false, false), None);
        assert_eq!(w.counts(3), WindowCounts::default());
        let c = w
            .record(3, false, false)
            .expect("evaluated before the gate");
        assert_eq!((c.calls, c.failures), (1, 0));
        w.record(3, true, false);
        w.record(3, true, false);
        w.record(3, false, false);
        assert_eq!(triple(w.counts(3)), (3, 2, 0));
    }

    #[test]
    fn plain_successes_are_evaluated_until_the_gate_and_only_events_after() {
        let w = CountWindow::new(10, 3, 0);
        assert!(w.record(0, false, false).is_some());
        assert!(w.record(0, false, false).is_some());
        let c = w
            .record(0, false, false)
            .expect("the success that reaches the gate");
        assert_eq!(c.calls, 3);
        assert_eq!(w.record(0, false, false), None, "past the gate");
        let c = w
            .record(0, true, false)
            .expect("an event is always evaluated");
        assert_eq!(triple(c), (5, 1, 0));
        let c = w
            .record(0, false, true)
            .expect("a slow success is an event");
        assert_eq!(triple(c), (6, 1, 1));
    }

    #[test]
    fn a_lane_left_from_an_older_generation_counts_nothing_in_the_new_one() {
        let w = CountWindow::new(100, 1, 1);
        successes(&w, 50);
        w.reset(2);
        // This thread's lane still holds 49 successes of generation 1.
        w.record(2, true, false);
        assert_eq!(triple(w.counts(2)), (1, 1, 0));
        w.record(2, false, false);
        w.record(2, false, false);
        assert_eq!(triple(w.counts(2)), (3, 1, 0));
    }

    #[test]
    fn a_success_on_a_lane_of_an_older_phase_is_counted_in_the_new_one() {
        let w = std::sync::Arc::new(CountWindow::new(100, 1, 1));
        successes(&w, 3);
        w.reset(2);
        // Another thread's failure opens the fast path of phase 2, while this thread's
        // lane is still keyed to phase 1.
        let other = std::sync::Arc::clone(&w);
        std::thread::spawn(move || other.record(2, true, false))
            .join()
            .expect("writer");
        w.record(2, false, false);
        assert_eq!(triple(w.counts(2)), (2, 1, 0));
    }

    #[test]
    fn threads_beyond_the_slots_file_under_the_lock_and_lose_nothing() {
        let _exclusive = super::super::thread_slot::SLOT_TESTS
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let threads = super::super::thread_slot::SLOTS + 16;
        let per_thread = 500u64;
        let w = std::sync::Arc::new(CountWindow::new(60_000, 1, 4));
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(threads));
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let w = std::sync::Arc::clone(&w);
                let barrier = std::sync::Arc::clone(&barrier);
                std::thread::spawn(move || {
                    // All threads are alive together, so some have no slot.
                    barrier.wait();
                    for i in 0..per_thread {
                        w.record(4, i % 50 == 0, false);
                    }
                    barrier.wait();
                })
            })
            .collect();
        for handle in handles {
            handle.join().expect("writer");
        }
        let c = w.counts(4);
        assert_eq!(c.calls, threads as u64 * per_thread);
        assert_eq!(c.failures, threads as u64 * 10);
    }

    #[test]
    fn concurrent_writers_lose_nothing() {
        let w = std::sync::Arc::new(CountWindow::new(60_000, 10, 7));
        let threads = 4;
        let per_thread = 10_000;
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let w = std::sync::Arc::clone(&w);
                std::thread::spawn(move || {
                    for i in 0..per_thread {
                        w.record(7, i % 10 == 0, i % 25 == 0);
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().expect("writer");
        }
        // The window is larger than everything filed: it holds every outcome.
        let c = w.counts(7);
        assert_eq!(c.calls, 40_000);
        assert_eq!(c.failures, 4 * 1_000);
        assert_eq!(c.slow, 4 * 400);
    }
}
