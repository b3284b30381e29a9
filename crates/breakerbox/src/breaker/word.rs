//! The packed state word: phase, half-open counters and generation in one `AtomicU64`, so
//! a probe slot is reserved in exactly the generation it was checked in.
//!
//! The layout (phase, probes in flight, probe successes, generation) is in
//! [`super::layout`].

use super::layout::{
    GEN_MASK, GEN_SHIFT, IN_FLIGHT_SHIFT, PHASE_MASK, PROBE_COUNT_MASK as COUNT_MASK, RAMP_FLAG,
    SUCCESS_SHIFT,
};
use crate::Phase;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Word(pub(crate) u64);

impl Word {
    pub(crate) fn new(phase: Phase, generation: u64) -> Word {
        Word(phase.index() as u64 | ((generation & GEN_MASK) << GEN_SHIFT))
    }

    pub(crate) fn phase(self) -> Phase {
        Phase::from_index((self.0 & PHASE_MASK) as usize).unwrap_or(Phase::Disabled)
    }

    /// Closed with no ramp to consider: the closed hot path's one test.
    #[inline(always)]
    pub(crate) fn is_plain_closed(self) -> bool {
        self.0 & (PHASE_MASK | RAMP_FLAG) == 0
    }

    /// Rule 23: whether the ramp flag is set (only ever in a closed phase).
    pub(crate) fn ramping(self) -> bool {
        self.0 & RAMP_FLAG != 0
    }

    /// The same word with the ramp flag set or cleared.
    pub(crate) fn with_ramp(self, on: bool) -> Word {
        if on {
            Word(self.0 | RAMP_FLAG)
        } else {
            Word(self.0 & !RAMP_FLAG)
        }
    }

    pub(crate) fn generation(self) -> u64 {
        self.0 >> GEN_SHIFT
    }

    pub(crate) fn in_flight(self) -> u32 {
        ((self.0 >> IN_FLIGHT_SHIFT) & COUNT_MASK) as u32
    }

    pub(crate) fn probe_successes(self) -> u32 {
        ((self.0 >> SUCCESS_SHIFT) & COUNT_MASK) as u32
    }

    pub(crate) fn with_in_flight(self, n: u32) -> Word {
        let cleared = self.0 & !(COUNT_MASK << IN_FLIGHT_SHIFT);
        Word(cleared | ((u64::from(n) & COUNT_MASK) << IN_FLIGHT_SHIFT))
    }

    pub(crate) fn with_probe_successes(self, n: u32) -> Word {
        let cleared = self.0 & !(COUNT_MASK << SUCCESS_SHIFT);
        Word(cleared | ((u64::from(n) & COUNT_MASK) << SUCCESS_SHIFT))
    }

    /// The word of the next phase: generation + 1, counters cleared.
    pub(crate) fn next(self, phase: Phase) -> Word {
        Word::new(phase, self.generation().wrapping_add(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_without_touching_each_other() {
        let w = Word::new(Phase::HalfOpen, GEN_MASK)
            .with_in_flight(COUNT_MASK as u32)
            .with_probe_successes(7);
        assert_eq!(w.phase(), Phase::HalfOpen);
        assert_eq!(w.generation(), GEN_MASK);
        assert_eq!(u64::from(w.in_flight()), COUNT_MASK);
        assert_eq!(w.probe_successes(), 7);
        let n = w.next(Phase::Closed);
        assert_eq!(n.generation(), 0);
        assert_eq!(n.in_flight(), 0);
        assert_eq!(n.phase(), Phase::Closed);
        assert!(n.is_plain_closed());
        let ramping = n.with_ramp(true);
        assert!(ramping.ramping() && !ramping.is_plain_closed());
        assert_eq!((ramping.phase(), ramping.generation()), (Phase::Closed, 0));
        assert!(ramping.with_ramp(false).is_plain_closed());
    }
}
