//! Latency from the CPU's time-stamp counter, where it is invariant (x86-64 Linux).
//!
//! `clock_gettime(CLOCK_MONOTONIC)` costs 25-60 ns in a virtual machine, and a call with a
//! slow-call rule or a latency judge reads it twice. An invariant TSC (one that ticks at a
//! fixed rate whatever the core's frequency or sleep state, and that the OS keeps in step
//! across cores) reads in about 10 ns. The counter is read through `quanta`, whose
//! calibration against `CLOCK_MONOTONIC` busy-waits for up to 200 ms: it runs once per
//! process on a thread of its own, started by the first stamp, so no caller waits for it.
//! Until it is done, and on CPUs without an invariant counter, stamps are plain monotonic
//! readings. A stamp says which kind it is (its top bit), so one taken before the counter
//! was ready is still measured right after.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use crate::{Nanos, Stamp};

/// The top bit of a stamp in counter ticks; stamps without it are monotonic nanoseconds.
const TICKS: u64 = 1 << 63;

/// The calibrated counter, once its calibration is done (never where it is not invariant).
static COUNTER: OnceLock<quanta::Clock> = OnceLock::new();

/// Whether the calibration thread was started (or found to be pointless).
static STARTED: AtomicBool = AtomicBool::new(false);

/// A stamp: counter ticks once the counter is calibrated, else the monotonic reading
/// `precise` gives.
#[inline]
pub(crate) fn stamp(precise: impl FnOnce() -> Nanos) -> Stamp {
    if let Some(counter) = COUNTER.get() {
        return Stamp::from_raw(counter.raw() | TICKS);
    }
    start_calibration();
    Stamp::from_raw(precise().as_u64() & !TICKS)
}

/// The time since `since`, measured as it was stamped.
#[inline]
pub(crate) fn elapsed_since(since: Stamp, precise: impl FnOnce() -> Nanos) -> Nanos {
    let raw = since.raw();
    match (raw & TICKS != 0, COUNTER.get()) {
        (true, Some(counter)) => Nanos(counter.delta_as_nanos(raw & !TICKS, counter.raw())),
        // A stamp in ticks exists only once the counter is set, which is never unset; a
        // forged one measures nothing.
        (true, None) => Nanos::ZERO,
        (false, _) => nanos_since(raw, precise()),
    }
}

/// Whether latency is being measured with the counter yet.
pub(crate) fn calibrated() -> bool {
    COUNTER.get().is_some()
}

/// The time from a stamp in nanoseconds to `now`; nothing for a reading before it.
fn nanos_since(raw: u64, now: Nanos) -> Nanos {
    now.saturating_sub(Nanos(raw))
}

/// Starts the counter's calibration on a thread of its own, once per process, where the
/// counter is invariant. A thread that cannot be started leaves latency on the monotonic
/// clock.
#[cold]
fn start_calibration() {
    if STARTED.swap(true, Ordering::Relaxed) || !invariant_counter() {
        return;
    }
    let _ = std::thread::Builder::new()
        .name("breakerbox-tsc".into())
        .spawn(|| {
            let _ = COUNTER.set(quanta::Clock::new());
        });
}

/// What `quanta` needs to use the counter: CPUID 0x8000_0007 EDX bit 8 (the TSC runs at a
/// constant rate in every power state) and 0x8000_0001 EDX bit 27 (`rdtscp`). Without
/// both it would read `CLOCK_MONOTONIC` itself, which gains nothing.
fn invariant_counter() -> bool {
    use std::arch::x86_64::__cpuid;
    let highest = __cpuid(0x8000_0000).eax;
    highest >= 0x8000_0007
        && __cpuid(0x8000_0007).edx & (1 << 8) != 0
        && __cpuid(0x8000_0001).edx & (1 << 27) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    // `stamp` and `elapsed_since` on the real clock are tested in
    // `tests/monotonic_latency.rs`; the pure parts here.
    #[test]
    fn a_stamp_in_nanoseconds_is_measured_in_nanoseconds() {
        assert_eq!(nanos_since(1_000, Nanos(4_000)), Nanos(3_000));
        // A reading before the stamp (another clock's) measures nothing, not a wrap.
        assert_eq!(nanos_since(1_000, Nanos(10)), Nanos::ZERO);
    }

    #[test]
    fn a_forged_stamp_in_ticks_before_calibration_measures_nothing() {
        if COUNTER.get().is_none() {
            assert_eq!(
                elapsed_since(Stamp::from_raw(TICKS | 5), || Nanos(9)),
                Nanos::ZERO
            );
        }
    }
}
