//! The `window` key: `count:N`, `time:DURATION` or `time:DURATION/BUCKETS`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use breakerbox::config::WindowKind;
use breakerbox_http::{parse_duration, HumanDuration};
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};

/// Buckets of a time window written without `/BUCKETS`.
pub const DEFAULT_TIME_BUCKETS: u32 = 10;

/// A rate window as written in a file: `count:100` (the last 100 calls), `time:10s` (the
/// last 10 s in 10 buckets) or `time:10s/20` (in 20 buckets).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct WindowSpec(pub WindowKind);

impl FromStr for WindowSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<WindowSpec, String> {
        let bad = || {
            format!(
                "window: invalid value \"{text}\" (expected \"count:N\", \"time:DURATION\" or \"time:DURATION/BUCKETS\", e.g. \"count:100\", \"time:10s/10\")"
            )
        };
        let (kind, rest) = text.trim().split_once(':').ok_or_else(bad)?;
        match kind.trim() {
            "count" => {
                let size = rest.trim().parse::<u32>().map_err(|_| bad())?;
                Ok(WindowSpec(WindowKind::Count { size }))
            }
            "time" => {
                let (duration, buckets) = match rest.split_once('/') {
                    Some((d, b)) => (d, b.trim().parse::<u32>().map_err(|_| bad())?),
                    None => (rest, DEFAULT_TIME_BUCKETS),
                };
                let duration: Duration = parse_duration(duration).ok_or_else(bad)?;
                Ok(WindowSpec(WindowKind::Time { duration, buckets }))
            }
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for WindowSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            WindowKind::Count { size } => write!(f, "count:{size}"),
            WindowKind::Time { duration, buckets } => {
                write!(f, "time:{}/{buckets}", HumanDuration(duration))
            }
        }
    }
}

impl Serialize for WindowSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for WindowSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<WindowSpec, D::Error> {
        let text = String::deserialize(d)
            .map_err(|e| de::Error::custom(format!("window: {e} (expected e.g. \"count:100\")")))?;
        text.parse().map_err(de::Error::custom)
    }
}
