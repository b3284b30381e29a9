//! Finding, reading and changing breakers in Redis by name, through the engine's own
//! scripts.

use std::time::Duration;

use anyhow::Context as _;
use breakerbox::model::WindowCounts;
use breakerbox::{Config, Phase};
use breakerbox_redis::{
    breaker_key, Answer, ManualOp, RedisConnection, RedisStore, RedisTarget, ReplyDecision,
    StoreOptions,
};
use redis::AsyncCommands;
use serde::Serialize;

use super::args::Target;
use crate::printable::printable;
use crate::redact;

/// Every Redis call of an operator command is bounded by this.
const TIMEOUT: Duration = Duration::from_secs(3);

/// One breaker as an operator sees it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Row {
    /// The breaker's name.
    pub name: String,
    /// Its hash key.
    pub key: String,
    /// Its phase (`closed`, `open`, `half_open`, `forced_open`, `disabled`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Its generation.
    pub generation: u64,
    /// Seconds since the phase began.
    pub phase_age_s: f64,
    /// Open: seconds until it probes; forced open / disabled: seconds until the override
    /// expires (`None` with `override_until_reset` for never).
    pub open_for_s: Option<f64>,
    /// Consecutive trips without a close (the backoff's exponent).
    pub trips: u32,
    /// Half-open probes in flight.
    pub probes_in_flight: u32,
    /// Half-open consecutive probe successes.
    pub probe_successes: u32,
    /// Closed: the current run of failures.
    pub consecutive_failures: u32,
    /// The rate window's calls (zero outside closed).
    pub window_calls: u64,
    /// Failures among them / calls.
    pub failure_rate: Option<f64>,
    /// Slow calls among them / calls.
    pub slow_rate: Option<f64>,
    /// The operator override in force: `forced_open` or `disabled`.
    pub override_kind: Option<String>,
    /// Whether the override lasts until a reset.
    pub override_until_reset: bool,
    /// Rule 20: whether the breaker is in shadow mode (admits what it would reject).
    pub shadow: bool,
    /// Rule 20: calls admitted in shadow mode that would have been rejected, fleet-wide.
    pub shadow_rejections: u64,
    /// Rule 23: closed, with a recovery ramp recorded: seconds since it began. The ramp's
    /// duration is in each node's config, not in Redis, so the ramp may be over already;
    /// the scripts clear the record at the first call they see past its end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ramp_age_s: Option<f64>,
    /// Rule 23: the acquires the scripts numbered in that ramp, fleet-wide.
    pub ramp_calls: u64,
    /// Why the breaker could not be read or changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A connection to the Redis holding the breakers (one server, a cluster, or the primary
/// Sentinels name).
pub struct Shared {
    target: RedisTarget,
    conn: RedisConnection,
    prefix: String,
}

/// A store error with its sources, on one line (its `Display` leaves them to `source()`).
fn report(error: breakerbox_redis::StoreError) -> String {
    format!("{:#}", anyhow::Error::new(error))
}

async fn bounded<T>(
    what: &str,
    call: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> anyhow::Result<T> {
    match tokio::time::timeout(TIMEOUT, call).await {
        Ok(result) => result.with_context(|| what.to_owned()),
        Err(_) => anyhow::bail!("{what}: redis did not answer within {TIMEOUT:?}"),
    }
}

impl Shared {
    /// Connects to the target's Redis.
    pub async fn connect(target: &Target) -> anyhow::Result<Shared> {
        // The URL may hold a password: it is only ever printed redacted. The library's
        // messages about a URL name what is wrong, never the URL itself.
        let shown = redact::url(&target.redis);
        let redis = RedisTarget::parse(&target.redis)
            .map_err(|e| anyhow::anyhow!("invalid redis URL {shown:?}: {e}"))?;
        let conn = bounded(&format!("cannot connect to {shown}"), redis.connect()).await?;
        Ok(Shared {
            target: redis,
            conn,
            prefix: target.prefix.clone(),
        })
    }

    /// The names of every breaker under the prefix, sorted, and a row for each key under
    /// it whose name cannot be read (not UTF-8): reported, never touched. On a cluster,
    /// every primary is scanned.
    pub async fn list(&self) -> anyhow::Result<(Vec<String>, Vec<Row>)> {
        let pattern = format!("{}{{*}}", glob_escape(&self.prefix));
        let mut conn = self.conn.clone();
        let keys = conn
            .scan_match(&pattern, 1000, TIMEOUT)
            .await
            .context("SCAN")?;
        let mut names = Vec::new();
        let mut odd = Vec::new();
        for key in keys {
            match String::from_utf8(key) {
                Ok(key) => names.extend(self.name_of(&key)),
                Err(e) => {
                    let key = escape_bytes(e.as_bytes());
                    odd.push(Row {
                        name: self.name_of(&key).unwrap_or_else(|| key.clone()),
                        key,
                        error: Some("the key is not valid UTF-8; left alone".to_owned()),
                        ..Row::default()
                    });
                }
            }
        }
        names.sort();
        names.dedup();
        odd.sort_by(|a, b| a.key.cmp(&b.key));
        odd.dedup_by(|a, b| a.key == b.key);
        Ok((names, odd))
    }

    /// The breaker name of `key`, if it is `{prefix}{name}`.
    fn name_of(&self, key: &str) -> Option<String> {
        let inner = key
            .strip_prefix(&self.prefix)?
            .strip_prefix('{')?
            .strip_suffix('}')?;
        (!inner.is_empty() && !inner.contains(['{', '}'])).then(|| inner.to_owned())
    }

    /// Whether breaker `name` has a hash.
    pub async fn exists(&self, name: &str) -> anyhow::Result<bool> {
        let mut conn = self.conn.clone();
        let n: u64 = bounded("EXISTS", conn.exists(breaker_key(&self.prefix, name))).await?;
        Ok(n > 0)
    }

    /// A store for `name` whose window shape matches the stored one, so the read script
    /// counts the window as the nodes do and a manual operation leaves it alone. `None`
    /// when the key holds something that is not a breaker (it is then never touched: the
    /// engine would repair it, i.e. replace it).
    async fn store(&self, name: &str) -> Result<RedisStore, String> {
        let key = breaker_key(&self.prefix, name);
        let mut conn = self.conn.clone();
        let kind: String = bounded("TYPE", redis::cmd("TYPE").arg(&key).query_async(&mut conn))
            .await
            .map_err(|e| format!("{e:#}"))?;
        let signature = match kind.as_str() {
            "none" => None,
            "hash" => {
                let (version, wsig): (Option<String>, Option<String>) = bounded(
                    "HMGET",
                    redis::cmd("HMGET")
                        .arg(&key)
                        .arg("v")
                        .arg("wsig")
                        .query_async(&mut conn),
                )
                .await
                .map_err(|e| format!("{e:#}"))?;
                if version.as_deref() != Some(breakerbox_redis::STATE_FORMAT) {
                    return Err(format!(
                        "{key} is a hash but not a breaker (field v is {version:?}); left alone"
                    ));
                }
                wsig
            }
            other => return Err(format!("{key} holds a {other}, not a breaker; left alone")),
        };
        let config = config_for(signature.as_deref())?;
        let options = StoreOptions {
            prefix: self.prefix.clone(),
            timeout: TIMEOUT,
            ..StoreOptions::default()
        };
        Ok(RedisStore::on(self.target.clone(), name, &config, &options))
    }

    /// Reads breaker `name` (errors are reported in the row).
    pub async fn read(&self, name: &str) -> Row {
        match self.store(name).await {
            Ok(store) => row(name, &store, store.read(None).await.map_err(report)),
            Err(error) => error_row(name, &self.prefix, error),
        }
    }

    /// Applies `op` to breaker `name` and reads it back.
    pub async fn manual(&self, name: &str, op: ManualOp) -> Row {
        let store = match self.store(name).await {
            Ok(store) => store,
            Err(error) => return error_row(name, &self.prefix, error),
        };
        if let Err(e) = store.manual(op, None, 0.0).await {
            return error_row(name, &self.prefix, report(e));
        }
        row(name, &store, store.read(None).await.map_err(report))
    }
}

fn error_row(name: &str, prefix: &str, error: String) -> Row {
    Row {
        name: name.to_owned(),
        key: breaker_key(prefix, name),
        error: Some(error),
        ..Row::default()
    }
}

/// A config whose window signature is `signature` (`c:SIZE:0:0`, `t:0:WIDTH_US:BUCKETS`,
/// `n:0:0:0`): only the window's shape matters to the read and manual scripts.
fn config_for(signature: Option<&str>) -> Result<Config, String> {
    let bad = || format!("unknown window signature {signature:?}");
    let parts: Vec<&str> = signature.unwrap_or("n:0:0:0").split(':').collect();
    let number = |i: usize| -> Result<u64, String> {
        parts
            .get(i)
            .and_then(|p| p.parse::<u64>().ok())
            .ok_or_else(bad)
    };
    let builder = Config::builder();
    let built = match parts.first().copied() {
        Some("n") => builder.build(),
        Some("c") => {
            let size = u32::try_from(number(1)?).map_err(|_| bad())?;
            builder
                .failure_rate(0.5)
                .count_window(size)
                .min_calls(1)
                .build()
        }
        Some("t") => {
            let width = number(2)?;
            let buckets = u32::try_from(number(3)?).map_err(|_| bad())?;
            let duration = Duration::from_micros(width.saturating_mul(u64::from(buckets)));
            builder
                .failure_rate(0.5)
                .time_window(duration, buckets)
                .min_calls(1)
                .build()
        }
        _ => return Err(bad()),
    };
    built.map_err(|e| format!("{}: {e}", bad()))
}

fn row(name: &str, store: &RedisStore, answer: Result<Answer, String>) -> Row {
    let answer = match answer {
        Ok(answer) => answer,
        Err(error) => {
            return Row {
                name: name.to_owned(),
                key: store.key().to_owned(),
                error: Some(error),
                ..Row::default()
            }
        }
    };
    let reply = answer.reply;
    let state = reply.state;
    let counts = match reply.decision {
        ReplyDecision::State(counts) => counts,
        _ => WindowCounts::default(),
    };
    let rate = |n: u64| (counts.calls > 0).then(|| n as f64 / counts.calls as f64);
    let secs = |us: u64| us as f64 / 1e6;
    let (open_for_s, override_kind, until_reset) = match state.phase {
        Phase::Open => (state.remaining_us(reply.now_us).map(secs), None, false),
        Phase::ForcedOpen | Phase::Disabled => (
            state.remaining_us(reply.now_us).map(secs),
            Some(state.phase.as_str().to_owned()),
            state.until_us.is_none(),
        ),
        _ => (None, None, false),
    };
    Row {
        name: name.to_owned(),
        key: store.key().to_owned(),
        phase: Some(state.phase.as_str().to_owned()),
        generation: state.generation,
        phase_age_s: secs(reply.now_us.saturating_sub(state.since_us)),
        open_for_s,
        trips: state.trips,
        probes_in_flight: state.in_flight,
        probe_successes: state.probe_successes,
        consecutive_failures: state.consecutive_failures,
        window_calls: counts.calls,
        failure_rate: rate(counts.failures),
        slow_rate: rate(counts.slow),
        override_kind,
        override_until_reset: until_reset,
        shadow: state.shadow,
        shadow_rejections: state.shadow_rejections,
        ramp_age_s: state
            .ramp_started_us
            .filter(|_| state.phase == Phase::Closed)
            .map(|began| secs(reply.now_us.saturating_sub(began))),
        ramp_calls: state.ramp_calls,
        error: answer
            .repaired
            .map(|why| format!("repaired corrupt state: {why}")),
    }
}

/// `bytes` as text: valid UTF-8 kept (control characters escaped), other bytes as `\xff`.
fn escape_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 8);
    for chunk in bytes.utf8_chunks() {
        out.push_str(&printable(chunk.valid()));
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// Escapes the glob characters of SCAN's MATCH.
fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use breakerbox::config::WindowKind;

    #[test]
    fn window_signatures_rebuild_the_same_window() {
        let c = config_for(Some("c:50:0:0")).unwrap();
        assert_eq!(c.rate.unwrap().window, WindowKind::Count { size: 50 });
        let c = config_for(Some("t:0:1000000:10")).unwrap();
        assert_eq!(
            c.rate.unwrap().window,
            WindowKind::Time {
                duration: Duration::from_secs(10),
                buckets: 10
            }
        );
        assert!(config_for(None).unwrap().rate.is_none());
        assert!(config_for(Some("x:1")).is_err());
        assert!(config_for(Some("c:zero:0:0")).is_err());
    }

    #[test]
    fn keys_that_are_not_utf8_are_shown_escaped() {
        assert_eq!(escape_bytes(b"bb:{bad\xff}"), "bb:{bad\\xff}");
        assert_eq!(escape_bytes(b"\x1b[2J"), "\\x1b[2J");
    }

    #[test]
    fn glob_characters_in_the_prefix_are_escaped() {
        assert_eq!(glob_escape("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\");
    }
}
