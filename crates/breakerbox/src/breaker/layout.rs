//! The bit layouts of every packed atomic word of the in-memory engine, in one place.
//!
//! Each word is described by the widths of its fields, low bits first; shifts and masks
//! derive from the widths, and the compile-time checks below fail the build if a layout
//! stops fitting its word or a config limit stops fitting the field it protects.
//!
//! | word                         | fields, low bits first                                    |
//! |------------------------------|-----------------------------------------------------------|
//! | state word (`u64`)           | phase (3), ramping (1), probes in flight (12), probe successes (12), generation (36) |
//! | failure streak (`u64`)       | run (48), epoch tag (16)                                  |
//!
//! The epoch tag is the low [`TAG_BITS`] bits of a closed phase's generation: it tells a
//! streak's current run from leftovers of earlier closed phases without clearing it, and
//! tags compare modulo `2^TAG_BITS` ([`tag_is_newer`]). The windows are keyed by the full
//! generation instead ([`super::lanes`]), so they have no packed layout.

/// A mask of the low `bits` bits.
const fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1 << bits) - 1
    }
}

// ----- the epoch tag -----------------------------------------------------------------

/// Width of the epoch tag of a closed phase.
pub(crate) const TAG_BITS: u32 = 16;
/// Mask of an epoch tag.
pub(crate) const TAG_MASK: u64 = mask(TAG_BITS);

/// The epoch tag of a closed generation.
pub(crate) const fn epoch_tag(generation: u64) -> u64 {
    generation & TAG_MASK
}

/// Whether tag `a` is later than tag `b`, modulo `2^TAG_BITS` (`a` at most half the tag
/// space ahead).
pub(crate) const fn tag_is_newer(a: u64, b: u64) -> bool {
    let diff = a.wrapping_sub(b) & TAG_MASK;
    diff != 0 && diff < (1 << (TAG_BITS - 1))
}

// ----- the state word ------------------------------------------------------------------

/// Width of the phase ([`crate::Phase::index`]).
pub(crate) const PHASE_BITS: u32 = 3;
/// Rule 23: the flag set in a closed phase while its ramp may still be running, next to
/// the phase, so that "closed and not ramping" is one mask and compare on the hot path.
pub(crate) const RAMP_FLAG: u64 = 1 << PHASE_BITS;
/// Width of each half-open counter (probes in flight, probe successes).
pub(crate) const PROBE_COUNT_BITS: u32 = 12;
/// Shift of the probes in flight.
pub(crate) const IN_FLIGHT_SHIFT: u32 = PHASE_BITS + 1;
/// Shift of the probe successes.
pub(crate) const SUCCESS_SHIFT: u32 = IN_FLIGHT_SHIFT + PROBE_COUNT_BITS;
/// Shift of the generation, which takes every bit left.
pub(crate) const GEN_SHIFT: u32 = SUCCESS_SHIFT + PROBE_COUNT_BITS;
/// Width of the generation.
pub(crate) const GEN_BITS: u32 = 64 - GEN_SHIFT;
/// Mask of the phase.
pub(crate) const PHASE_MASK: u64 = mask(PHASE_BITS);
/// Mask of a half-open counter; also the largest value it holds.
pub(crate) const PROBE_COUNT_MASK: u64 = mask(PROBE_COUNT_BITS);
/// Generations wrap at `2^GEN_BITS` (2^36: a permit would have to outlive 68 billion
/// transitions to be mistaken for a current one).
pub(crate) const GEN_MASK: u64 = mask(GEN_BITS);

// ----- the failure streak --------------------------------------------------------------

/// Width of the run of consecutive failures (it saturates there).
pub(crate) const STREAK_BITS: u32 = 64 - TAG_BITS;
/// Mask of the run.
pub(crate) const STREAK_MASK: u64 = mask(STREAK_BITS);

// ----- compile-time checks -------------------------------------------------------------

// Every phase fits the phase field; a closed word without the ramp flag has both zero.
const _: () = assert!(crate::Phase::ALL.len() as u64 <= PHASE_MASK + 1);
const _: () = assert!(crate::Phase::Closed.index() == 0 && RAMP_FLAG & PHASE_MASK == 0);
// The state word: the generation keeps enough bits to make a stale permit implausible, and
// always more than the epoch tag derived from it.
const _: () = assert!(GEN_SHIFT + GEN_BITS == 64);
const _: () = assert!(GEN_BITS >= 32 && GEN_BITS > TAG_BITS);
// The config limit `MAX_PROBES` (derived from the mask here) is the largest value a
// half-open counter holds, so a reservation never carries into the next field; the
// counters convert to the config's `u32` losslessly.
const _: () = assert!(crate::config::MAX_PROBES as u64 == PROBE_COUNT_MASK);
const _: () = assert!(PROBE_COUNT_MASK <= u32::MAX as u64);
// The tag must leave room for "newer" comparisons (half the space each way).
const _: () = assert!(TAG_BITS >= 2 && TAG_BITS <= 32);
// Streak: run and tag fill the word; the run outlasts any `consecutive_failures` (a u32).
const _: () = assert!(STREAK_BITS + TAG_BITS == 64 && STREAK_BITS >= 32);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_compare_modulo_wrap() {
        assert!(tag_is_newer(1, 0));
        assert!(tag_is_newer(0, TAG_MASK));
        assert!(!tag_is_newer(0, 0));
        assert!(!tag_is_newer(TAG_MASK, 0));
        assert_eq!(epoch_tag(TAG_MASK + 3), 2);
    }
}
