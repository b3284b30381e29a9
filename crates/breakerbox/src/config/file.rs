//! Config files (feature `serde`): a breaker's settings as written in a file, and serde
//! for [`Config`] with the same keys.

mod keys;

use std::time::Duration;

use serde::de::{self, Deserializer};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};

use super::{Config, WindowKind};
use crate::ConfigError;

/// One breaker's settings as written in a config file, every key optional, before
/// validation. The keys are those of the `breakerbox` command's `[breaker]` table:
///
/// ```toml
/// consecutive_failures = 5          # trip after 5 failures in a row
/// failure_rate = 0.5                # ... or when half the window failed
/// slow_call_rate = 0.8              # ... or when 80% of the window was slow
/// slow_call_threshold = "800ms"     # slower than this is slow
/// window = "count:100"              # the last 100 calls; or "time:10s" / "time:10s/20"
/// min_calls = 20                    # no rate is judged before 20 calls
/// recovery_timeout = "10s"          # how long the first trip stays open
/// backoff_multiplier = 2.0          # each consecutive trip doubles it...
/// max_open_duration = "2m"          # ...up to this (required with backoff_multiplier)
/// jitter = 0.1                      # shorten open phases by up to 10%, at random
/// max_probes = 1                    # probes in flight in half-open
/// required_successes = 2            # probe successes that close
/// half_open_timeout = "30s"         # half-open not confirmed by then re-opens
/// shadow = false                    # true: admit every call, count would-be rejections
/// call_timeout = "2s"               # a call slower than this is a timeout failure
/// probe_timeout = "500ms"           # ... and a half-open probe slower than this
/// quorum = 1                        # shared breakers: nodes whose failures a trip needs
/// ramp_start = 0.1                  # after recovery admit 10% of calls...
/// ramp_duration = "30s"             # ...growing to all of them over 30 s (both or neither)
/// ```
///
/// A missing key takes the builder's default ([`defaults`](super::defaults)). Durations
/// are text with a unit (`800ms`, `1.5s`, `2m`, `1m30s`, see
/// [`parse_duration`](super::parse_duration)); a bare number is refused. A window is
/// `count:N`, `time:DURATION` or `time:DURATION/BUCKETS` (see [`WindowKind`]). Unknown
/// keys are refused. Every error names its key.
///
/// Most code reads a [`Config`] directly, which parses this and validates it in one
/// step; keep a `ConfigFile` to validate later, e.g. to prefix errors with where the
/// table sits in a larger file:
///
/// ```
/// use breakerbox::config::ConfigFile;
/// use breakerbox::Config;
/// use std::time::Duration;
///
/// let file: ConfigFile = toml::from_str(r#"
///     failure_rate = 0.5
///     window = "time:10s/20"
///     recovery_timeout = "1.5s"
/// "#)?;
/// let config: Config = file.to_config()?;
/// assert_eq!(config.recovery_timeout, Duration::from_millis(1500));
///
/// let file: ConfigFile = toml::from_str("jitter = 1.0")?;
/// let err = file.to_config().unwrap_err();
/// assert_eq!(err.field(), "jitter");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ConfigFile {
    /// Trip after this many consecutive failures in closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consecutive_failures: Option<u32>,
    /// Trip when the failure rate over the window reaches this (in (0, 1]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_rate: Option<f64>,
    /// Trip when the slow-call rate over the window reaches this (in (0, 1]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_call_rate: Option<f64>,
    /// A call slower than this (strictly) is slow.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "keys::slow_call_threshold"
    )]
    pub slow_call_threshold: Option<Duration>,
    /// The window rates are computed over: `count:N`, `time:10s` or `time:10s/20`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "keys::window"
    )]
    pub window: Option<WindowKind>,
    /// No rate is judged before the window holds this many calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_calls: Option<u32>,
    /// How long the first trip keeps the breaker open.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "keys::recovery_timeout"
    )]
    pub recovery_timeout: Option<Duration>,
    /// Each consecutive trip multiplies the open duration by this (>= 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_multiplier: Option<f64>,
    /// The open duration never exceeds this; required with a `backoff_multiplier` other
    /// than 1.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "keys::max_open_duration"
    )]
    pub max_open_duration: Option<Duration>,
    /// Shorten each open duration by a random fraction of up to this (in [0, 1)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<f64>,
    /// At most this many probes in flight in half-open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_probes: Option<u32>,
    /// Close after this many consecutive probe successes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_successes: Option<u32>,
    /// A half-open phase not confirmed within this re-opens.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "keys::half_open_timeout"
    )]
    pub half_open_timeout: Option<Duration>,
    /// Start in shadow mode (rule 20): admit every call, count would-be rejections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow: Option<bool>,
    /// Rule 22: a call slower than this (strictly) is a failure with reason `timeout`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "keys::call_timeout"
    )]
    pub call_timeout: Option<Duration>,
    /// Rule 22: a half-open probe's deadline (at most `call_timeout`, below
    /// `half_open_timeout`); probes use `call_timeout` without it.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "keys::probe_timeout"
    )]
    pub probe_timeout: Option<Duration>,
    /// Rule 21 (shared breakers): distinct nodes whose failures a failure-driven trip
    /// needs (1..=64; 1 = no quorum).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quorum: Option<u32>,
    /// Rule 23: after half-open closes, admit this fraction of calls (in (0, 1]) at
    /// first; requires `ramp_duration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp_start: Option<f64>,
    /// Rule 23: how long the admitted fraction takes to grow to all calls; requires
    /// `ramp_start`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "keys::ramp_duration"
    )]
    pub ramp_duration: Option<Duration>,
}

impl ConfigFile {
    /// Validates the settings through [`Config::builder`]. The error's
    /// [`field`](ConfigError::field) is the file key (`window`, not the builder method).
    pub fn to_config(&self) -> Result<Config, ConfigError> {
        let mut b = Config::builder();
        if let Some(n) = self.consecutive_failures {
            b = b.consecutive_failures(n);
        }
        if let Some(r) = self.failure_rate {
            b = b.failure_rate(r);
        }
        if let Some(r) = self.slow_call_rate {
            b = b.slow_call_rate(r);
        }
        if let Some(t) = self.slow_call_threshold {
            b = b.slow_call_threshold(t);
        }
        match self.window {
            Some(WindowKind::Count { size }) => b = b.count_window(size),
            Some(WindowKind::Time { duration, buckets }) => b = b.time_window(duration, buckets),
            None => {}
        }
        if let Some(n) = self.min_calls {
            b = b.min_calls(n);
        }
        if let Some(t) = self.recovery_timeout {
            b = b.recovery_timeout(t);
        }
        match (self.backoff_multiplier, self.max_open_duration) {
            (Some(m), Some(max)) => b = b.backoff(m, max),
            (None, Some(max)) => b = b.backoff(1.0, max),
            (Some(m), None) if m != 1.0 => {
                return Err(ConfigError::new(
                    "max_open_duration",
                    "none",
                    "a duration, required when backoff_multiplier is set",
                ))
            }
            (Some(_), None) | (None, None) => {}
        }
        if let Some(j) = self.jitter {
            b = b.jitter(j);
        }
        if let Some(n) = self.max_probes {
            b = b.max_probes(n);
        }
        if let Some(n) = self.required_successes {
            b = b.required_successes(n);
        }
        if let Some(t) = self.half_open_timeout {
            b = b.half_open_timeout(t);
        }
        if let Some(on) = self.shadow {
            b = b.shadow(on);
        }
        if let Some(t) = self.call_timeout {
            b = b.call_timeout(t);
        }
        if let Some(t) = self.probe_timeout {
            b = b.probe_timeout(t);
        }
        if let Some(k) = self.quorum {
            b = b.quorum(k);
        }
        match (self.ramp_start, self.ramp_duration) {
            (Some(start), Some(duration)) => b = b.ramp(start, duration),
            (Some(_), None) => {
                return Err(ConfigError::new(
                    "ramp_duration",
                    "none",
                    "a duration, required when ramp_start is set",
                ))
            }
            (None, Some(_)) => {
                return Err(ConfigError::new(
                    "ramp_start",
                    "none",
                    "a fraction in (0, 1], required when ramp_duration is set",
                ))
            }
            (None, None) => {}
        }
        b.build()
    }
}

/// Every setting of `config`, written out (the backoff keys only when there is a
/// backoff), so that [`ConfigFile::to_config`] gives `config` back.
impl From<&Config> for ConfigFile {
    fn from(c: &Config) -> ConfigFile {
        let rate = c.rate.as_ref();
        let backoff = c.backoff_multiplier != 1.0 || c.max_open_duration != c.recovery_timeout;
        ConfigFile {
            consecutive_failures: c.consecutive_failures,
            failure_rate: rate.and_then(|r| r.failure_rate).map(|r| r.as_f64()),
            slow_call_rate: rate.and_then(|r| r.slow_rate).map(|r| r.as_f64()),
            slow_call_threshold: c.slow_call_threshold,
            window: rate.map(|r| r.window),
            min_calls: rate.map(|r| r.min_calls),
            recovery_timeout: Some(c.recovery_timeout),
            backoff_multiplier: backoff.then_some(c.backoff_multiplier),
            max_open_duration: backoff.then_some(c.max_open_duration),
            jitter: Some(c.jitter),
            max_probes: Some(c.max_probes),
            required_successes: Some(c.required_successes),
            half_open_timeout: Some(c.half_open_timeout),
            shadow: c.shadow.then_some(true),
            call_timeout: c.call_timeout,
            probe_timeout: c.probe_timeout,
            quorum: c.has_quorum().then_some(c.quorum),
            ramp_start: c.ramp.map(|r| r.start.as_f64()),
            ramp_duration: c.ramp.map(|r| r.duration),
        }
    }
}

/// A config error as a config file's reader shows it: `window: invalid value "count:0"
/// (expected ...)`.
pub(crate) fn keyed_message(error: &ConfigError) -> String {
    format!(
        "{}: invalid value {} (expected {})",
        error.field(),
        error.value(),
        error.expected()
    )
}

/// Writes the keys of [`ConfigFile`], every setting included, so that reading the result
/// back gives an equal `Config`. A config whose public fields were edited into an
/// invalid state is written as it is, and refused when read back.
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl Serialize for Config {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        ConfigFile::from(self).serialize(serializer)
    }
}

/// Reads the keys of [`ConfigFile`] and validates them, so a deserialized `Config` is
/// always valid; an error names its key (`window: invalid value ...`).
///
/// ```
/// use breakerbox::Config;
///
/// let config: Config = serde_json::from_str(r#"{
///     "failure_rate": 0.5,
///     "window": "count:50",
///     "recovery_timeout": "10s",
///     "backoff_multiplier": 2.0,
///     "max_open_duration": "2m"
/// }"#)?;
/// assert_eq!(config.max_open_duration.as_secs(), 120);
///
/// let err = serde_json::from_str::<Config>(r#"{ "failure_rate": 0.5, "window": "count:0" }"#)
///     .unwrap_err();
/// assert!(err.to_string().starts_with("window: invalid value count:0"), "{err}");
/// let err = serde_json::from_str::<Config>(r#"{ "recovery_timeout": 10 }"#).unwrap_err();
/// assert!(err.to_string().starts_with("recovery_timeout: invalid duration 10"), "{err}");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl<'de> Deserialize<'de> for Config {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Config, D::Error> {
        ConfigFile::deserialize(deserializer)?
            .to_config()
            .map_err(|e| de::Error::custom(keyed_message(&e)))
    }
}
