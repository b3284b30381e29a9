//! The closed phase's run of consecutive failures, tagged with the phase's epoch so a new
//! closed phase starts at zero and writers from older phases change nothing. Layout in
//! [`super::layout`].

use super::layout::{tag_is_newer, STREAK_BITS, STREAK_MASK as COUNT_MASK};
use crate::sync::{AtomicU64, Ordering};

pub(crate) struct Streak(AtomicU64);

impl Streak {
    pub(crate) fn new(tag: u64) -> Streak {
        Streak(AtomicU64::new(tag << STREAK_BITS))
    }

    pub(crate) fn reset(&self, tag: u64) {
        self.0.store(tag << STREAK_BITS, Ordering::Release);
    }

    /// The run in phase `tag`.
    pub(crate) fn get(&self, tag: u64) -> u32 {
        let word = self.0.load(Ordering::Acquire);
        if word >> STREAK_BITS == tag {
            (word & COUNT_MASK).min(u64::from(u32::MAX)) as u32
        } else {
            0
        }
    }

    /// A failure: returns the new run, or `None` for a writer from an older phase.
    pub(crate) fn failure(&self, tag: u64) -> Option<u32> {
        let mut word = self.0.load(Ordering::Acquire);
        loop {
            let current = word >> STREAK_BITS;
            let run = if current == tag {
                word & COUNT_MASK
            } else if tag_is_newer(current, tag) {
                return None;
            } else {
                0
            };
            let next = (tag << STREAK_BITS) | (run + 1).min(COUNT_MASK);
            match self
                .0
                .compare_exchange_weak(word, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some((run + 1).min(u64::from(u32::MAX)) as u32),
                Err(actual) => word = actual,
            }
        }
    }

    /// A success ends the run. Costs one load when there is no run to end.
    #[inline(always)]
    pub(crate) fn success(&self, tag: u64) {
        let word = self.0.load(Ordering::Relaxed);
        if word >> STREAK_BITS == tag && word & COUNT_MASK != 0 {
            let _ = self.0.compare_exchange(
                word,
                tag << STREAK_BITS,
                Ordering::AcqRel,
                Ordering::Relaxed,
            );
            // A lost race means a failure landed in between; the streak it left stands,
            // as it would if the success had come first.
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::layout::TAG_MASK;
    use super::*;

    #[test]
    fn a_success_of_an_older_phase_leaves_the_newer_phases_run_alone() {
        let streak = Streak::new(1);
        streak.reset(2);
        assert_eq!(streak.failure(2), Some(1));
        streak.success(1);
        assert_eq!(streak.get(2), 1);
        assert_eq!(streak.failure(2), Some(2));
    }

    #[test]
    fn a_success_ends_the_run_of_a_phase_whose_tag_is_in_the_upper_half() {
        // Tags compare modulo 2^16: what a success leaves behind must still read as this
        // phase's, not as a newer phase's, for every tag.
        for tag in [0, 1, 40_000, TAG_MASK] {
            let streak = Streak::new(tag);
            assert_eq!(streak.failure(tag), Some(1));
            streak.success(tag);
            assert_eq!(streak.get(tag), 0, "tag {tag}");
            assert_eq!(streak.failure(tag), Some(1), "tag {tag}");
        }
    }
}
