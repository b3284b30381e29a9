//! A time window of B buckets aligned to the clock's zero (rule 7), for one closed
//! generation.
//!
//! As in the count window ([`super::count_window`]), plain successes and events are kept
//! apart:
//! - The exact part lives under the window's lock: B bucket counters and their running
//!   total over the buckets still inside the window. Moving to a later bucket period
//!   retires the buckets that left (each bucket once per period it passes), so filing an
//!   outcome costs O(1) amortized whatever B is; no outcome ever sums the buckets.
//! - A plain success is counted in its thread's lane ([`super::lanes`]) with a plain store
//!   while the lane is keyed to the current generation and bucket period and the window is
//!   known to hold `min_calls` calls in that period (no plain success can trip the breaker
//!   then, and calls cannot fall within a period: buckets only leave at a period's end).
//!   The first success of a thread in a new period re-keys its lane under the lock,
//!   moving what it held into the bucket it belongs to.
//! - Reading sums the running total and the lanes whose period is inside the window: one
//!   sweep of the lanes in use.
//!
//! Counts are exact: no outcome is lost at a bucket edge (unlike the first version, which
//! could lose one per concurrent writer there), and the totals each event sees are those
//! of a sequential order of all outcomes consistent with real time (see [`super::lanes`]).
//! An outcome is filed at the coarse clock reading its thread took; a reading that lags a
//! bucket another thread has already started is filed in that later bucket.

use super::lanes::Lanes;
use super::padded::Padded;
use crate::model::WindowCounts;
use crate::sync::{lock, AtomicU64, Mutex, Ordering};
use crate::Nanos;

pub(crate) struct TimeWindow {
    width: u64,
    len: u64,
    gate: u64,
    /// The end of the bucket period in which the window is known to hold the gate's calls
    /// (0 when not known; cleared by `reset`).
    ready_until: AtomicU64,
    lanes: Lanes,
    /// Locked by every event: kept off the line of `ready_until`, which every success
    /// reads.
    exact: Padded<Mutex<Buckets>>,
}

/// One bucket: the period it counts and what it counted.
#[derive(Copy, Clone, Default)]
struct Bucket {
    period: u64,
    counts: WindowCounts,
}

/// The exact part of the window, under its lock.
struct Buckets {
    generation: u64,
    /// The latest period anything was filed in or read at.
    current: u64,
    slots: Box<[Bucket]>,
    /// The sum of the slots whose period is inside the window ending at `current`.
    total: WindowCounts,
}

fn add(into: &mut WindowCounts, c: WindowCounts) {
    into.calls += c.calls;
    into.failures += c.failures;
    into.slow += c.slow;
}

/// Whether `period` is inside the window of `len` periods ending at period `current`.
fn within(period: u64, current: u64, len: u64) -> bool {
    period <= current && current - period < len
}

fn subtract(from: &mut WindowCounts, c: WindowCounts) {
    from.calls = from.calls.saturating_sub(c.calls);
    from.failures = from.failures.saturating_sub(c.failures);
    from.slow = from.slow.saturating_sub(c.slow);
}

impl Buckets {
    fn new(generation: u64, len: u64) -> Buckets {
        Buckets {
            generation,
            current: 0,
            slots: (0..len).map(|_| Bucket::default()).collect(),
            total: WindowCounts::default(),
        }
    }

    fn len(&self) -> u64 {
        self.slots.len() as u64
    }

    /// Whether `period` is inside the window ending at the current period.
    fn inside(&self, period: u64) -> bool {
        within(period, self.current, self.len())
    }

    /// Moves the window's end to `period` if it is later, retiring the buckets that leave.
    /// Costs one step per period passed, and at most one per bucket.
    fn advance(&mut self, period: u64) {
        if period <= self.current {
            return;
        }
        let len = self.len();
        if period - self.current >= len {
            // Every bucket has left: nothing is inside any more. Slots keep their old
            // periods, which no longer count.
            self.total = WindowCounts::default();
            self.current = period;
            return;
        }
        for passing in self.current + 1..=period {
            let index = (passing % len) as usize;
            if let Some(slot) = self.slots.get_mut(index) {
                // A slot's period is at most `current`, so before `passing`.
                if within(slot.period, self.current, len) {
                    // Inside the window ending at `current`, so in `total`.
                    subtract(&mut self.total, slot.counts);
                }
                *slot = Bucket {
                    period: passing,
                    counts: WindowCounts::default(),
                };
            }
        }
        self.current = period;
    }

    /// Files `counts` in bucket `period`, if it is still inside the window.
    fn file(&mut self, period: u64, counts: WindowCounts) {
        if !self.inside(period) {
            return;
        }
        let index = (period % self.len()) as usize;
        if let Some(slot) = self.slots.get_mut(index) {
            if slot.period != period {
                // Left over from a period before a jump of a whole window: empty now.
                *slot = Bucket {
                    period,
                    counts: WindowCounts::default(),
                };
            }
            add(&mut slot.counts, counts);
            add(&mut self.total, counts);
        }
    }
}

impl TimeWindow {
    /// A window of `buckets` buckets of `width` for generation `generation`; plain
    /// successes are evaluated while it holds fewer than `min_calls` calls.
    pub(crate) fn new(width: Nanos, buckets: u32, min_calls: u32, generation: u64) -> TimeWindow {
        let len = u64::from(buckets.max(1));
        TimeWindow {
            width: width.as_u64().max(1),
            len,
            gate: u64::from(min_calls).max(1),
            ready_until: AtomicU64::new(0),
            lanes: Lanes::new(),
            exact: Padded(Mutex::new(Buckets::new(generation, len))),
        }
    }

    fn period(&self, now: Nanos) -> u64 {
        now.as_u64() / self.width
    }

    /// Starts the window of a new closed phase (called under the breaker's lock).
    pub(crate) fn reset(&self, generation: u64) {
        let mut exact = lock(&self.exact);
        *exact = Buckets::new(generation, self.len);
        self.ready_until.store(0, Ordering::Release);
    }

    /// Files one outcome of the closed phase `generation` at `now`. Returns the counts to
    /// evaluate, or `None` when nothing could trip (a plain success while the window holds
    /// `min_calls`) or when the writer belongs to an older phase.
    #[inline(always)]
    pub(crate) fn record(
        &self,
        generation: u64,
        failed: bool,
        slow: bool,
        now: Nanos,
    ) -> Option<WindowCounts> {
        if !failed && !slow && now.as_u64() < self.ready_until.load(Ordering::Acquire) {
            if let Some(lane) = self.lanes.mine() {
                if lane.try_add(generation, now.as_u64()).is_some() {
                    return None;
                }
            }
        }
        self.record_locked(generation, failed, slow, now)
    }

    #[inline(never)]
    fn record_locked(
        &self,
        generation: u64,
        failed: bool,
        slow: bool,
        now: Nanos,
    ) -> Option<WindowCounts> {
        let mut exact = lock(&self.exact);
        if exact.generation != generation {
            return None;
        }
        exact.advance(self.period(now));
        // A reading that lags a period another thread started is filed in that period.
        let period = exact.current;
        let period_end = period.saturating_add(1).saturating_mul(self.width);
        let plain = !failed && !slow;
        match self.lanes.mine() {
            Some(lane) if plain => {
                let held = lane.read(generation);
                if held.map(|held| held.period) != Some(period) {
                    if let Some(held) = held {
                        exact.file(
                            held.period,
                            WindowCounts {
                                calls: held.count,
                                ..WindowCounts::default()
                            },
                        );
                    }
                    lane.rekey(generation, period, period_end);
                }
                lane.add();
            }
            _ => exact.file(
                period,
                WindowCounts {
                    calls: 1,
                    failures: u64::from(failed),
                    slow: u64::from(slow),
                },
            ),
        }
        let counts = self.sum(&exact, generation);
        if counts.calls >= self.gate {
            // Written once per period: a write on every event would take the line from
            // the other cores, whose plain successes read it. Every write is made under
            // the lock (here and in `reset`), in a period never before the last one
            // written: a plain store of a value that changed.
            if period_end != self.ready_until.load(Ordering::Relaxed) {
                self.ready_until.store(period_end, Ordering::Release);
            }
        }
        Some(counts)
    }

    /// The running total plus the lanes' successes inside the window (under the lock).
    fn sum(&self, exact: &Buckets, generation: u64) -> WindowCounts {
        let mut counts = exact.total;
        self.lanes.each(generation, |lane| {
            if exact.inside(lane.period) {
                counts.calls += lane.count;
            }
        });
        counts
    }

    /// What the window holds for phase `generation` at `now`.
    pub(crate) fn counts(&self, generation: u64, now: Nanos) -> WindowCounts {
        let mut exact = lock(&self.exact);
        if exact.generation != generation {
            return WindowCounts::default();
        }
        exact.advance(self.period(now));
        self.sum(&exact, generation)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn triple(c: WindowCounts) -> (u64, u64, u64) {
        (c.calls, c.failures, c.slow)
    }

    #[test]
    fn old_buckets_fall_out_of_the_window() {
        let w = TimeWindow::new(Nanos(10), 3, 1, 0);
        w.record(0, true, false, Nanos(0));
        w.record(0, false, false, Nanos(15));
        w.record(0, false, true, Nanos(25));
        assert_eq!(w.counts(0, Nanos(29)).calls, 3);
        assert_eq!(w.counts(0, Nanos(30)).calls, 2);
        assert_eq!(w.counts(0, Nanos(30)).failures, 0);
        // Recycling bucket 0 for period 3 restarts it.
        let c = w.record(0, true, false, Nanos(31)).expect("an event");
        assert_eq!(triple(c), (3, 1, 1));
    }

    #[test]
    fn another_generation_is_invisible() {
        let w = TimeWindow::new(Nanos(10), 3, 1, 2);
        w.record(2, true, false, Nanos(0));
        assert_eq!(w.counts(4, Nanos(1)).calls, 0);
        assert_eq!(w.record(2, true, false, Nanos(1)).map(|c| c.calls), Some(2));
        w.reset(4);
        w.record(4, true, false, Nanos(2));
        assert_eq!(w.record(2, true, false, Nanos(3)), None);
        assert_eq!(w.counts(4, Nanos(3)).calls, 1);
    }

    #[test]
    fn successes_in_lanes_move_to_their_bucket_and_leave_with_it() {
        let w = TimeWindow::new(Nanos(10), 3, 1, 0);
        // Period 0: the first success is evaluated, the rest go to this thread's lane.
        assert!(w.record(0, false, false, Nanos(1)).is_some());
        for t in 2..7 {
            assert_eq!(w.record(0, false, false, Nanos(t)), None);
        }
        assert_eq!(w.counts(0, Nanos(9)).calls, 6);
        // Period 1: the lane moves its 6 into bucket 0 and starts again.
        assert!(w.record(0, false, false, Nanos(11)).is_some());
        assert_eq!(w.record(0, false, false, Nanos(12)), None);
        let c = w.record(0, true, false, Nanos(13)).expect("an event");
        assert_eq!(triple(c), (9, 1, 0));
        // Period 3: bucket 0 has left; buckets 1 and the lane's count of period 1 remain.
        assert_eq!(triple(w.counts(0, Nanos(30))), (3, 1, 0));
        // Period 4: bucket 1 has left too; the lane's successes of period 1 with it.
        assert_eq!(triple(w.counts(0, Nanos(40))), (0, 0, 0));
    }

    #[test]
    fn a_gap_of_a_whole_window_empties_it() {
        let w = TimeWindow::new(Nanos(10), 4, 1, 0);
        for t in 0..40 {
            w.record(0, t % 3 == 0, false, Nanos(t));
        }
        assert_eq!(w.counts(0, Nanos(39)).calls, 40);
        assert_eq!(triple(w.counts(0, Nanos(1_000))), (0, 0, 0));
        let c = w.record(0, true, false, Nanos(1_001)).expect("an event");
        assert_eq!(triple(c), (1, 1, 0));
        w.record(0, false, false, Nanos(1_011));
        assert_eq!(triple(w.counts(0, Nanos(1_019))), (2, 1, 0));
    }

    #[test]
    fn plain_successes_are_evaluated_until_the_gate_in_each_period() {
        let w = TimeWindow::new(Nanos(10), 2, 3, 0);
        assert!(w.record(0, false, false, Nanos(0)).is_some());
        assert!(w.record(0, false, false, Nanos(1)).is_some());
        assert_eq!(
            w.record(0, false, false, Nanos(2)).map(|c| c.calls),
            Some(3)
        );
        assert_eq!(w.record(0, false, false, Nanos(3)), None, "past the gate");
        // A new period is evaluated again: the window may have lost calls at its start.
        assert_eq!(
            w.record(0, false, false, Nanos(10)).map(|c| c.calls),
            Some(5)
        );
        assert_eq!(w.record(0, false, false, Nanos(11)), None);
        // Period 2: the 4 of period 0 left; 2 remain, so successes are evaluated again.
        assert_eq!(
            w.record(0, false, false, Nanos(20)).map(|c| c.calls),
            Some(3)
        );
    }

    #[test]
    fn a_success_at_the_first_instant_of_a_period_below_the_gate_is_evaluated() {
        // One bucket, gate 2: period 0 reaches the gate (the fast path is open until 10).
        let w = TimeWindow::new(Nanos(10), 1, 2, 0);
        assert_eq!(
            w.record(0, false, false, Nanos(0)).map(|c| c.calls),
            Some(1)
        );
        assert_eq!(
            w.record(0, false, false, Nanos(1)).map(|c| c.calls),
            Some(2)
        );
        assert_eq!(w.record(0, false, false, Nanos(2)), None, "past the gate");
        // At 10 period 0 has left: this thread's lane is keyed to period 1, below the
        // gate, so the next success at the same instant is evaluated again, not counted
        // on the fast path (which is open before 10 only).
        assert_eq!(
            w.record(0, false, false, Nanos(10)).map(|c| c.calls),
            Some(1)
        );
        assert_eq!(
            w.record(0, false, false, Nanos(10)).map(|c| c.calls),
            Some(2)
        );
        assert_eq!(w.record(0, false, false, Nanos(10)), None, "the gate again");
    }

    #[test]
    fn a_success_on_a_lane_of_an_older_phase_is_counted_in_the_new_one() {
        let w = std::sync::Arc::new(TimeWindow::new(Nanos(10), 3, 1, 1));
        for t in 0..3 {
            w.record(1, false, false, Nanos(t));
        }
        w.reset(2);
        // Another thread's failure opens the fast path of phase 2 in period 0, while this
        // thread's lane is still keyed to phase 1 (and period 0).
        let other = std::sync::Arc::clone(&w);
        std::thread::spawn(move || other.record(2, true, false, Nanos(4)))
            .join()
            .expect("writer");
        w.record(2, false, false, Nanos(5));
        assert_eq!(triple(w.counts(2, Nanos(6))), (2, 1, 0));
    }

    #[test]
    fn a_thousand_buckets_file_in_constant_time_and_count_exactly() {
        let w = TimeWindow::new(Nanos(1), 1_000, 1, 0);
        for t in 0..5_000u64 {
            w.record(0, t % 10 == 0, false, Nanos(t));
        }
        // The window ending at 4,999 holds periods 4,000..=4,999: one outcome each.
        assert_eq!(triple(w.counts(0, Nanos(4_999))), (1_000, 100, 0));
    }

    #[test]
    fn concurrent_writers_at_bucket_edges_lose_nothing() {
        let w = std::sync::Arc::new(TimeWindow::new(Nanos(100), 1_000, 5, 3));
        let threads = 4;
        let per_thread = 20_000u64;
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let w = std::sync::Arc::clone(&w);
                std::thread::spawn(move || {
                    for i in 0..per_thread {
                        // Every thread walks the same clock: edges every 100 outcomes.
                        w.record(3, i % 10 == 0, i % 50 == 0, Nanos(i));
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().expect("writer");
        }
        // 20,000 ns in buckets of 100: 200 periods, all inside a window of 1,000.
        let c = w.counts(3, Nanos(per_thread));
        assert_eq!(triple(c), (80_000, 8_000, 1_600));
    }
}
