//! A lock-free count window: the last `size` non-ignored outcomes in a ring.
//!
//! Each slot holds an epoch tag (the closed generation that wrote it) and an outcome code.
//! A new closed phase re-tags every slot as empty under the breaker's lock, and writers
//! that still hold an older tag recognise that they are stale. Counts (calls, failures,
//! slow) live in one packed word with the tag (layouts in [`super::layout`]),
//! adjusted by the difference between the slot's old and new outcome; a success replacing
//! a success writes nothing but the ring head. A writer from an older phase (its tag is
//! behind) never overwrites a newer slot and never touches newer counts.

use super::layout::{
    tag_is_newer, SLOT_CODE_BITS, SLOT_CODE_MASK, WINDOW_COUNT_BITS as FIELD,
    WINDOW_COUNT_MASK as FIELD_MASK, WINDOW_TAG_SHIFT,
};
use crate::model::WindowCounts;
use crate::sync::{AtomicU32, AtomicU64, Ordering};

const CODE_COUNTED: u32 = 1;
const CODE_FAILED: u32 = 2;
const CODE_SLOW: u32 = 4;

pub(crate) struct CountWindow {
    size: u64,
    head: AtomicU64,
    counts: AtomicU64,
    slots: Box<[AtomicU32]>,
}

fn code(failed: bool, slow: bool) -> u32 {
    CODE_COUNTED | if failed { CODE_FAILED } else { 0 } | if slow { CODE_SLOW } else { 0 }
}

/// A slot holding `code` for the closed phase `tag`.
fn slot_word(tag: u64, code: u32) -> u32 {
    ((tag as u32) << SLOT_CODE_BITS) | (code & SLOT_CODE_MASK)
}

/// The tag of a slot.
fn slot_tag(slot: u32) -> u64 {
    u64::from(slot >> SLOT_CODE_BITS)
}

fn pack(tag: u64, calls: u64, failures: u64, slow: u64) -> u64 {
    (tag << WINDOW_TAG_SHIFT)
        | ((calls & FIELD_MASK) << (2 * FIELD))
        | ((failures & FIELD_MASK) << FIELD)
        | (slow & FIELD_MASK)
}

fn unpack(word: u64) -> (u64, WindowCounts) {
    (
        word >> WINDOW_TAG_SHIFT,
        WindowCounts {
            calls: (word >> (2 * FIELD)) & FIELD_MASK,
            failures: (word >> FIELD) & FIELD_MASK,
            slow: word & FIELD_MASK,
        },
    )
}

impl CountWindow {
    pub(crate) fn new(size: u32, tag: u64) -> CountWindow {
        CountWindow {
            size: u64::from(size.max(1)),
            head: AtomicU64::new(0),
            counts: AtomicU64::new(pack(tag, 0, 0, 0)),
            slots: (0..size.max(1)).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    /// Starts the window of a new closed phase (called under the breaker's lock). Every
    /// slot is re-tagged as empty in the new phase, so no leftover slot can ever look newer
    /// than the current tag, however many generations pass without a closed outcome; a
    /// writer from an older phase finds only newer tags and gives up.
    pub(crate) fn reset(&self, tag: u64) {
        self.counts.store(pack(tag, 0, 0, 0), Ordering::Release);
        let empty = slot_word(tag, 0);
        for slot in self.slots.iter() {
            slot.store(empty, Ordering::Release);
        }
    }

    /// What the window holds for the closed phase `tag`.
    pub(crate) fn counts(&self, tag: u64) -> WindowCounts {
        let (current, counts) = unpack(self.counts.load(Ordering::Acquire));
        if current == tag && self.consistent(counts) {
            counts
        } else {
            WindowCounts::default()
        }
    }

    fn consistent(&self, c: WindowCounts) -> bool {
        c.calls <= self.size && c.failures <= c.calls && c.slow <= c.calls
    }

    /// Files one outcome for the closed phase `tag`. Returns the new counts when they
    /// changed (so the caller re-evaluates the policy), `None` when they did not, or when
    /// the writer belongs to an older phase.
    #[inline]
    pub(crate) fn record(&self, tag: u64, failed: bool, slow: bool) -> Option<WindowCounts> {
        if !failed && !slow {
            // A plain success into a window that is full of plain successes of this phase
            // changes nothing: the ring is uniform, so where its head points does not
            // matter. Skipping the head's fetch_add keeps the hot closed path free of
            // writes to shared memory.
            let (current, c) = unpack(self.counts.load(Ordering::Acquire));
            if current == tag && c.calls == self.size && c.failures == 0 && c.slow == 0 {
                return None;
            }
        }
        let seq = self.head.fetch_add(1, Ordering::Relaxed);
        let index = (seq % self.size) as usize;
        let slot = self.slots.get(index)?;
        let new = slot_word(tag, code(failed, slow));
        let mut old = slot.load(Ordering::Acquire);
        loop {
            if old == new {
                return None;
            }
            if tag_is_newer(slot_tag(old), tag) {
                return None;
            }
            match slot.compare_exchange_weak(old, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break,
                Err(current) => old = current,
            }
        }
        let old_code = if slot_tag(old) == tag {
            old & SLOT_CODE_MASK
        } else {
            0
        };
        self.apply_delta(tag, old_code, code(failed, slow))
    }

    fn apply_delta(&self, tag: u64, old_code: u32, new_code: u32) -> Option<WindowCounts> {
        let bit = |code: u32, mask: u32| u64::from(code & mask != 0);
        let mut word = self.counts.load(Ordering::Acquire);
        loop {
            let (current, c) = unpack(word);
            if current != tag {
                return None;
            }
            // Fields wrap modulo 2^FIELD so that two writers lapping each other on one slot
            // may pass through a transient "negative" count and still end exact.
            let next = WindowCounts {
                calls: (c.calls + bit(new_code, CODE_COUNTED))
                    .wrapping_sub(bit(old_code, CODE_COUNTED))
                    & FIELD_MASK,
                failures: (c.failures + bit(new_code, CODE_FAILED))
                    .wrapping_sub(bit(old_code, CODE_FAILED))
                    & FIELD_MASK,
                slow: (c.slow + bit(new_code, CODE_SLOW)).wrapping_sub(bit(old_code, CODE_SLOW))
                    & FIELD_MASK,
            };
            let packed = pack(tag, next.calls, next.failures, next.slow);
            match self.counts.compare_exchange_weak(
                word,
                packed,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return self.consistent(next).then_some(next),
                Err(current) => word = current,
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn slides_over_the_last_size_outcomes() {
        let w = CountWindow::new(4, 1);
        for _ in 0..10 {
            w.record(1, false, false);
        }
        assert_eq!(w.counts(1).calls, 4);
        assert_eq!(w.counts(1).failures, 0);
        w.record(1, true, true);
        w.record(1, true, false);
        let c = w.counts(1);
        assert_eq!((c.calls, c.failures, c.slow), (4, 2, 1));
        for _ in 0..4 {
            w.record(1, false, false);
        }
        assert_eq!(w.counts(1).failures, 0);
        assert_eq!(w.counts(1).slow, 0);
    }

    #[test]
    fn a_new_tag_starts_empty_and_ignores_older_writers() {
        let w = CountWindow::new(3, 1);
        w.record(1, true, false);
        w.record(1, true, false);
        w.reset(3);
        assert_eq!(w.counts(3), WindowCounts::default());
        assert_eq!(w.record(1, true, false), None);
        assert_eq!(w.counts(3), WindowCounts::default());
        let c = w.record(3, false, false).unwrap();
        assert_eq!((c.calls, c.failures), (1, 0));
        w.record(3, true, false);
        w.record(3, true, false);
        w.record(3, false, false);
        let c = w.counts(3);
        assert_eq!((c.calls, c.failures), (3, 2));
    }
}
