//! The Redis side of one breaker: its key, its channel, its config as a script argument,
//! and one async method per Lua script. Every call is bounded by a timeout.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use breakerbox::model::PermitKind;
use breakerbox::Config;
use redis::{Client, ErrorKind, RedisError, ServerErrorKind};

use crate::scripts::ScriptKind;
use crate::target::{RedisConnection, RedisTarget, Topology};
use crate::wire::{
    encode_config, kind_code, micros, parse_reply, ParseError, Reply, ReplyDecision,
};

mod args;
mod link;
mod many;
pub use args::{BatchItem, ManualOp, OutcomeArg};
pub(crate) use link::Link;
pub(crate) use many::Part;
fn random_seed() -> u64 {
    RandomState::new().build_hasher().finish() | 1
}

/// Where a breaker lives in Redis and how long calls may take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreOptions {
    /// Prepended to the key: the breaker `payments` lives at `{prefix}{payments}`.
    pub prefix: String,
    /// An abandoned breaker's hash expires after this (refreshed on every write).
    pub ttl: Duration,
    /// Every Redis operation (connect, script load, script run, a repair and the retry
    /// after it) is bounded by this, as a whole.
    pub timeout: Duration,
    /// How long a half-open probe slot stays reserved for its caller (default 2 s). A
    /// slot whose lease ran out is reclaimed by the next operation, so a reservation
    /// whose caller timed out, crashed or lost its outcome frees its slot within one
    /// lease rather than at the end of the half-open phase. A probe still running when
    /// its lease ends is not counted (its outcome is stale): keep the lease above your
    /// probes' own timeout.
    pub probe_lease: Duration,
    /// Who this node is, for rule 21's quorum (a config with `quorum` above 1 counts
    /// the distinct nodes whose failures it saw). Default: [`process_node_id`], one
    /// random id per process; give each node its own (never 0 or one another's).
    pub node_id: u64,
}

/// This process's node id for rule 21's quorum: random, drawn once per process, never 0.
pub fn process_node_id() -> u64 {
    static ID: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *ID.get_or_init(random_seed)
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            prefix: "bb:".to_string(),
            ttl: Duration::from_secs(24 * 3600),
            timeout: Duration::from_millis(100),
            probe_lease: Duration::from_secs(2),
            node_id: process_node_id(),
        }
    }
}

/// The value of the `v` field in a breaker's hash: the layout the scripts read and write
/// (`FORMAT` in `lua/common.lua`). A hash with another value is not a breaker of this
/// version (the scripts repair it; an operator's tool should leave it alone).
pub const STATE_FORMAT: &str = "2";

/// The longest timed override (`force_open`, `disable`) the scripts store exactly: 100
/// years. For longer, use no duration at all ("until reset").
pub const MAX_OVERRIDE_DURATION: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// A Redis call that did not give an answer.
#[derive(Debug)]
#[non_exhaustive]
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
    /// Refused before anything was sent (e.g. an override longer than
    /// [`MAX_OVERRIDE_DURATION`]).
    Invalid(String),
}

/// The wrapped [`RedisError`] is not displayed: it is the
/// [`source`](std::error::Error::source), so a report walking the chain prints it once.
impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Timeout(after) => write!(f, "redis did not answer within {after:?}"),
            StoreError::Redis(_) => f.write_str("redis command failed"),
            StoreError::Protocol(what) => write!(f, "unexpected script reply: {what}"),
            StoreError::Corrupt(what) => write!(f, "corrupt breaker state: {what}"),
            StoreError::Unavailable => f.write_str("redis is unreachable; kept locally for now"),
            StoreError::Invalid(what) => f.write_str(what),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Redis(e) => Some(e),
            _ => None,
        }
    }
}

/// Displays an error and each of its sources, joined by `": "`, for logs and events that
/// keep a single line (the errors of this crate keep their sources out of `Display`).
pub(crate) struct Chain<'a>(pub(crate) &'a (dyn std::error::Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            write!(f, ": {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
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
    link: Arc<Link>,
    key: String,
    channel: String,
    /// The channel as the scripts take it: `p:` (`PUBLISH`) or `s:` (`SPUBLISH`, a
    /// cluster's sharded pub/sub) before the name.
    channel_arg: String,
    config_arg: String,
    /// The slow-call threshold in microseconds, as the scripts compare it.
    slow_us: Option<u64>,
    /// A normal call's deadline in microseconds (rule 22), as the scripts compare it.
    late_us: Option<u64>,
    ttl_ms: String,
    timeout: Duration,
    /// This node's id, sent with every batch (rule 21).
    node_id: String,
    next_token: AtomicU64,
    /// Round trips of each script, for the metrics facade.
    #[cfg(feature = "metrics")]
    round_trips: [metrics::Histogram; 5],
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
        RedisStore::on(RedisTarget::single(client), name, config, options)
    }

    /// The store of breaker `name` with `config` on `target` (one server, a cluster, a
    /// primary behind Sentinels); nothing is sent yet.
    pub fn on(target: RedisTarget, name: &str, config: &Config, options: &StoreOptions) -> Self {
        RedisStore::over(Arc::new(Link::new(target)), name, config, options)
    }

    /// The store of breaker `name`, over a connection shared with other stores.
    pub(crate) fn over(
        link: Arc<Link>,
        name: &str,
        config: &Config,
        options: &StoreOptions,
    ) -> Self {
        let key = breaker_key(&options.prefix, name);
        let channel = format!("{key}:events");
        // A cluster's sharded pub/sub keeps a breaker's news on its shard (the scripts
        // fall back to PUBLISH on a server without SPUBLISH).
        let mode = if link.target().topology() == Topology::Cluster {
            "s:"
        } else {
            "p:"
        };
        RedisStore {
            channel_arg: format!("{mode}{channel}"),
            link,
            channel,
            key,
            config_arg: encode_config(config, options.probe_lease),
            slow_us: config.slow_call_threshold.map(micros),
            late_us: config.deadline(PermitKind::Normal).map(micros),
            ttl_ms: u64::try_from(options.ttl.as_millis())
                .unwrap_or(u64::MAX)
                .max(1)
                .to_string(),
            timeout: options.timeout,
            node_id: options.node_id.to_string(),
            next_token: AtomicU64::new(random_seed()),
            #[cfg(feature = "metrics")]
            round_trips: ScriptKind::ALL.map(|kind| {
                metrics::histogram!(
                    "breakerbox_store_round_trip_seconds",
                    "breaker" => name.to_string(),
                    "script" => kind.name()
                )
            }),
        }
    }

    /// A fresh lease token for a probe reservation: never 0, unique within this store and
    /// random across processes.
    pub fn new_token(&self) -> u64 {
        // An odd step visits every u64 before repeating.
        let t = self
            .next_token
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
        t.max(1)
    }

    /// The breaker's hash key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The channel every transition is published on.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// Where the state lives.
    pub fn target(&self) -> &RedisTarget {
        self.link.target()
    }

    /// The node id this store reports its outcomes as (rule 21).
    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// The per-call timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Forgets the cached connection and script digests (the next call reconnects).
    pub fn disconnect(&self) {
        self.link.forget();
    }

    async fn connection(&self) -> Result<RedisConnection, RedisError> {
        self.link.connection().await
    }

    async fn run_once(&self, kind: ScriptKind, args: &[String]) -> Result<Reply, StoreError> {
        // A real round trip, timed on the monotonic clock (an injected test clock would
        // not see the network's time).
        #[cfg(feature = "metrics")]
        let started = breakerbox::Clock::now(&breakerbox::MonotonicClock);
        let value = {
            let mut conn = self.connection().await.map_err(|e| self.failed(e))?;
            self.link
                .scripts
                .run(&mut conn, kind, &self.key, args)
                .await
                .map_err(|e| self.failed(e))?
        };
        #[cfg(feature = "metrics")]
        if let Some(h) = self.round_trips.get(kind.index()) {
            let now = breakerbox::Clock::now(&breakerbox::MonotonicClock);
            h.record(now.saturating_sub(started).as_duration().as_secs_f64());
        }
        parse_reply(&value).map_err(|e| match e {
            ParseError::Corrupt(why) => StoreError::Corrupt(why),
            ParseError::Protocol(why) => StoreError::Protocol(why),
        })
    }

    fn failed(&self, e: RedisError) -> StoreError {
        // A connection to a server that is now a replica (a failover demoted it) answers
        // READONLY: the next call connects again (and asks the Sentinels which primary).
        let demoted = e.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly);
        let cluster = self.link.target.topology() == Topology::Cluster;
        // A cluster connection reconnects its nodes and follows the slots by itself.
        if demoted
            || (!cluster
                && (e.is_io_error() || e.is_connection_dropped() || e.is_unrecoverable_error()))
        {
            self.disconnect();
        }
        StoreError::Redis(e)
    }

    fn args(&self, now_us: Option<u64>, r: f64, rest: Vec<String>) -> Vec<String> {
        let mut args = Vec::with_capacity(5 + rest.len());
        args.push(now_us.map_or(String::new(), |t| t.to_string()));
        args.push(self.ttl_ms.clone());
        args.push(format!("{r:?}"));
        args.push(self.config_arg.clone());
        args.push(self.channel_arg.clone());
        args.extend(rest);
        args
    }

    /// Runs a script, the whole operation bounded by the timeout. A script that found the
    /// value corrupt repaired it atomically and applied nothing: the operation runs once
    /// more on the repaired state.
    async fn run(
        &self,
        kind: ScriptKind,
        now_us: Option<u64>,
        r: f64,
        rest: Vec<String>,
    ) -> Result<Answer, StoreError> {
        let args = self.args(now_us, r, rest);
        let operation = async {
            let first = self.run_once(kind, &args).await?;
            let ReplyDecision::Repaired(why) = first.decision else {
                return Ok(Answer {
                    reply: first,
                    repaired: None,
                });
            };
            tracing::warn!(
                target: "breakerbox_redis",
                key = self.key.as_str(),
                reason = why.as_str(),
                "corrupt breaker state in redis; replaced by a fresh closed state"
            );
            let mut reply = self.run_once(kind, &args).await?;
            if let ReplyDecision::Repaired(again) = &reply.decision {
                return Err(StoreError::Corrupt(again.clone()));
            }
            // The repair's own transition (to a fresh closed state) comes first.
            let mut transitions = first.transitions;
            transitions.append(&mut reply.transitions);
            reply.transitions = transitions;
            Ok(Answer {
                reply,
                repaired: Some(why),
            })
        };
        match tokio::time::timeout(self.timeout, operation).await {
            Ok(result) => result,
            Err(_) => {
                if self.link.target.drop_on_timeout() {
                    self.disconnect();
                }
                Err(StoreError::Timeout(self.timeout))
            }
        }
    }

    /// `acquire.lua`: ask to make one call (a probe slot, if taken, is leased to a fresh
    /// token, returned in the reply).
    pub async fn acquire(&self, now_us: Option<u64>, r: f64) -> Result<Answer, StoreError> {
        self.acquire_with_token(self.new_token(), now_us, r).await
    }

    /// `acquire.lua` with the caller's lease token, so that a caller who never gets the
    /// reply (a timeout) can still [cancel](RedisStore::cancel) the reservation.
    pub async fn acquire_with_token(
        &self,
        token: u64,
        now_us: Option<u64>,
        r: f64,
    ) -> Result<Answer, StoreError> {
        self.run(ScriptKind::Acquire, now_us, r, vec![token.to_string()])
            .await
    }

    /// `record.lua`: a batch of outcomes, applied in order at the script's time.
    pub async fn record(
        &self,
        outcomes: &[OutcomeArg],
        now_us: Option<u64>,
        r: f64,
    ) -> Result<Answer, StoreError> {
        let items: Vec<BatchItem> = outcomes.iter().copied().map(BatchItem::Outcome).collect();
        self.record_batch(&items, now_us, r).await
    }

    /// `record.lua` with outcomes and releases mixed, applied in order.
    pub async fn record_batch(
        &self,
        items: &[BatchItem],
        now_us: Option<u64>,
        r: f64,
    ) -> Result<Answer, StoreError> {
        let mut rest = crate::batch::arguments(items, self.slow_us, self.late_us);
        rest.push(self.node_id.clone());
        self.run(ScriptKind::Record, now_us, r, rest).await
    }

    /// `record.lua`'s whole argument list (`ARGV`) for `items`: what
    /// [`RedisStore::record_batch`] sends, for a node's flush of many breakers at once.
    pub(crate) fn record_args(
        &self,
        items: &[BatchItem],
        now_us: Option<u64>,
        r: f64,
    ) -> Vec<String> {
        let mut rest = crate::batch::arguments(items, self.slow_us, self.late_us);
        rest.push(self.node_id.clone());
        self.args(now_us, r, rest)
    }

    /// `record_many.lua` on this store's connection, for each `(store, items)` (every
    /// store on this store's server): per store, what its own
    /// [`RedisStore::record_batch`] would answer, except that a repaired value answers
    /// [`ReplyDecision::Repaired`] (the items not applied). What a node's flush task sends;
    /// public for the tests that hold it to `record.lua`.
    #[doc(hidden)]
    pub async fn record_many(
        &self,
        batches: &[(&RedisStore, &[BatchItem])],
        now_us: Option<u64>,
        r: f64,
    ) -> Result<Vec<Result<Reply, StoreError>>, StoreError> {
        let parts: Vec<Part> = batches
            .iter()
            .map(|(store, items)| Part {
                key: store.key.clone(),
                args: store.record_args(items, now_us, r),
            })
            .collect();
        self.link.record_many(&parts, self.timeout).await
    }

    /// `release.lua`: a permit dropped without an outcome (`token`: a probe's lease
    /// token, 0 for other kinds).
    pub async fn release(
        &self,
        generation: u64,
        kind: PermitKind,
        token: u64,
        now_us: Option<u64>,
        r: f64,
    ) -> Result<Answer, StoreError> {
        let rest = vec![
            generation.to_string(),
            kind_code(kind).to_string(),
            token.to_string(),
        ];
        self.run(ScriptKind::Release, now_us, r, rest).await
    }

    /// `release.lua` by token alone: gives back a probe slot reserved by an acquire whose
    /// reply never arrived (it timed out on the client, but Redis ran it). `Recorded` if
    /// the lease was live and is now free, `Stale` otherwise.
    pub async fn cancel(
        &self,
        token: u64,
        now_us: Option<u64>,
        r: f64,
    ) -> Result<Answer, StoreError> {
        let rest = vec![
            String::new(),
            kind_code(PermitKind::Probe).to_string(),
            token.to_string(),
        ];
        self.run(ScriptKind::Release, now_us, r, rest).await
    }

    /// `manual.lua`: force open, disable, reset, trip or restore an open phase.
    pub async fn manual(
        &self,
        op: ManualOp,
        now_us: Option<u64>,
        r: f64,
    ) -> Result<Answer, StoreError> {
        let dur = |d: Option<Duration>| d.map_or(String::new(), |d| micros(d).to_string());
        op.validate()?;
        let rest = match op {
            ManualOp::ForceOpen(d) => vec!["force_open".to_string(), dur(d)],
            ManualOp::Disable(d) => vec!["disable".to_string(), dur(d)],
            ManualOp::Reset => vec!["reset".to_string(), String::new()],
            ManualOp::Trip(reason) => vec!["trip".to_string(), reason.to_string()],
            ManualOp::RestoreOpen(left) => vec!["restore_open".to_string(), dur(Some(left))],
            ManualOp::Shadow(on) => {
                vec!["shadow".to_string(), if on { "1" } else { "0" }.to_string()]
            }
        };
        self.run(ScriptKind::Manual, now_us, r, rest).await
    }

    /// `read.lua`: the stored state and the window's counts. Changes nothing: a corrupt
    /// value is reported ([`StoreError::Corrupt`]), never rewritten.
    pub async fn read(&self, now_us: Option<u64>) -> Result<Answer, StoreError> {
        self.run(ScriptKind::Read, now_us, 0.0, Vec::new()).await
    }

    /// `read.lua` for a breaker's own refresh: like [`RedisStore::read`], but a corrupt
    /// value is repaired (atomically, only if it is still corrupt).
    pub async fn refresh(&self, now_us: Option<u64>) -> Result<Answer, StoreError> {
        self.run(ScriptKind::Read, now_us, 0.0, vec!["repair".to_string()])
            .await
    }

    /// [`RedisStore::refresh`]'s key and arguments, for a node's reads of many breakers
    /// in one call.
    pub(crate) fn refresh_part(&self, now_us: Option<u64>) -> Part {
        Part {
            key: self.key.clone(),
            args: self.args(now_us, 0.0, vec!["repair".to_string()]),
        }
    }
}
