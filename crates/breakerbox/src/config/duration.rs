//! Durations as people write them in config files: `800ms`, `1.5s`, `2m`, `1m30s`.
//!
//! The one implementation in the workspace: `breakerbox-http` and the `breakerbox`
//! command re-use it.

use std::fmt;
use std::time::Duration;

/// Parses a duration such as `800ms`, `1.5s`, `2m`, `1h`, `250us`, `10ns` or `1m30s`.
///
/// Units: `ns`, `us` (or `µs`), `ms`, `s`, `m`, `h`. Every number needs a unit; decimals are
/// allowed; spaces between parts are allowed. Digits past the nanosecond are dropped.
/// Returns `None` for anything else (including an empty string and values too large for
/// a [`Duration`]).
///
/// ```
/// use breakerbox::config::parse_duration;
/// use std::time::Duration;
///
/// assert_eq!(parse_duration("800ms"), Some(Duration::from_millis(800)));
/// assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
/// assert_eq!(parse_duration("1m 30s"), Some(Duration::from_secs(90)));
/// assert_eq!(parse_duration("fast"), None);
/// assert_eq!(parse_duration("10"), None);
/// ```
pub fn parse_duration(text: &str) -> Option<Duration> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_len);
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.' || c.is_whitespace())
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let scale: u128 = match unit {
            "ns" => 1,
            "us" | "µs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        total = total.checked_add(scaled(number, scale)?)?;
        rest = after.trim_start();
    }
    let secs = u64::try_from(total / NANOS_PER_SEC).ok()?;
    // The remainder is below one second's nanoseconds, so it fits.
    let nanos = (total % NANOS_PER_SEC) as u32;
    Some(Duration::new(secs, nanos))
}

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// `number` (digits with an optional decimal part) times `scale` nanoseconds, truncated.
fn scaled(number: &str, scale: u128) -> Option<u128> {
    let (whole, fraction) = match number.split_once('.') {
        Some((w, f)) => (w, f),
        None => (number, ""),
    };
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    if !whole.bytes().all(|b| b.is_ascii_digit()) || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let mut nanos = whole.checked_mul(scale)?;
    let mut unit = scale;
    for digit in fraction.bytes().take(20) {
        unit /= 10;
        if unit == 0 {
            break;
        }
        nanos = nanos.checked_add(u128::from(digit - b'0') * unit)?;
    }
    Some(nanos)
}

/// Displays a duration the way [`parse_duration`] reads it, short: `1.2s`, `800ms`, `1.5ms`,
/// `250us`, `10ns`, with at most three decimals.
///
/// The alternate form (`{:#}`) is exact, with as many decimals as the duration needs, so
/// [`parse_duration`] reads back the same duration: config files are written with it.
///
/// ```
/// use breakerbox::config::{parse_duration, HumanDuration};
/// use std::time::Duration;
///
/// assert_eq!(HumanDuration(Duration::from_millis(1200)).to_string(), "1.2s");
/// assert_eq!(HumanDuration(Duration::from_millis(800)).to_string(), "800ms");
/// assert_eq!(HumanDuration(Duration::from_secs(2)).to_string(), "2s");
///
/// let odd = Duration::new(1, 234_567_891);
/// assert_eq!(HumanDuration(odd).to_string(), "1.234s");
/// assert_eq!(format!("{:#}", HumanDuration(odd)), "1.234567891s");
/// assert_eq!(parse_duration(&format!("{:#}", HumanDuration(odd))), Some(odd));
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct HumanDuration(pub Duration);

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.0.as_nanos();
        let (scale, unit) = if nanos >= 1_000_000_000 {
            (1_000_000_000, "s")
        } else if nanos >= 1_000_000 {
            (1_000_000, "ms")
        } else if nanos >= 1_000 {
            (1_000, "us")
        } else {
            (1, "ns")
        };
        let whole = nanos / scale;
        // Three decimals at most (every decimal the unit has when exact), trailing zeros
        // trimmed.
        let places = if f.alternate() {
            scale.ilog10() as usize
        } else {
            3.min(scale.ilog10() as usize)
        };
        let fraction = (nanos % scale) * 10u128.pow(places as u32) / scale;
        if fraction == 0 {
            write!(f, "{whole}{unit}")
        } else {
            let digits = format!("{fraction:0places$}");
            write!(f, "{whole}.{}{unit}", digits.trim_end_matches('0'))
        }
    }
}
