//! Building and validating a [`Config`].

use std::time::Duration;

use super::{Config, HumanDuration, Ramp, Rate, RateRule, WindowKind};
use crate::ConfigError;

/// The largest `max_probes` or `required_successes` (4095): the in-memory engine counts
/// probes in flight and probe successes in fields of its packed state word, and this is
/// the largest value such a field holds.
pub const MAX_PROBES: u32 = crate::breaker::layout::PROBE_COUNT_MASK as u32;
/// The largest count window (65,535 calls): it bounds what a window keeps per breaker (the
/// Redis engine's ring of outcomes, the in-memory engine's queue of recent failures).
pub const MAX_COUNT_WINDOW: u32 = 65_535;
/// The largest `quorum` (64, rule 21): a shared breaker keeps one entry per node that
/// failed recently, at most `quorum` of them, so this bounds what it stores.
pub const MAX_QUORUM: u32 = 64;

/// What a [`ConfigError`] says is accepted for `max_probes` and `required_successes`.
const PROBES_RANGE: &str = "1..=4095";
/// What a [`ConfigError`] says is accepted for a count window's size.
const COUNT_WINDOW_RANGE: &str = "count:N with N in 1..=65535";
/// What a [`ConfigError`] says is accepted for `quorum`.
const QUORUM_RANGE: &str = "1..=64";
// The messages above spell the limits out; they must follow the limits.
const _: () = assert!(MAX_PROBES == 4095 && MAX_COUNT_WINDOW == 65_535 && MAX_QUORUM == 64);

/// Builds a [`Config`]; every setter takes plain values and [`ConfigBuilder::build`]
/// validates them all, naming the first bad field and its value.
#[derive(Clone, Debug, Default)]
pub struct ConfigBuilder {
    consecutive_failures: Option<u32>,
    failure_rate: Option<f64>,
    slow_rate: Option<f64>,
    slow_call_threshold: Option<Duration>,
    window: Option<WindowKind>,
    min_calls: Option<u32>,
    recovery_timeout: Option<Duration>,
    backoff: Option<(f64, Duration)>,
    jitter: Option<f64>,
    max_probes: Option<u32>,
    required_successes: Option<u32>,
    half_open_timeout: Option<Duration>,
    shadow: bool,
    call_timeout: Option<Duration>,
    probe_timeout: Option<Duration>,
    quorum: Option<u32>,
    ramp: Option<(f64, Duration)>,
}

/// Defaults, public so every engine and document agrees on them.
pub mod defaults {
    use std::time::Duration;
    /// Consecutive failures that trip when no rule is configured at all.
    pub const CONSECUTIVE_FAILURES: u32 = 5;
    /// How long the first trip keeps the breaker open.
    pub const RECOVERY_TIMEOUT: Duration = Duration::from_secs(30);
    /// Probes in flight in half-open.
    pub const MAX_PROBES: u32 = 1;
    /// Consecutive probe successes that close.
    pub const REQUIRED_SUCCESSES: u32 = 2;
    /// Time half-open has to confirm recovery.
    pub const HALF_OPEN_TIMEOUT: Duration = Duration::from_secs(30);
    /// Size of the count window when a rate is set without a window.
    pub const COUNT_WINDOW: u32 = 100;
    /// Calls needed before a rate is judged, when not set (capped at the window size).
    pub const MIN_CALLS: u32 = 10;
}

impl ConfigBuilder {
    /// Trip after `n` consecutive failures in closed.
    pub fn consecutive_failures(mut self, n: u32) -> Self {
        self.consecutive_failures = Some(n);
        self
    }

    /// Trip when the failure rate over the window reaches `rate` (in (0, 1]).
    pub fn failure_rate(mut self, rate: f64) -> Self {
        self.failure_rate = Some(rate);
        self
    }

    /// Trip when the rate of slow calls over the window reaches `rate` (in (0, 1]).
    /// Needs [`ConfigBuilder::slow_call_threshold`].
    pub fn slow_call_rate(mut self, rate: f64) -> Self {
        self.slow_rate = Some(rate);
        self
    }

    /// A call slower than this (strictly) is slow.
    pub fn slow_call_threshold(mut self, threshold: Duration) -> Self {
        self.slow_call_threshold = Some(threshold);
        self
    }

    /// Rates are computed over the last `size` non-ignored calls (the default window, of 100).
    pub fn count_window(mut self, size: u32) -> Self {
        self.window = Some(WindowKind::Count { size });
        self
    }

    /// Rates are computed over the last `duration`, kept in `buckets` buckets.
    pub fn time_window(mut self, duration: Duration, buckets: u32) -> Self {
        self.window = Some(WindowKind::Time { duration, buckets });
        self
    }

    /// No rate is judged before the window holds `n` calls.
    pub fn min_calls(mut self, n: u32) -> Self {
        self.min_calls = Some(n);
        self
    }

    /// How long the first trip keeps the breaker open.
    pub fn recovery_timeout(mut self, timeout: Duration) -> Self {
        self.recovery_timeout = Some(timeout);
        self
    }

    /// Each consecutive re-trip multiplies the open duration by `multiplier`, up to `max`.
    /// `max` also caps a dependency's retry hint (`Permit::record_with_retry_hint`, an HTTP
    /// `Retry-After`): `backoff(1.0, Duration::from_secs(600))` keeps a fixed recovery
    /// timeout but lets a server ask for up to ten minutes.
    pub fn backoff(mut self, multiplier: f64, max: Duration) -> Self {
        self.backoff = Some((multiplier, max));
        self
    }

    /// Shorten each open duration by a random fraction of up to `fraction` (in [0, 1)).
    pub fn jitter(mut self, fraction: f64) -> Self {
        self.jitter = Some(fraction);
        self
    }

    /// At most `n` probes in flight in half-open.
    pub fn max_probes(mut self, n: u32) -> Self {
        self.max_probes = Some(n);
        self
    }

    /// Close after `n` consecutive probe successes.
    pub fn required_successes(mut self, n: u32) -> Self {
        self.required_successes = Some(n);
        self
    }

    /// A half-open phase that has not closed within `timeout` re-opens.
    pub fn half_open_timeout(mut self, timeout: Duration) -> Self {
        self.half_open_timeout = Some(timeout);
        self
    }

    /// Starts the breaker in shadow mode (rule 20): every rule and transition runs, but
    /// nothing is rejected; would-be rejections are counted and reported as
    /// [`EventKind::ShadowRejected`](crate::EventKind::ShadowRejected) events.
    pub fn shadow(mut self, on: bool) -> Self {
        self.shadow = on;
        self
    }

    /// Rule 22: a call that takes longer than `timeout` (strictly) is a failure with
    /// reason `timeout`, whatever its verdict. The async adapters (the tower layer, the
    /// reqwest middleware, the proxy) cancel the call at this deadline; a synchronous
    /// `call` cannot, and judges its late result as a timeout failure. Probes use it too
    /// unless [`ConfigBuilder::probe_timeout`] is set.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = Some(timeout);
        self
    }

    /// Rule 22: the deadline of a half-open probe, shorter than the call timeout (a hung
    /// probe holds one of the few probe slots): at most `call_timeout` and below
    /// `half_open_timeout`.
    pub fn probe_timeout(mut self, timeout: Duration) -> Self {
        self.probe_timeout = Some(timeout);
        self
    }

    /// Rule 21, for shared breakers: a failure-driven trip (consecutive failures, failure
    /// rate) opens the shared breaker only when at least `k` distinct nodes reported
    /// failures within the window; a node whose failures alone meet the rule opens only
    /// its own view (a local open). `1` (the default) is no quorum. At most
    /// [`MAX_QUORUM`]. The in-memory engine is one node and refuses `k > 1`.
    pub fn quorum(mut self, k: u32) -> Self {
        self.quorum = Some(k);
        self
    }

    /// Recovers gradually (rule 23): after half-open closes, admit the fraction `start`
    /// (in (0, 1]) of calls, growing linearly to all of them over `duration` (above zero,
    /// at most an hour); the others are rejected with
    /// [`RejectReason::Ramp`](crate::RejectReason::Ramp).
    ///
    /// ```
    /// use breakerbox::Config;
    /// use std::time::Duration;
    /// let config = Config::builder().ramp(0.1, Duration::from_secs(30)).build().unwrap();
    /// assert_eq!(config.ramp.unwrap().start.ppm(), 100_000);
    /// let err = Config::builder().ramp(1.5, Duration::from_secs(30)).build().unwrap_err();
    /// assert_eq!(err.field(), "ramp_start");
    /// ```
    pub fn ramp(mut self, start: f64, duration: Duration) -> Self {
        self.ramp = Some((start, duration));
        self
    }

    /// Validates and builds the config.
    pub fn build(self) -> Result<Config, ConfigError> {
        let failure_rate = self
            .failure_rate
            .map(|r| Rate::named("failure_rate", r))
            .transpose()?;
        let slow_rate = self
            .slow_rate
            .map(|r| Rate::named("slow_call_rate", r))
            .transpose()?;
        let has_rate = failure_rate.is_some() || slow_rate.is_some();
        if !has_rate {
            if let Some(window) = self.window {
                return Err(ConfigError::new(
                    "window",
                    window,
                    "a failure_rate or slow_call_rate to go with the window",
                ));
            }
            if let Some(min_calls) = self.min_calls {
                return Err(ConfigError::new(
                    "min_calls",
                    min_calls,
                    "a failure_rate or slow_call_rate to go with min_calls",
                ));
            }
        }
        let rate = if has_rate {
            let window = self.window.unwrap_or(WindowKind::Count {
                size: defaults::COUNT_WINDOW,
            });
            let min_calls = match (self.min_calls, window) {
                (Some(n), _) => n,
                (None, WindowKind::Count { size }) => defaults::MIN_CALLS.min(size.max(1)),
                (None, WindowKind::Time { .. }) => defaults::MIN_CALLS,
            };
            Some(RateRule {
                window,
                failure_rate,
                slow_rate,
                min_calls,
            })
        } else {
            None
        };
        let consecutive_failures = match (self.consecutive_failures, has_rate) {
            (Some(n), _) => Some(n),
            (None, false) => Some(defaults::CONSECUTIVE_FAILURES),
            (None, true) => None,
        };
        let recovery_timeout = self.recovery_timeout.unwrap_or(defaults::RECOVERY_TIMEOUT);
        let (backoff_multiplier, max_open_duration) =
            self.backoff.unwrap_or((1.0, recovery_timeout));
        let ramp = self
            .ramp
            .map(|(start, duration)| Ramp::new(start, duration))
            .transpose()?;
        let config = Config {
            consecutive_failures,
            rate,
            slow_call_threshold: self.slow_call_threshold,
            recovery_timeout,
            backoff_multiplier,
            max_open_duration,
            jitter: self.jitter.unwrap_or(0.0),
            max_probes: self.max_probes.unwrap_or(defaults::MAX_PROBES),
            required_successes: self
                .required_successes
                .unwrap_or(defaults::REQUIRED_SUCCESSES),
            half_open_timeout: self
                .half_open_timeout
                .unwrap_or(defaults::HALF_OPEN_TIMEOUT),
            shadow: self.shadow,
            call_timeout: self.call_timeout,
            probe_timeout: self.probe_timeout,
            quorum: self.quorum.unwrap_or(1),
            ramp,
        };
        validate(&config)?;
        Ok(config)
    }
}

/// Checks every field of a config, whether built or written by hand.
pub(crate) fn validate(c: &Config) -> Result<(), ConfigError> {
    if c.consecutive_failures.is_none() && c.rate.is_none() {
        return Err(ConfigError::new(
            "consecutive_failures",
            "none",
            "a consecutive-failure rule or a rate rule (at least one)",
        ));
    }
    if c.consecutive_failures == Some(0) {
        return Err(ConfigError::new("consecutive_failures", 0, "at least 1"));
    }
    if let Some(rule) = &c.rate {
        validate_rate_rule(rule, c)?;
    }
    if c.slow_call_threshold == Some(Duration::ZERO) {
        return Err(ConfigError::new(
            "slow_call_threshold",
            "0s",
            "a duration above zero",
        ));
    }
    if c.recovery_timeout.is_zero() {
        return Err(ConfigError::new(
            "recovery_timeout",
            "0s",
            "a duration above zero",
        ));
    }
    if !(c.backoff_multiplier >= 1.0 && c.backoff_multiplier.is_finite()) {
        return Err(ConfigError::new(
            "backoff_multiplier",
            c.backoff_multiplier,
            "a finite number >= 1",
        ));
    }
    if c.max_open_duration < c.recovery_timeout {
        return Err(ConfigError::new(
            "max_open_duration",
            format!("{:#}", HumanDuration(c.max_open_duration)),
            "at least the recovery_timeout",
        ));
    }
    if !(0.0..1.0).contains(&c.jitter) {
        return Err(ConfigError::new("jitter", c.jitter, "a fraction in [0, 1)"));
    }
    if c.max_probes == 0 || c.max_probes > MAX_PROBES {
        return Err(ConfigError::new("max_probes", c.max_probes, PROBES_RANGE));
    }
    if c.required_successes == 0 || c.required_successes > MAX_PROBES {
        return Err(ConfigError::new(
            "required_successes",
            c.required_successes,
            PROBES_RANGE,
        ));
    }
    if c.quorum == 0 || c.quorum > MAX_QUORUM {
        return Err(ConfigError::new("quorum", c.quorum, QUORUM_RANGE));
    }
    if c.half_open_timeout.is_zero() {
        return Err(ConfigError::new(
            "half_open_timeout",
            "0s",
            "a duration above zero",
        ));
    }
    if let Some(ramp) = &c.ramp {
        ramp.validate()?;
    }
    validate_deadlines(c)
}

/// Rule 22: deadlines are above zero; a probe's is at most the call's and ends before the
/// half-open deadline (a longer one would never be reached: the phase ends first).
fn validate_deadlines(c: &Config) -> Result<(), ConfigError> {
    let shown = |d: Duration| format!("{:#}", HumanDuration(d));
    if c.call_timeout == Some(Duration::ZERO) {
        return Err(ConfigError::new(
            "call_timeout",
            "0s",
            "a duration above zero",
        ));
    }
    let Some(probe) = c.probe_timeout else {
        return Ok(());
    };
    if probe.is_zero() {
        return Err(ConfigError::new(
            "probe_timeout",
            "0s",
            "a duration above zero",
        ));
    }
    if c.call_timeout.is_some_and(|call| probe > call) {
        return Err(ConfigError::new(
            "probe_timeout",
            shown(probe),
            "at most the call_timeout",
        ));
    }
    if probe >= c.half_open_timeout {
        return Err(ConfigError::new(
            "probe_timeout",
            shown(probe),
            "below the half_open_timeout",
        ));
    }
    Ok(())
}

fn validate_rate_rule(rule: &RateRule, c: &Config) -> Result<(), ConfigError> {
    if rule.failure_rate.is_none() && rule.slow_rate.is_none() {
        return Err(ConfigError::new(
            "failure_rate",
            "none",
            "a failure_rate or slow_call_rate in a rate rule",
        ));
    }
    if rule.slow_rate.is_some() && c.slow_call_threshold.is_none() {
        return Err(ConfigError::new(
            "slow_call_threshold",
            "none",
            "a threshold, since slow_call_rate is set",
        ));
    }
    match rule.window {
        WindowKind::Count { size } => {
            if size == 0 || size > MAX_COUNT_WINDOW {
                return Err(ConfigError::new("window", rule.window, COUNT_WINDOW_RANGE));
            }
            if rule.min_calls > size {
                return Err(ConfigError::new(
                    "min_calls",
                    rule.min_calls,
                    "at most the window's size",
                ));
            }
        }
        WindowKind::Time { duration, buckets } => {
            if buckets == 0 || buckets > 3600 {
                return Err(ConfigError::new(
                    "window",
                    rule.window,
                    "time:DURATION/BUCKETS with BUCKETS in 1..=3600",
                ));
            }
            if duration.is_zero() || duration.as_nanos() < u128::from(buckets) {
                return Err(ConfigError::new(
                    "window",
                    rule.window,
                    "a time window of at least one nanosecond per bucket",
                ));
            }
        }
    }
    if rule.min_calls == 0 {
        return Err(ConfigError::new("min_calls", 0, "at least 1"));
    }
    Ok(())
}

impl From<Config> for ConfigBuilder {
    fn from(c: Config) -> ConfigBuilder {
        ConfigBuilder {
            consecutive_failures: c.consecutive_failures,
            failure_rate: c.rate.and_then(|rule| rule.failure_rate).map(Rate::as_f64),
            slow_rate: c.rate.and_then(|rule| rule.slow_rate).map(Rate::as_f64),
            slow_call_threshold: c.slow_call_threshold,
            window: c.rate.map(|rule| rule.window),
            min_calls: c.rate.map(|rule| rule.min_calls),
            recovery_timeout: Some(c.recovery_timeout),
            backoff: Some((c.backoff_multiplier, c.max_open_duration)),
            jitter: Some(c.jitter),
            max_probes: Some(c.max_probes),
            required_successes: Some(c.required_successes),
            half_open_timeout: Some(c.half_open_timeout),
            shadow: c.shadow,
            call_timeout: c.call_timeout,
            probe_timeout: c.probe_timeout,
            quorum: Some(c.quorum),
            ramp: c.ramp.map(|r| (r.start.as_f64(), r.duration)),
        }
    }
}
