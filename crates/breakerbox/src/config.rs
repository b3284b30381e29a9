//! A breaker's validated configuration.

use std::time::Duration;

use crate::model::PermitKind;
use crate::{ConfigError, Nanos, Verdict};

mod builder;
mod duration;
#[cfg(feature = "serde")]
mod file;
mod ramp;
mod rate;
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub mod serde_duration;
mod window;

pub use builder::{defaults, ConfigBuilder, MAX_COUNT_WINDOW, MAX_PROBES, MAX_QUORUM};
pub use duration::{parse_duration, HumanDuration};
#[cfg(feature = "serde")]
pub use file::ConfigFile;
pub use ramp::{ramp_admits, Ramp, MAX_RAMP_DURATION, RAMP_STEP};
pub use rate::Rate;
pub use window::{WindowKind, DEFAULT_TIME_BUCKETS};

/// Trip when the failure rate or slow-call rate over a window reaches a threshold.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RateRule {
    /// The window the rates are computed over.
    pub window: WindowKind,
    /// Trip when `failures / calls >= failure_rate`.
    pub failure_rate: Option<Rate>,
    /// Trip when `slow calls / calls >= slow_rate`.
    pub slow_rate: Option<Rate>,
    /// No rate is judged before the window holds this many calls.
    pub min_calls: u32,
}

/// Everything that decides a breaker's behaviour. Build one with [`Config::builder`]; the
/// fields are public for reading and for engines that implement the model.
///
/// With the `serde` feature, a `Config` also reads from a config file (validated, errors
/// naming the key) and writes to one; the keys are listed on `config::ConfigFile`.
///
/// ```
/// use breakerbox::Config;
/// use std::time::Duration;
///
/// let config = Config::builder()
///     .consecutive_failures(5)
///     .failure_rate(0.5)
///     .count_window(100)
///     .min_calls(20)
///     .recovery_timeout(Duration::from_secs(10))
///     .build()
///     .unwrap();
/// assert_eq!(config.required_successes, 2);
///
/// let err = Config::builder().failure_rate(1.5).build().unwrap_err();
/// assert_eq!(err.field(), "failure_rate");
/// assert!(err.to_string().contains("1.5"));
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Config {
    /// Trip after this many consecutive failures in closed.
    pub consecutive_failures: Option<u32>,
    /// Trip on a failure or slow-call rate.
    pub rate: Option<RateRule>,
    /// A call is slow when its latency is strictly above this. Slow calls count in the slow
    /// rate, and a slow probe success is a probe failure.
    pub slow_call_threshold: Option<Duration>,
    /// How long the first trip keeps the breaker open.
    pub recovery_timeout: Duration,
    /// Each further consecutive trip multiplies the open duration by this (1 = no backoff).
    pub backoff_multiplier: f64,
    /// The open duration never exceeds this.
    pub max_open_duration: Duration,
    /// The open duration is shortened by up to this fraction, at random (0 = no jitter).
    pub jitter: f64,
    /// At most this many probes are in flight in half-open.
    pub max_probes: u32,
    /// Half-open closes after this many consecutive probe successes.
    pub required_successes: u32,
    /// A half-open phase not confirmed within this re-opens.
    pub half_open_timeout: Duration,
    /// Rule 20: start in shadow mode: every rule and transition runs, but a call that
    /// would be rejected is admitted with a passthrough permit and counted as a would-be
    /// rejection. Switch it at runtime with `set_shadow` (a shared engine's stored switch,
    /// once set, wins over this initial value).
    pub shadow: bool,
    /// Rule 22: a call (normal or probe) that takes longer than this (strictly) is a
    /// failure with reason `timeout`, whatever its verdict. `None`: no deadline.
    pub call_timeout: Option<Duration>,
    /// Rule 22: a half-open probe's deadline, when shorter than `call_timeout` (at most
    /// it, below `half_open_timeout`). `None`: probes use `call_timeout`.
    pub probe_timeout: Option<Duration>,
    /// Rule 21 (shared breakers): a failure-driven trip in closed needs failures from at
    /// least this many distinct nodes within the window; with fewer, the reporting node
    /// opens only its own view (a local open). `1`: no quorum (every engine's default).
    pub quorum: u32,
    /// Rule 23: gradual recovery. After half-open closes, admit a fraction of calls that
    /// grows from `ramp.start` to all of them over `ramp.duration`; the others are
    /// rejected with [`RejectReason::Ramp`](crate::RejectReason::Ramp). `None`: close at once.
    pub ramp: Option<Ramp>,
}

impl Config {
    /// A builder with the defaults: 5 consecutive failures, 30 s recovery, one probe, two
    /// successes to close, a 30 s half-open timeout.
    pub fn builder() -> ConfigBuilder {
        ConfigBuilder::default()
    }

    /// How long the `trips`-th consecutive trip keeps the breaker open, before jitter:
    /// `min(max_open_duration, recovery_timeout * multiplier^(trips-1))`, computed by
    /// repeated multiplication in `f64` so every engine (Lua included) gets the same value.
    pub fn open_duration(&self, trips: u32, jitter_sample: f64) -> Nanos {
        let cap = Nanos::from_duration(self.max_open_duration).as_u64() as f64;
        let mut d = Nanos::from_duration(self.recovery_timeout).as_u64() as f64;
        let mut k = 1;
        while k < trips && d < cap {
            d *= self.backoff_multiplier;
            k += 1;
        }
        if d > cap {
            d = cap;
        }
        if self.jitter > 0.0 {
            let r = jitter_sample.clamp(0.0, 1.0);
            d *= 1.0 - self.jitter * r;
        }
        Nanos(d.floor() as u64)
    }

    /// The open duration of the `trips`-th consecutive trip when the outcome that opened
    /// the breaker carried a hint from the dependency (an HTTP `Retry-After`): at least the
    /// hint, capped at `max_open_duration`; never shorter than [`Config::open_duration`].
    ///
    /// ```
    /// use breakerbox::{Config, Nanos};
    /// use std::time::Duration;
    /// let c = Config::builder()
    ///     .recovery_timeout(Duration::from_secs(10))
    ///     .backoff(2.0, Duration::from_secs(60))
    ///     .build()
    ///     .unwrap();
    /// let secs = |s: u64| Nanos::from_duration(Duration::from_secs(s));
    /// assert_eq!(c.open_duration_with_hint(1, 0.0, Some(secs(30))), secs(30));
    /// assert_eq!(c.open_duration_with_hint(1, 0.0, Some(secs(3))), secs(10));
    /// assert_eq!(c.open_duration_with_hint(1, 0.0, Some(secs(3600))), secs(60));
    /// ```
    pub fn open_duration_with_hint(
        &self,
        trips: u32,
        jitter_sample: f64,
        retry_hint: Option<Nanos>,
    ) -> Nanos {
        let computed = self.open_duration(trips, jitter_sample);
        match retry_hint {
            Some(hint) => {
                let cap = Nanos::from_duration(self.max_open_duration);
                computed.max(hint.min(cap))
            }
            None => computed,
        }
    }

    /// Whether outcomes need a latency (a slow-call rule or a deadline is configured).
    #[inline(always)]
    pub fn measures_latency(&self) -> bool {
        self.slow_call_threshold.is_some() || self.has_deadline()
    }

    /// Whether a call or probe deadline is configured (rule 22).
    #[inline(always)]
    pub fn has_deadline(&self) -> bool {
        self.call_timeout.is_some() || self.probe_timeout.is_some()
    }

    /// Rule 22: the deadline of a call made with a permit of `kind`: `probe_timeout` (or
    /// else `call_timeout`) for a half-open probe, `call_timeout` for a normal call, none
    /// for a passthrough (it records nothing). The one definition every engine and adapter
    /// uses (`BreakerPermit::deadline` answers it).
    ///
    /// ```
    /// use breakerbox::model::PermitKind;
    /// use breakerbox::Config;
    /// use std::time::Duration;
    ///
    /// let config = Config::builder()
    ///     .call_timeout(Duration::from_secs(2))
    ///     .probe_timeout(Duration::from_millis(300))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(config.deadline(PermitKind::Normal), Some(Duration::from_secs(2)));
    /// assert_eq!(config.deadline(PermitKind::Probe), Some(Duration::from_millis(300)));
    /// assert_eq!(config.deadline(PermitKind::Passthrough), None);
    /// ```
    #[inline]
    pub fn deadline(&self, kind: PermitKind) -> Option<Duration> {
        match kind {
            PermitKind::Normal => self.call_timeout,
            PermitKind::Probe => self.probe_timeout.or(self.call_timeout),
            PermitKind::Passthrough => None,
        }
    }

    /// Rule 22: `verdict` as the deadline of `kind` leaves it: a call whose `latency` is
    /// strictly above its deadline is a [`Verdict::Failure`] whatever its verdict (the
    /// failure's reason is `timeout`); any other call keeps its verdict.
    ///
    /// ```
    /// use breakerbox::model::PermitKind;
    /// use breakerbox::{Config, Nanos, Verdict};
    /// use std::time::Duration;
    ///
    /// let config = Config::builder().call_timeout(Duration::from_secs(1)).build().unwrap();
    /// let late = Nanos::from_duration(Duration::from_millis(1001));
    /// let on_time = Nanos::from_duration(Duration::from_secs(1));
    /// assert_eq!(config.past_deadline(PermitKind::Normal, Verdict::Success, late), Verdict::Failure);
    /// assert_eq!(config.past_deadline(PermitKind::Normal, Verdict::Ignore, late), Verdict::Failure);
    /// assert_eq!(config.past_deadline(PermitKind::Normal, Verdict::Success, on_time), Verdict::Success);
    /// ```
    #[inline(always)]
    pub fn past_deadline(&self, kind: PermitKind, verdict: Verdict, latency: Nanos) -> Verdict {
        match self.deadline(kind) {
            Some(deadline) if latency > Nanos::from_duration(deadline) => Verdict::Failure,
            _ => verdict,
        }
    }

    /// Whether rule 21's quorum is on (`quorum > 1`).
    pub fn has_quorum(&self) -> bool {
        self.quorum > 1
    }

    /// Whether `latency` is slow under this config.
    pub fn is_slow(&self, latency: Nanos) -> bool {
        match self.slow_call_threshold {
            Some(threshold) => latency > Nanos::from_duration(threshold),
            None => false,
        }
    }

    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        builder::validate(self)
    }
}
