//! The window a rate rule looks at, and its text form: `count:100`, `time:10s/20`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::{parse_duration, HumanDuration};
use crate::{ConfigError, Nanos};

/// Buckets of a time window written without `/BUCKETS` (`time:10s` is `time:10s/10`).
pub const DEFAULT_TIME_BUCKETS: u32 = 10;

/// What a [`ConfigError`] for a window's text says is accepted.
const WINDOW_FORMS: &str =
    "count:N, time:DURATION or time:DURATION/BUCKETS, e.g. count:100, time:10s/10";

/// Which calls a rate rule looks at.
///
/// Written in config files (the `window` key) as `count:N` (the last N calls),
/// `time:DURATION` (in [`DEFAULT_TIME_BUCKETS`] buckets) or `time:DURATION/BUCKETS`;
/// [`FromStr`] reads that form and [`Display`](fmt::Display) writes it, exactly.
///
/// ```
/// use breakerbox::config::WindowKind;
/// use std::time::Duration;
///
/// let w: WindowKind = "time:10s/20".parse()?;
/// assert_eq!(w, WindowKind::Time { duration: Duration::from_secs(10), buckets: 20 });
/// assert_eq!(w.to_string(), "time:10s/20");
/// assert_eq!("count:100".parse::<WindowKind>()?, WindowKind::Count { size: 100 });
///
/// let err = "sliding:3".parse::<WindowKind>().unwrap_err();
/// assert_eq!(err.field(), "window");
/// # Ok::<(), breakerbox::ConfigError>(())
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum WindowKind {
    /// The last `size` non-ignored calls.
    Count {
        /// How many calls the window holds.
        size: u32,
    },
    /// The calls of the last `duration`, in `buckets` buckets of `duration / buckets`
    /// aligned to the clock's zero.
    Time {
        /// The window's length.
        duration: Duration,
        /// How many buckets it is cut into.
        buckets: u32,
    },
}

impl WindowKind {
    /// The width of one bucket of a time window, in nanoseconds.
    pub fn bucket_width(&self) -> Option<Nanos> {
        match *self {
            WindowKind::Count { .. } => None,
            WindowKind::Time { duration, buckets } => Some(Nanos(
                Nanos::from_duration(duration).as_u64() / u64::from(buckets.max(1)),
            )),
        }
    }
}

/// Reads `count:N`, `time:DURATION` or `time:DURATION/BUCKETS`; the error names the
/// `window` key. The numbers are checked by [`ConfigBuilder::build`](super::ConfigBuilder::build),
/// not here.
impl FromStr for WindowKind {
    type Err = ConfigError;

    fn from_str(text: &str) -> Result<WindowKind, ConfigError> {
        let bad = || ConfigError::new("window", format!("{text:?}"), WINDOW_FORMS);
        let (kind, rest) = text.trim().split_once(':').ok_or_else(bad)?;
        match kind.trim() {
            "count" => {
                let size = rest.trim().parse::<u32>().map_err(|_| bad())?;
                Ok(WindowKind::Count { size })
            }
            "time" => {
                let (duration, buckets) = match rest.split_once('/') {
                    Some((d, b)) => (d, b.trim().parse::<u32>().map_err(|_| bad())?),
                    None => (rest, DEFAULT_TIME_BUCKETS),
                };
                let duration = parse_duration(duration).ok_or_else(bad)?;
                Ok(WindowKind::Time { duration, buckets })
            }
            _ => Err(bad()),
        }
    }
}

/// Writes the form [`FromStr`] reads, exactly: `count:100`, `time:1.5s/20`.
impl fmt::Display for WindowKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            WindowKind::Count { size } => write!(f, "count:{size}"),
            WindowKind::Time { duration, buckets } => {
                write!(f, "time:{:#}/{buckets}", HumanDuration(duration))
            }
        }
    }
}
