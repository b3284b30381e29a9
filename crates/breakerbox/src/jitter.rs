//! The randomness behind jitter, injected so tests and other engines are deterministic.

use crate::sync::{AtomicU64, Ordering};

/// Supplies samples in [0, 1) for shortening open durations (see `Config::jitter`).
///
/// ```
/// use breakerbox::JitterSource;
/// struct Fixed(f64);
/// impl JitterSource for Fixed {
///     fn sample(&self) -> f64 { self.0 }
/// }
/// assert_eq!(Fixed(0.25).sample(), 0.25);
/// ```
pub trait JitterSource: Send + Sync + 'static {
    /// A sample in [0, 1).
    fn sample(&self) -> f64;
}

impl<F: Fn() -> f64 + Send + Sync + 'static> JitterSource for F {
    fn sample(&self) -> f64 {
        self()
    }
}

/// A small, fast pseudo-random source (splitmix64), seeded by the caller.
#[derive(Debug)]
pub struct SplitMix {
    state: AtomicU64,
}

impl SplitMix {
    /// A source starting from `seed`.
    pub fn new(seed: u64) -> SplitMix {
        SplitMix {
            state: AtomicU64::new(seed),
        }
    }
}

impl JitterSource for SplitMix {
    fn sample(&self) -> f64 {
        let mut z = self
            .state
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}
