//! A lock-free time window of B buckets aligned to the clock's zero (rule 7).
//!
//! Each bucket holds a key (epoch tag and absolute bucket index) and packed counts. A
//! writer that finds a bucket from an earlier period claims it with a compare-and-swap on
//! the key and restarts its counts; writers racing on that exact rollover may lose an
//! outcome or two (never more than the number of concurrent writers), which is the price of
//! O(1) recording without a lock. Reading sums the B buckets still inside the window.
//! The key and counts layouts are in [`super::layout`].
//!
//! Rule numbers ("rule 7") refer to `docs/RULES.md` in the repository.

use super::layout::{
    tag_is_newer, BUCKET_CALLS_MASK as CALLS_MASK, BUCKET_CALLS_SHIFT as CALLS_SHIFT,
    BUCKET_FAILURES_SHIFT as FAILURES_SHIFT, BUCKET_FIELD_MASK as FIELD_MASK,
    BUCKET_INDEX_BITS as INDEX_BITS, BUCKET_INDEX_MASK as INDEX_MASK,
};
use crate::model::WindowCounts;
use crate::sync::{AtomicU64, Ordering};
use crate::Nanos;

struct Bucket {
    key: AtomicU64,
    counts: AtomicU64,
}

pub(crate) struct TimeWindow {
    width: u64,
    buckets: Box<[Bucket]>,
}

fn key(tag: u64, index: u64) -> u64 {
    (tag << INDEX_BITS) | (index & INDEX_MASK)
}

fn pack(c: WindowCounts) -> u64 {
    (c.calls.min(CALLS_MASK) << CALLS_SHIFT)
        | (c.failures.min(FIELD_MASK) << FAILURES_SHIFT)
        | c.slow.min(FIELD_MASK)
}

fn unpack(word: u64) -> WindowCounts {
    WindowCounts {
        calls: (word >> CALLS_SHIFT) & CALLS_MASK,
        failures: (word >> FAILURES_SHIFT) & FIELD_MASK,
        slow: word & FIELD_MASK,
    }
}

impl TimeWindow {
    pub(crate) fn new(width: Nanos, buckets: u32) -> TimeWindow {
        TimeWindow {
            width: width.as_u64().max(1),
            buckets: (0..buckets.max(1))
                .map(|_| Bucket {
                    key: AtomicU64::new(u64::MAX),
                    counts: AtomicU64::new(0),
                })
                .collect(),
        }
    }

    fn index(&self, now: Nanos) -> u64 {
        (now.as_u64() / self.width) & INDEX_MASK
    }

    /// Starts the window of a new closed phase (called under the breaker's lock): every
    /// bucket is re-keyed as an empty bucket of the new tag, so no leftover key can ever look
    /// newer than the current tag.
    pub(crate) fn reset(&self, tag: u64) {
        for bucket in self.buckets.iter() {
            bucket.counts.store(0, Ordering::Release);
            bucket.key.store(key(tag, 0), Ordering::Release);
        }
    }

    /// Files one outcome of the closed phase `tag` at `now` and returns the window's counts,
    /// or `None` when the writer belongs to an older phase.
    pub(crate) fn record(
        &self,
        tag: u64,
        failed: bool,
        slow: bool,
        now: Nanos,
    ) -> Option<WindowCounts> {
        let index = self.index(now);
        let bucket = self
            .buckets
            .get((index % self.buckets.len() as u64) as usize)?;
        let wanted = key(tag, index);
        let one = WindowCounts {
            calls: 1,
            failures: u64::from(failed),
            slow: u64::from(slow),
        };
        let mut current = bucket.key.load(Ordering::Acquire);
        loop {
            if current == wanted {
                break;
            }
            let current_tag = current >> INDEX_BITS;
            if current != u64::MAX && tag_is_newer(current_tag, tag) {
                return None;
            }
            if current_tag == tag && (current & INDEX_MASK) > index {
                // A later period already claimed the bucket (our reading lagged): it is
                // the nearest place to file the outcome.
                break;
            }
            match bucket.key.compare_exchange_weak(
                current,
                wanted,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    bucket.counts.store(pack(one), Ordering::Release);
                    return Some(self.counts(tag, now));
                }
                Err(actual) => current = actual,
            }
        }
        let _ = bucket
            .counts
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |word| {
                let c = unpack(word);
                Some(pack(WindowCounts {
                    calls: c.calls + one.calls,
                    failures: c.failures + one.failures,
                    slow: c.slow + one.slow,
                }))
            });
        Some(self.counts(tag, now))
    }

    /// The sum of the buckets of phase `tag` within the window at `now`.
    pub(crate) fn counts(&self, tag: u64, now: Nanos) -> WindowCounts {
        let current = self.index(now);
        let len = self.buckets.len() as u64;
        let mut total = WindowCounts::default();
        for bucket in self.buckets.iter() {
            let k = bucket.key.load(Ordering::Acquire);
            if k == u64::MAX || k >> INDEX_BITS != tag {
                continue;
            }
            let index = k & INDEX_MASK;
            if index <= current && current - index < len {
                let c = unpack(bucket.counts.load(Ordering::Acquire));
                total.calls += c.calls;
                total.failures += c.failures;
                total.slow += c.slow;
            }
        }
        total
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn old_buckets_fall_out_of_the_window() {
        let w = TimeWindow::new(Nanos(10), 3);
        w.record(0, true, false, Nanos(0));
        w.record(0, false, false, Nanos(15));
        w.record(0, false, true, Nanos(25));
        assert_eq!(w.counts(0, Nanos(29)).calls, 3);
        assert_eq!(w.counts(0, Nanos(30)).calls, 2);
        assert_eq!(w.counts(0, Nanos(30)).failures, 0);
        // Recycling bucket 0 for period 3 restarts it.
        let c = w.record(0, true, false, Nanos(31)).unwrap();
        assert_eq!((c.calls, c.failures, c.slow), (3, 1, 1));
    }

    #[test]
    fn another_tag_is_invisible() {
        let w = TimeWindow::new(Nanos(10), 3);
        w.record(2, true, false, Nanos(0));
        assert_eq!(w.counts(4, Nanos(1)).calls, 0);
        assert_eq!(w.record(2, true, false, Nanos(1)).map(|c| c.calls), Some(2));
        w.record(4, true, false, Nanos(2));
        assert_eq!(w.record(2, true, false, Nanos(3)), None);
        assert_eq!(w.counts(4, Nanos(3)).calls, 1);
    }
}
