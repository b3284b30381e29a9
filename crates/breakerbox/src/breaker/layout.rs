//! The bit layouts of every packed atomic word of the in-memory engine, in one place.
//!
//! Each word is described by the widths of its fields, low bits first; shifts and masks
//! derive from the widths, and the compile-time checks below fail the build if a layout
//! stops fitting its word or a config limit stops fitting the field it protects.
//!
//! | word                         | fields, low bits first                                    |
//! |------------------------------|-----------------------------------------------------------|
//! | state word (`u64`)           | phase (3), probes in flight (12), probe successes (12), generation (37) |
//! | count-window slot (`u32`)    | outcome code (8), epoch tag (16), unused (8)              |
//! | count-window counts (`u64`)  | slow (16), failures (16), calls (16), epoch tag (16)      |
//! | time-window bucket key (`u64`) | bucket index (48), epoch tag (16)                       |
//! | time-window bucket counts (`u64`) | slow (21), failures (21), calls (22)                 |
//! | failure streak (`u64`)       | run (48), epoch tag (16)                                  |
//!
//! The epoch tag is the low [`TAG_BITS`] bits of a closed phase's generation: it tells a
//! window's (or streak's) current contents from leftovers of earlier closed phases without
//! clearing them, and tags compare modulo `2^TAG_BITS` ([`tag_is_newer`]).

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
/// Width of each half-open counter (probes in flight, probe successes).
pub(crate) const PROBE_COUNT_BITS: u32 = 12;
/// Shift of the probes in flight.
pub(crate) const IN_FLIGHT_SHIFT: u32 = PHASE_BITS;
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
/// Generations wrap at `2^GEN_BITS` (2^37: a permit would have to outlive 137 billion
/// transitions to be mistaken for a current one).
pub(crate) const GEN_MASK: u64 = mask(GEN_BITS);

// ----- the count window ----------------------------------------------------------------

/// Width of a count-window slot's outcome code.
pub(crate) const SLOT_CODE_BITS: u32 = 8;
/// Mask of a slot's outcome code.
pub(crate) const SLOT_CODE_MASK: u32 = mask(SLOT_CODE_BITS) as u32;
/// Width of each count-window counter (calls, failures, slow).
pub(crate) const WINDOW_COUNT_BITS: u32 = 16;
/// Mask of a count-window counter; also the largest value it holds.
pub(crate) const WINDOW_COUNT_MASK: u64 = mask(WINDOW_COUNT_BITS);
/// Shift of the tag in the counts word (above slow, failures, calls).
pub(crate) const WINDOW_TAG_SHIFT: u32 = 3 * WINDOW_COUNT_BITS;

// ----- the time window -----------------------------------------------------------------

/// Width of a bucket key's absolute bucket index (`floor(t / width)`, modulo).
pub(crate) const BUCKET_INDEX_BITS: u32 = 48;
/// Mask of a bucket index.
pub(crate) const BUCKET_INDEX_MASK: u64 = mask(BUCKET_INDEX_BITS);
/// Width of a bucket's slow and failure counters.
pub(crate) const BUCKET_FIELD_BITS: u32 = 21;
/// Width of a bucket's call counter (the bits left over).
pub(crate) const BUCKET_CALLS_BITS: u32 = 64 - 2 * BUCKET_FIELD_BITS;
/// Shift of a bucket's failure counter.
pub(crate) const BUCKET_FAILURES_SHIFT: u32 = BUCKET_FIELD_BITS;
/// Shift of a bucket's call counter.
pub(crate) const BUCKET_CALLS_SHIFT: u32 = 2 * BUCKET_FIELD_BITS;
/// Mask of a bucket's slow or failure counter (counters saturate there).
pub(crate) const BUCKET_FIELD_MASK: u64 = mask(BUCKET_FIELD_BITS);
/// Mask of a bucket's call counter (it saturates there).
pub(crate) const BUCKET_CALLS_MASK: u64 = mask(BUCKET_CALLS_BITS);

// ----- the failure streak --------------------------------------------------------------

/// Width of the run of consecutive failures (it saturates there).
pub(crate) const STREAK_BITS: u32 = 64 - TAG_BITS;
/// Mask of the run.
pub(crate) const STREAK_MASK: u64 = mask(STREAK_BITS);

// ----- compile-time checks -------------------------------------------------------------

// Every phase fits the phase field.
const _: () = assert!(crate::Phase::ALL.len() as u64 <= PHASE_MASK + 1);
// The state word: the generation keeps enough bits to make a stale permit implausible, and
// always more than the epoch tag derived from it.
const _: () = assert!(GEN_SHIFT + GEN_BITS == 64);
const _: () = assert!(GEN_BITS >= 32 && GEN_BITS > TAG_BITS);
// The config limits (`MAX_PROBES`, `MAX_COUNT_WINDOW`, derived from the masks here) are the
// largest values their fields hold, so a reservation never carries into the next field;
// the counters convert to the config's `u32` losslessly.
const _: () = assert!(crate::config::MAX_PROBES as u64 == PROBE_COUNT_MASK);
const _: () = assert!(PROBE_COUNT_MASK <= u32::MAX as u64);
// The tag must leave room for "newer" comparisons (half the space each way).
const _: () = assert!(TAG_BITS >= 2 && TAG_BITS <= 32);
// Count window: a slot (code then tag) fits a u32, the counts word (three counters and the
// tag) fits a u64, and the largest window fits a counter.
const _: () = assert!(SLOT_CODE_BITS + TAG_BITS <= 32);
const _: () = assert!(WINDOW_TAG_SHIFT + TAG_BITS <= 64);
const _: () = assert!(crate::config::MAX_COUNT_WINDOW as u64 == WINDOW_COUNT_MASK);
const _: () = assert!(WINDOW_COUNT_MASK <= u32::MAX as u64);
// Time window: the key's tag sits above the index; the sentinel `u64::MAX` (never
// written) stays distinct from any key a real tag and index make in practice; counters
// fill the word exactly.
const _: () = assert!(BUCKET_INDEX_BITS + TAG_BITS == 64);
const _: () = assert!(BUCKET_CALLS_SHIFT + BUCKET_CALLS_BITS == 64);
const _: () = assert!(BUCKET_CALLS_BITS >= BUCKET_FIELD_BITS);
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
