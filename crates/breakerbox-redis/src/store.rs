//! The Redis side of one breaker: its key, its channel, its config as a script argument,
//! and one async method per Lua script. Every call is bounded by a timeout.

use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use breakerbox::model::PermitKind;
use breakerbox::{Config, Verdict};
use redis::aio::MultiplexedConnection;
use redis::{Client, RedisError};

use crate::scripts::{ScriptKind, Scripts};
use crate::wire::{encode_config, kind_code, micros, parse_reply, ParseError, Reply};

/// Where a breaker lives in Redis and how long calls may take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreOptions {
    /// Prepended to the key: the breaker `payments` lives at `{prefix}{payments}`.
    pub prefix: String,
    /// An abandoned breaker's hash expires after this (refreshed on every write).
    pub ttl: Duration,
    /// Every Redis call (connect, script load, script run) is bounded by this.
    pub timeout: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            prefix: "bb:".to_string(),
            ttl: Duration::from_secs(24 * 3600),
            timeout: Duration::from_millis(100),
        }
    }
}

/// A Redis call that did not give an answer.
#[derive(Debug)]
pub enum StoreError {
    /// No answer within the timeout.
    Timeout(Duration),
    /// The connection or the server failed.
    Redis(RedisError),
    /// The reply was not what the scripts send.
    Protocol(String),
    /// The value under the key is corrupt and could not be repaired.
    Corrupt(String),
    /// Not tried: the breaker is in an outage episode and waits for Redis to come back.
    Unavailable,
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Timeout(after) => write!(f, "redis did not answer within {after:?}"),
            StoreError::Redis(e) => write!(f, "redis error: {e}"),
            StoreError::Protocol(what) => write!(f, "unexpected script reply: {what}"),
            StoreError::Corrupt(what) => write!(f, "corrupt breaker state: {what}"),
            StoreError::Unavailable => f.write_str("redis is unreachable; kept locally for now"),
        }
    }
}

impl std::error::Error for StoreError {}

/// One outcome to record: the permit's generation and kind, the verdict, the latency.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct OutcomeArg {
    /// The permit's generation.
    pub generation: u64,
    /// The permit's kind.
    pub kind: PermitKind,
    /// The verdict.
    pub verdict: Verdict,
    /// The call's latency (kept in whole microseconds).
    pub latency: Duration,
}

/// A manual operation.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ManualOp {
    /// Open until reset, or for the duration.
    ForceOpen(Option<Duration>),
    /// Admit everything and record nothing, until reset or for the duration.
    Disable(Option<Duration>),
    /// Back to a fresh closed phase.
    Reset,
    /// Push an open phase tripped elsewhere: a closed breaker re-opens with this reason
    /// (`TransitionReason::as_str`); any other phase is left alone.
    Trip(&'static str),
    /// Replace whatever is under the key by a fresh closed state.
    Repair,
}

/// A script reply, and whether the stored value had to be repaired first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The reply.
    pub reply: Reply,
    /// The corruption found (and repaired) before the operation ran, if any.
    pub repaired: Option<String>,
}

/// One breaker's state in Redis: the low-level API the [`RedisBreaker`] is built on, and
/// what tests use to drive the scripts with an explicit time.
///
/// Times are microseconds: `now_us: Some(t)` runs the script at `t` instead of Redis
/// `TIME`. The jitter sample `r` is used if the operation opens the breaker.
///
/// [`RedisBreaker`]: crate::RedisBreaker
pub struct RedisStore {
    client: Client,
    conn: Mutex<Option<MultiplexedConnection>>,
    scripts: Scripts,
    key: String,
    channel: String,
    config_arg: String,
    ttl_ms: String,
    timeout: Duration,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("key", &self.key)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// The hash key of breaker `name`: `{prefix}{name}`, the name in a hash tag.
pub fn breaker_key(prefix: &str, name: &str) -> String {
    format!("{prefix}{{{name}}}")
}

impl RedisStore {
    /// The store of breaker `name` with `config`, through `client` (nothing is sent yet).
    pub fn new(client: Client, name: &str, config: &Config, options: &StoreOptions) -> Self {
        let key = breaker_key(&options.prefix, name);
        RedisStore {
            client,
            conn: Mutex::new(None),
            scripts: Scripts::default(),
            channel: format!("{key}:events"),
            key,
            config_arg: encode_config(config),
            ttl_ms: u64::try_from(options.ttl.as_millis())
                .unwrap_or(u64::MAX)
                .max(1)
                .to_string(),
            timeout: options.timeout,
        }
    }

    /// The breaker's hash key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The channel every transition is published on.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// The Redis client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The per-call timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Forgets the cached connection and script digests (the next call reconnects).
    pub fn disconnect(&self) {
        if let Ok(mut conn) = self.conn.lock() {
            *conn = None;
        }
        self.scripts.forget();
    }

    async fn connection(&self) -> Result<MultiplexedConnection, RedisError> {
        if let Some(conn) = self.conn.lock().ok().and_then(|c| c.clone()) {
            return Ok(conn);
        }
        let conn = self.client.get_multiplexed_async_connection().await?;
        if let Ok(mut slot) = self.conn.lock() {
            *slot = Some(conn.clone());
        }
        Ok(conn)
    }

    async fn run_once(&self, kind: ScriptKind, args: &[String]) -> Result<Reply, StoreError> {
        let call = async {
            let mut conn = self.connection().await?;
            self.scripts.run(&mut conn, kind, &self.key, args).await
        };
        let value = match tokio::time::timeout(self.timeout, call).await {
            Err(_) => return Err(StoreError::Timeout(self.timeout)),
            Ok(Err(e)) => {
                if e.is_io_error() || e.is_connection_dropped() || e.is_unrecoverable_error() {
                    self.disconnect();
                }
                return Err(StoreError::Redis(e));
            }
            Ok(Ok(value)) => value,
        };
        parse_reply(&value).map_err(|e| match e {
            ParseError::Corrupt(why) => StoreError::Corrupt(why),
            ParseError::Protocol(why) => StoreError::Protocol(why),
        })
    }

    fn args(&self, now_us: Option<u64>, r: f64, rest: Vec<String>) -> Vec<String> {
        let mut args = Vec::with_capacity(5 + rest.len());
        args.push(now_us.map_or(String::new(), |t| t.to_string()));
        args.push(self.ttl_ms.clone());
        args.push(format!("{r:?}"));
        args.push(self.config_arg.clone());
        args.push(self.channel.clone());
        args.extend(rest);
        args
    }

    /// Runs a script; a corrupt value is repaired and the operation run once more.
    async fn run(
        &self,
        kind: ScriptKind,
        now_us: Option<u64>,
        r: f64,
        rest: Vec<String>,
    ) -> Result<Answer, StoreError> {
        let args = self.args(now_us, r, rest);
        match self.run_once(kind, &args).await {
            Err(StoreError::Corrupt(why)) => {
                tracing::warn!(
                    target: "breakerbox_redis",
                    key = self.key.as_str(),
                    reason = why.as_str(),
                    "corrupt breaker state in redis; repairing to a fresh closed state"
                );
                let repair = self.args(now_us, r, vec!["repair".into(), String::new()]);
                self.run_once(ScriptKind::Manual, &repair).await?;
                let reply = self.run_once(kind, &args).await?;
                Ok(Answer {
                    reply,
                    repaired: Some(why),
                })
            }
            Err(e) => Err(e),
            Ok(reply) => Ok(Answer {
                reply,
                repaired: None,
            }),
        }
    }

    /// `acquire.lua`: ask to make one call.
    pub async fn acquire(&self, now_us: Option<u64>, r: f64) -> Result<Answer, StoreError> {
        self.run(ScriptKind::Acquire, now_us, r, Vec::new()).await
    }

    /// `record.lua`: a batch of outcomes, applied in order at the script's time.
    pub async fn record(
        &self,
        outcomes: &[OutcomeArg],
        now_us: Option<u64>,
        r: f64,
    ) -> Result<Answer, StoreError> {
        let mut rest = Vec::with_capacity(1 + outcomes.len() * 4);
        rest.push(outcomes.len().to_string());
        for o in outcomes {
            rest.push(o.generation.to_string());
            rest.push(kind_code(o.kind).to_string());
            rest.push(
                match o.verdict {
                    Verdict::Success => "0",
                    Verdict::Failure => "1",
                    Verdict::Ignore => "2",
                }
                .to_string(),
            );
            rest.push(micros(o.latency).to_string());
        }
        self.run(ScriptKind::Record, now_us, r, rest).await
    }

    /// `release.lua`: a permit dropped without an outcome.
    pub async fn release(
        &self,
        generation: u64,
        kind: PermitKind,
        now_us: Option<u64>,
        r: f64,
    ) -> Result<Answer, StoreError> {
        let rest = vec![generation.to_string(), kind_code(kind).to_string()];
        self.run(ScriptKind::Release, now_us, r, rest).await
    }

    /// `manual.lua`: force open, disable, reset, trip or repair.
    pub async fn manual(
        &self,
        op: ManualOp,
        now_us: Option<u64>,
        r: f64,
    ) -> Result<Answer, StoreError> {
        let dur = |d: Option<Duration>| d.map_or(String::new(), |d| micros(d).to_string());
        let rest = match op {
            ManualOp::ForceOpen(d) => vec!["force_open".to_string(), dur(d)],
            ManualOp::Disable(d) => vec!["disable".to_string(), dur(d)],
            ManualOp::Reset => vec!["reset".to_string(), String::new()],
            ManualOp::Trip(reason) => vec!["trip".to_string(), reason.to_string()],
            ManualOp::Repair => vec!["repair".to_string(), String::new()],
        };
        self.run(ScriptKind::Manual, now_us, r, rest).await
    }

    /// `read.lua`: the stored state and the window's counts. Changes nothing.
    pub async fn read(&self, now_us: Option<u64>) -> Result<Answer, StoreError> {
        self.run(ScriptKind::Read, now_us, 0.0, Vec::new()).await
    }
}
