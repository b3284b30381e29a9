//! Gradual recovery (rule 23): after half-open closes, the share of calls admitted grows
//! from a start fraction to all of them over a duration.

use std::time::Duration;

use super::Rate;
use crate::{ConfigError, Nanos};

/// The ramp of rule 23: the fraction of calls admitted `elapsed` after the close from
/// half-open is `start + (1 - start) * elapsed / duration`, in parts per million
/// (rounded down), until `elapsed >= duration` ends the ramp.
///
/// ```
/// use breakerbox::config::Ramp;
/// use breakerbox::Nanos;
/// use std::time::Duration;
///
/// let ramp = Ramp::new(0.1, Duration::from_secs(30)).unwrap();
/// assert_eq!(ramp.start.ppm(), 100_000);
/// assert_eq!(ramp.fraction_ppm(Nanos::ZERO), Some(100_000));
/// assert_eq!(ramp.fraction_ppm(Duration::from_secs(15).into()), Some(550_000));
/// assert_eq!(ramp.fraction_ppm(Duration::from_secs(30).into()), None);
/// assert_eq!(Ramp::new(0.0, Duration::from_secs(30)).unwrap_err().field(), "ramp_start");
/// assert_eq!(Ramp::new(0.5, Duration::ZERO).unwrap_err().field(), "ramp_duration");
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Ramp {
    /// The fraction admitted right after the close, in (0, 1].
    pub start: Rate,
    /// How long the ramp lasts (above zero, at most [`MAX_RAMP_DURATION`]).
    pub duration: Duration,
}

/// The longest ramp (one hour): the Redis engine's scripts compute the fraction in
/// `f64` from microseconds, exact while `10^6 * duration in microseconds` stays below
/// 2^53 (about 2.5 hours); a longer ramp would be a slow start, not a recovery.
pub const MAX_RAMP_DURATION: Duration = Duration::from_secs(3600);

impl Ramp {
    /// A ramp from `start` (in (0, 1], rounded to the nearest part per million) to all
    /// calls over `duration`. Errors name the config-file keys `ramp_start` and
    /// `ramp_duration`.
    pub fn new(start: f64, duration: Duration) -> Result<Ramp, ConfigError> {
        let start = Rate::named("ramp_start", start)?;
        let ramp = Ramp { start, duration };
        ramp.validate()?;
        Ok(ramp)
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.duration.is_zero() || self.duration > MAX_RAMP_DURATION {
            return Err(ConfigError::new(
                "ramp_duration",
                format!("{:#}", super::HumanDuration(self.duration)),
                "a duration above zero and at most 1h",
            ));
        }
        Ok(())
    }

    /// The fraction admitted `elapsed` after the ramp began, in parts per million, or
    /// `None` once the ramp is over (`elapsed >= duration`). Exact integer arithmetic:
    /// `start + (1_000_000 - start) * elapsed / duration`, rounded down.
    pub fn fraction_ppm(&self, elapsed: Nanos) -> Option<u32> {
        let duration = self.duration.as_nanos();
        let elapsed = u128::from(elapsed.as_u64());
        if elapsed >= duration {
            return None;
        }
        let start = u128::from(self.start.ppm());
        let grown = (u128::from(Rate::ONE_PPM) - start) * elapsed / duration.max(1);
        Some((start + grown) as u32)
    }
}

/// The multiplier of the admission sequence (rule 23): close to `10^6 / golden ratio`
/// and coprime with `10^6`, so the points `n * RAMP_STEP mod 10^6` spread evenly.
pub const RAMP_STEP: u64 = 618_031;

/// Rule 23: whether the `n`-th acquire of a ramp (counting from 0) is admitted at a
/// fraction of `fraction_ppm`: iff `(n * RAMP_STEP) mod 10^6 < fraction_ppm`. The points
/// form a low-discrepancy (golden-ratio) sequence, so of any `k` consecutive acquires at
/// one fraction `f`, the number admitted is within 4 of `k * f` for `k <= 1000` (checked
/// by this crate's tests); and the test is monotone in the fraction, so an acquire that
/// used a slightly older fraction is admitted only if it would be at the newer one, or
/// would be refused only if it would be at the older one. Needs no randomness and no
/// state beyond one counter.
///
/// ```
/// use breakerbox::config::ramp_admits;
/// let admitted = (0..1000).filter(|&n| ramp_admits(n, 100_000)).count();
/// assert_eq!(admitted, 101);
/// assert!(ramp_admits(0, 1));
/// assert!((0..1000).all(|n| ramp_admits(n, 1_000_000)));
/// ```
pub const fn ramp_admits(n: u64, fraction_ppm: u32) -> bool {
    let m = Rate::ONE_PPM as u64;
    (n % m) * RAMP_STEP % m < fraction_ppm as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bound the docs state: any run of up to 1000 consecutive acquires at one
    /// fraction admits within 4 of its share (a grid of fractions and starting points).
    #[test]
    fn any_run_of_acquires_admits_its_share_within_four() {
        let fractions = [
            1u32, 1_000, 50_000, 100_000, 250_000, 333_333, 500_000, 900_000, 999_999,
        ];
        for f in fractions {
            let mut prefix = vec![0u64];
            for n in 0..120_000u64 {
                let last = prefix[prefix.len() - 1];
                prefix.push(last + u64::from(ramp_admits(n, f)));
            }
            for k in (1..=1000usize).step_by(7) {
                for a in (0..prefix.len() - 1 - k).step_by(113) {
                    let admitted = (prefix[a + k] - prefix[a]) as f64;
                    let share = k as f64 * f64::from(f) / 1e6;
                    assert!(
                        (admitted - share).abs() <= 4.0,
                        "fraction {f}: {admitted} of {k} from {a}, share {share}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_fraction_grows_linearly_and_rounds_down() {
        let ramp = Ramp::new(0.1, Duration::from_nanos(3)).unwrap();
        assert_eq!(ramp.fraction_ppm(Nanos(1)), Some(400_000));
        assert_eq!(ramp.fraction_ppm(Nanos(2)), Some(700_000));
        assert_eq!(ramp.fraction_ppm(Nanos(3)), None);
        let full = Ramp::new(1.0, Duration::from_secs(1)).unwrap();
        assert_eq!(full.fraction_ppm(Nanos(5)), Some(1_000_000));
    }
}
