//! `health` of an `[[upstream]]`: the active health check that stands in for real requests
//! as the half-open probe (rule 24, see [`crate::proxy::health`]).

use std::time::Duration;

use http::Method;
use toml::Table;

use super::fields::{duration, join, string, sub_table, Errors};

const HEALTH_KEYS: &[&str] = &["path", "method", "interval", "timeout"];

/// How often a check runs while the breaker is not closed, unless `interval` says.
const DEFAULT_INTERVAL: Duration = Duration::from_secs(2);
/// How long a check may take, unless `timeout` says.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);

/// An upstream's health check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthConfig {
    /// The path (and query) checked, sent as is (not under the upstream URL's path).
    pub path: http::uri::PathAndQuery,
    /// The method: a safe one (`GET`, `HEAD` or `OPTIONS`), `GET` by default.
    pub method: Method,
    /// The time between two checks.
    pub interval: Duration,
    /// The most a check may take (the probe's deadline may cut it shorter).
    pub timeout: Duration,
}

/// The `health` table of the upstream at `path`, when given.
pub(super) fn health(table: &Table, path: &str, errors: &mut Errors) -> Option<HealthConfig> {
    let health = sub_table(table, "health", path, errors)?;
    let at = join(path, "health");
    let before = errors.0.len();
    errors.unknown_keys(health, HEALTH_KEYS, &at);
    let check_path = match string(health, "path", &at, errors) {
        None if !health.contains_key("path") => {
            errors.push(
                &join(&at, "path"),
                "missing: the path to check, like \"/healthz\"",
            );
            None
        }
        None => None,
        Some(p) if !p.starts_with('/') => {
            errors.push(
                &join(&at, "path"),
                format_args!("invalid value {p:?}: expected a path starting with '/'"),
            );
            None
        }
        Some(p) => match p.parse::<http::uri::PathAndQuery>() {
            Ok(parsed) => Some(parsed),
            Err(e) => {
                errors.push(&join(&at, "path"), format_args!("invalid value {p:?}: {e}"));
                None
            }
        },
    };
    let method = match string(health, "method", &at, errors) {
        None => Some(Method::GET),
        Some(m) => match m.to_ascii_uppercase().as_str() {
            "GET" => Some(Method::GET),
            "HEAD" => Some(Method::HEAD),
            "OPTIONS" => Some(Method::OPTIONS),
            _ => {
                errors.push(
                    &join(&at, "method"),
                    format_args!("invalid value {m:?}: expected a safe method, \"GET\", \"HEAD\" or \"OPTIONS\" (a check must not change the upstream)"),
                );
                None
            }
        },
    };
    let interval = duration(health, "interval", &at, errors);
    let timeout = duration(health, "timeout", &at, errors);
    if errors.0.len() != before {
        return None;
    }
    let interval = interval.unwrap_or(DEFAULT_INTERVAL);
    let timeout = timeout.unwrap_or(DEFAULT_TIMEOUT.min(interval));
    if timeout > interval {
        errors.push(
            &join(&at, "timeout"),
            format_args!("{timeout:?} is longer than interval ({interval:?}): a check must end before the next one"),
        );
        return None;
    }
    Some(HealthConfig {
        path: check_path?,
        method: method?,
        interval,
        timeout,
    })
}
