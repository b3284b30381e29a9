//! The packed state word: phase, half-open counters and generation in one `AtomicU64`, so
//! a probe slot is reserved in exactly the generation it was checked in.
//!
//! Layout, low bits first: phase (3), probes in flight (12), probe successes (12),
//! generation (37).

use crate::Phase;

const PHASE_BITS: u32 = 3;
const COUNT_BITS: u32 = 12;
const IN_FLIGHT_SHIFT: u32 = PHASE_BITS;
const SUCCESS_SHIFT: u32 = PHASE_BITS + COUNT_BITS;
const GEN_SHIFT: u32 = PHASE_BITS + 2 * COUNT_BITS;
const PHASE_MASK: u64 = (1 << PHASE_BITS) - 1;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
/// Generations wrap at 2^37; a permit would have to outlive 137 billion transitions to
/// be mistaken for a current one.
pub(crate) const GEN_MASK: u64 = (1 << (64 - GEN_SHIFT)) - 1;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Word(pub(crate) u64);

impl Word {
    pub(crate) fn new(phase: Phase, generation: u64) -> Word {
        Word(phase.index() as u64 | ((generation & GEN_MASK) << GEN_SHIFT))
    }

    pub(crate) fn phase(self) -> Phase {
        Phase::from_index((self.0 & PHASE_MASK) as usize).unwrap_or(Phase::Disabled)
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

/// The 16-bit tag of a closed generation, used to tell a window's current contents from
/// leftovers of earlier closed phases without clearing them.
pub(crate) fn epoch_tag(generation: u64) -> u64 {
    generation & 0xFFFF
}

/// Whether tag `a` is later than tag `b`, modulo 2^16.
pub(crate) fn tag_is_newer(a: u64, b: u64) -> bool {
    let diff = a.wrapping_sub(b) & 0xFFFF;
    diff != 0 && diff < 0x8000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_without_touching_each_other() {
        let w = Word::new(Phase::HalfOpen, GEN_MASK)
            .with_in_flight(4095)
            .with_probe_successes(7);
        assert_eq!(w.phase(), Phase::HalfOpen);
        assert_eq!(w.generation(), GEN_MASK);
        assert_eq!(w.in_flight(), 4095);
        assert_eq!(w.probe_successes(), 7);
        let n = w.next(Phase::Closed);
        assert_eq!(n.generation(), 0);
        assert_eq!(n.in_flight(), 0);
        assert_eq!(n.phase(), Phase::Closed);
    }

    #[test]
    fn tags_compare_modulo_wrap() {
        assert!(tag_is_newer(1, 0));
        assert!(tag_is_newer(0, 0xFFFF));
        assert!(!tag_is_newer(0, 0));
        assert!(!tag_is_newer(0xFFFF, 0));
    }
}
