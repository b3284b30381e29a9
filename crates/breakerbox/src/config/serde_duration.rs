//! Serde for a duration written as text with a unit (`"800ms"`, `"1.5s"`, `"2m"`), the
//! form of every duration key in breakerbox config files; for crates that read their own
//! tables in the same format (`breakerbox-redis`'s options do).
//!
//! A bare number is refused: `30` could be seconds or milliseconds. Every error names
//! the key, which serde cannot pass to a field's deserializer, so wrap
//! [`deserialize`] in a function per key:
//!
//! ```
//! use breakerbox::config::serde_duration;
//! use serde::{Deserialize, Deserializer, Serialize};
//! use std::time::Duration;
//!
//! #[derive(Debug, Serialize, Deserialize)]
//! struct Pool {
//!     #[serde(serialize_with = "serde_duration::serialize", deserialize_with = "idle")]
//!     idle: Duration,
//! }
//!
//! fn idle<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
//!     serde_duration::deserialize("idle", d)
//! }
//!
//! let pool: Pool = serde_json::from_str(r#"{ "idle": "1m30s" }"#)?;
//! assert_eq!(pool.idle, Duration::from_secs(90));
//! assert_eq!(serde_json::to_string(&pool)?, r#"{"idle":"90s"}"#);
//! let err = serde_json::from_str::<Pool>(r#"{ "idle": 90 }"#).unwrap_err();
//! assert!(err.to_string().starts_with("idle: invalid duration 90"), "{err}");
//! # Ok::<(), serde_json::Error>(())
//! ```

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::ser::Serializer;

use super::{parse_duration, HumanDuration};

/// Writes `duration` exactly (`HumanDuration`'s `{:#}` form), so it reads back the same.
pub fn serialize<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&format_args!("{:#}", HumanDuration(*duration)))
}

/// Reads the duration of key `key` from text with a unit; a bare number or bad text is
/// refused with a message that starts with the key (`timeout: invalid duration 10 ...`).
pub fn deserialize<'de, D: Deserializer<'de>>(
    key: &'static str,
    deserializer: D,
) -> Result<Duration, D::Error> {
    deserializer.deserialize_any(DurationText(key))
}

/// Reads a duration key's text, and refuses a bare number with a message naming the key.
struct DurationText(&'static str);

impl Visitor<'_> for DurationText {
    type Value = Duration;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: a duration with a unit, e.g. \"800ms\"", self.0)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Duration, E> {
        parse_duration(text).ok_or_else(|| {
            E::custom(format!(
                "{}: invalid duration \"{text}\" (expected e.g. \"800ms\", \"1.5s\", \"2m\")",
                self.0
            ))
        })
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Duration, E> {
        Err(bare_number(self.0, n))
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Duration, E> {
        Err(bare_number(self.0, n))
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Duration, E> {
        Err(bare_number(self.0, n))
    }
}

fn bare_number<E: de::Error>(key: &str, n: impl fmt::Display) -> E {
    E::custom(format!(
        "{key}: invalid duration {n} (a duration needs a unit, e.g. \"800ms\", \"1.5s\", \"2m\")"
    ))
}
