//! An exact rate threshold.

use crate::ConfigError;

/// A rate threshold in (0, 1], held in parts per million so every comparison is exact
/// integer arithmetic: `count * 1_000_000 >= ppm * calls`.
///
/// ```
/// use breakerbox::Rate;
/// let half = Rate::new(0.5).unwrap();
/// assert_eq!(half.ppm(), 500_000);
/// assert!(half.reached(50, 100));
/// assert!(!half.reached(49, 100));
/// assert!(Rate::new(1.5).is_err());
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate(u32);

impl Rate {
    /// One million parts: a rate of 1.
    pub const ONE_PPM: u32 = 1_000_000;

    /// A rate from a fraction in (0, 1], rounded to the nearest part per million.
    pub fn new(rate: f64) -> Result<Rate, ConfigError> {
        Rate::named("rate", rate)
    }

    pub(crate) fn named(field: &'static str, rate: f64) -> Result<Rate, ConfigError> {
        if !(rate > 0.0 && rate <= 1.0) {
            return Err(ConfigError::new(field, rate, "a rate in (0, 1], e.g. 0.5"));
        }
        Ok(Rate(
            ((rate * f64::from(Rate::ONE_PPM)).round() as u32).max(1),
        ))
    }

    /// A rate from parts per million in 1..=1_000_000.
    pub fn from_ppm(ppm: u32) -> Result<Rate, ConfigError> {
        if ppm == 0 || ppm > Rate::ONE_PPM {
            return Err(ConfigError::new("rate_ppm", ppm, "1..=1000000"));
        }
        Ok(Rate(ppm))
    }

    /// Parts per million.
    pub const fn ppm(self) -> u32 {
        self.0
    }

    /// As a fraction.
    pub fn as_f64(self) -> f64 {
        f64::from(self.0) / f64::from(Rate::ONE_PPM)
    }

    /// Whether `count` out of `calls` reaches this rate (`false` when `calls` is 0).
    pub const fn reached(self, count: u64, calls: u64) -> bool {
        calls > 0 && (count as u128) * (Rate::ONE_PPM as u128) >= (self.0 as u128) * (calls as u128)
    }
}
