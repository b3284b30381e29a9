//! The configuration of one breaker and of one dependency (breaker + HTTP judge) as it is
//! written in files.
//!
//! ```toml
//! [breaker]
//! consecutive_failures = 5          # trip after 5 failures in a row
//! failure_rate = 0.5                # ... or when half the window failed
//! slow_call_rate = 0.8              # ... or when 80% of the window was slow
//! slow_call_threshold = "800ms"     # slower than this is slow
//! window = "count:100"              # the last 100 calls; or "time:10s" / "time:10s/20"
//! min_calls = 20                    # no rate is judged before 20 calls
//! recovery_timeout = "10s"          # how long the first trip stays open
//! backoff_multiplier = 2.0          # each consecutive trip doubles it...
//! max_open_duration = "2m"          # ...up to this (required with backoff_multiplier)
//! jitter = 0.1                      # shorten open phases by up to 10%, at random
//! max_probes = 1                    # probes in flight in half-open
//! required_successes = 2            # probe successes that close
//! half_open_timeout = "30s"         # half-open not confirmed by then re-opens
//!
//! [judge]                           # breakerbox_http::HttpJudgeConfig
//! slow_threshold = "800ms"
//! ```
//!
//! Every key is optional; the defaults are the core's (`breakerbox::config::builder`).
//! Durations are written `800ms`, `1.5s`, `2m`, `1m30s`. A window is `count:N` (the last
//! N calls) or `time:DURATION` (10 buckets) or `time:DURATION/BUCKETS`. Unknown keys are
//! refused; every error names its key.

mod fields;
mod window;

use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use breakerbox::config::WindowKind;
use breakerbox::{Config, ConfigError};
use breakerbox_http::{HttpJudge, HttpJudgeConfig};
use serde::{Deserialize, Serialize};

pub use window::WindowSpec;

/// One breaker's settings as written in a file. See the [module docs](self) for the keys.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BreakerSpec {
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
        with = "fields::slow_call_threshold"
    )]
    pub slow_call_threshold: Option<Duration>,
    /// The window rates are computed over: `count:N`, `time:10s` or `time:10s/20`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<WindowSpec>,
    /// No rate is judged before the window holds this many calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_calls: Option<u32>,
    /// How long the first trip keeps the breaker open.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "fields::recovery_timeout"
    )]
    pub recovery_timeout: Option<Duration>,
    /// Each consecutive trip multiplies the open duration by this (>= 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_multiplier: Option<f64>,
    /// The open duration never exceeds this; required with `backoff_multiplier`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "fields::max_open_duration"
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
        with = "fields::half_open_timeout"
    )]
    pub half_open_timeout: Option<Duration>,
}

impl BreakerSpec {
    /// Validates the spec into a core [`Config`]; errors read `breaker.KEY: ...`.
    pub fn to_config(&self) -> anyhow::Result<Config> {
        self.to_config_at("breaker")
    }

    /// Like [`BreakerSpec::to_config`], with errors prefixed by `path` (for a spec embedded
    /// elsewhere, e.g. `upstreams.api.breaker`).
    pub fn to_config_at(&self, path: &str) -> anyhow::Result<Config> {
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
        match self.window.map(|w| w.0) {
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
            (Some(m), None) => {
                if m != 1.0 {
                    anyhow::bail!(
                        "{path}.max_open_duration: required when backoff_multiplier is set (it is {m})"
                    );
                }
            }
            (None, None) => {}
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
        b.build().map_err(|e| config_error(path, &e))
    }
}

/// Names the file key behind a core config error: `breaker.window: invalid value ...`.
fn config_error(path: &str, error: &ConfigError) -> anyhow::Error {
    let key = match error.field() {
        "window_size" | "window_buckets" | "window_duration" => "window",
        other => other,
    };
    anyhow::anyhow!("{path}.{key}: {error}")
}

/// A dependency as configured in files: its breaker and how its HTTP outcomes are judged.
///
/// ```toml
/// [breaker]
/// consecutive_failures = 5
///
/// [judge]
/// slow_threshold = "800ms"
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DependencySpec {
    /// The breaker (`[breaker]`); every key optional.
    #[serde(default)]
    pub breaker: BreakerSpec,
    /// The HTTP judge (`[judge]`); the judge's defaults when absent.
    #[serde(default)]
    pub judge: HttpJudgeConfig,
}

impl DependencySpec {
    /// Parses a spec from TOML text.
    pub fn from_toml_str(text: &str) -> anyhow::Result<DependencySpec> {
        Ok(toml::from_str(text)?)
    }

    /// Reads and parses a TOML file; errors name the file.
    pub fn from_file(path: &Path) -> anyhow::Result<DependencySpec> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        DependencySpec::from_toml_str(&text).with_context(|| format!("in {}", path.display()))
    }

    /// The validated breaker config (errors read `breaker.KEY: ...`).
    pub fn config(&self) -> anyhow::Result<Config> {
        self.breaker.to_config()
    }

    /// The validated judge (errors read `judge.KEY: ...`).
    pub fn http_judge(&self) -> anyhow::Result<HttpJudge> {
        self.http_judge_at("judge")
    }

    /// Like [`DependencySpec::http_judge`], with errors prefixed by `path`.
    pub fn http_judge_at(&self, path: &str) -> anyhow::Result<HttpJudge> {
        HttpJudge::from_config(self.judge.clone()).map_err(|e| anyhow::anyhow!("{path}.{e}"))
    }
}

#[cfg(test)]
mod tests;
