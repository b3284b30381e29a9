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
//! The `[breaker]` table is the core's [`ConfigFile`] (`breakerbox` feature `serde`): every
//! key is optional, the defaults are the core's. Durations are written `800ms`, `1.5s`,
//! `2m`, `1m30s`. A window is `count:N` (the last N calls) or `time:DURATION` (10 buckets)
//! or `time:DURATION/BUCKETS`. Unknown keys are refused; every error names its key.

use std::path::Path;

use anyhow::Context as _;
use breakerbox::config::ConfigFile;
use breakerbox::Config;
use breakerbox_http::{HttpJudge, HttpJudgeConfig};
use serde::{Deserialize, Serialize};

/// Validates a `[breaker]` table into a core [`Config`], with errors prefixed by `path`
/// (`breaker`, or where the table is embedded, e.g. `upstreams.api.breaker`):
/// `upstreams.api.breaker.window: invalid value count:0 for `window`: expected ...`.
pub fn breaker_config_at(breaker: &ConfigFile, path: &str) -> anyhow::Result<Config> {
    breaker
        .to_config()
        .map_err(|e| anyhow::anyhow!("{path}.{}: {e}", e.field()))
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
    pub breaker: ConfigFile,
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
        breaker_config_at(&self.breaker, "breaker")
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
