//! Building a [`RedisBreaker`].

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use breakerbox::model::TransitionReason;
use breakerbox::{
    CircuitBreaker, Clock, Config, ConfigError, Event, EventKind, JitterSource, Listener,
    MonotonicClock, Phase, SplitMix,
};
use tokio::sync::{oneshot, Notify};

use super::view::ViewCell;
use super::{background, Inner, RedisBreaker};
use crate::events::Stats;
use crate::node::{NodeFlush, RedisNode};
use crate::options::{Backoff, Fallback, Mode};
use crate::pubsub::{self, Listening, Topic};
use crate::store::{RedisStore, StoreOptions};
use crate::target::{key_and_channel_share_a_slot, RedisTarget, Topology};

/// Why a [`RedisBreaker`] could not be built. (An unreachable Redis is not an error: the
/// breaker starts on its fallback and connects when Redis is there.)
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// The breaker's config was refused.
    Config(ConfigError),
    /// The URL was refused (e.g. `rediss://` without the `tls` feature).
    Url(redis::RedisError),
    /// The breaker's name cannot be used there: on a Redis Cluster its key and its
    /// channel must share a non-empty hash tag (`{name}`), so the name may not be empty
    /// nor start with `}`.
    Name(String),
    /// `build` was called outside a tokio runtime.
    NoRuntime,
}

/// A wrapped error (the config's, the URL's) is not displayed: it is the
/// [`source`](std::error::Error::source), so a report walking the chain prints it once.
impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Config(_) => f.write_str("invalid breaker config"),
            BuildError::Url(_) => f.write_str("invalid redis url"),
            BuildError::Name(why) => write!(f, "unusable breaker name: {why}"),
            BuildError::NoRuntime => f.write_str("RedisBreaker::build needs a tokio runtime"),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Config(e) => Some(e),
            BuildError::Url(e) => Some(e),
            BuildError::NoRuntime | BuildError::Name(_) => None,
        }
    }
}

/// Builds a [`RedisBreaker`]. Start with [`RedisBreaker::builder`].
pub struct RedisBreakerBuilder<C = MonotonicClock> {
    url: String,
    node: Option<RedisNode>,
    target: Option<RedisTarget>,
    name: String,
    config: Option<Config>,
    store: StoreOptions,
    mode: Mode,
    fallback: Fallback,
    backoff: Backoff,
    clock: C,
    script_time: bool,
    listeners: Vec<Arc<dyn Listener>>,
    jitter: Option<Arc<dyn JitterSource>>,
}

impl<C> fmt::Debug for RedisBreakerBuilder<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisBreakerBuilder")
            .field("name", &self.name)
            .field("node", &self.node.is_some())
            .field("store", &self.store)
            .field("mode", &self.mode)
            .field("fallback", &self.fallback)
            .finish_non_exhaustive()
    }
}

impl RedisBreakerBuilder<MonotonicClock> {
    pub(crate) fn new(url: String, name: String) -> Self {
        RedisBreakerBuilder {
            url,
            node: None,
            target: None,
            name,
            config: None,
            store: StoreOptions::default(),
            mode: Mode::default(),
            fallback: Fallback::default(),
            backoff: Backoff::default(),
            clock: MonotonicClock,
            script_time: false,
            listeners: Vec::new(),
            jitter: None,
        }
    }
}

impl RedisBreakerBuilder<MonotonicClock> {
    /// A builder for a breaker on `node`'s connection and subscription.
    pub(crate) fn on_node(node: RedisNode, name: String) -> Self {
        let mut builder = RedisBreakerBuilder::new(String::new(), name);
        builder.node = Some(node);
        builder
    }
}

impl<C: Clock + Clone> RedisBreakerBuilder<C> {
    /// The breaker's config (default: `Config::builder().build()`). Every node sharing the
    /// breaker should use the same config; the window's shape is checked on every script
    /// call and a changed shape starts an empty window.
    pub fn config(mut self, config: Config) -> Self {
        self.config = Some(config);
        self
    }

    /// Uses a ready client instead of the URL, e.g. one made with
    /// `redis::Client::build_with_tls` to trust a private CA or present a client
    /// certificate (`tls` feature).
    pub fn client(mut self, client: redis::Client) -> Self {
        self.target = Some(RedisTarget::single(client));
        self
    }

    /// Uses a ready target instead of the URL: one server, a Redis Cluster
    /// ([`RedisTarget::cluster`]) or a primary behind Sentinels ([`RedisTarget::sentinel`]).
    pub fn target(mut self, target: RedisTarget) -> Self {
        self.target = Some(target);
        self
    }

    /// Key prefix (default `bb:`): the breaker lives at `{prefix}{name}`.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.store.prefix = prefix.into();
        self
    }

    /// Expiry of an abandoned breaker's hash (default 24 h, refreshed on every write).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.store.ttl = ttl;
        self
    }

    /// Bound on every Redis call (default 100 ms).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.store.timeout = timeout;
        self
    }

    /// How long a half-open probe slot stays reserved for its caller (default 2 s): a
    /// slot whose caller timed out, crashed or lost its outcome is reclaimed after this,
    /// not at the end of the half-open phase. A probe still running when its lease ends
    /// is not counted, so keep it above your probes' own timeout.
    pub fn probe_lease(mut self, lease: Duration) -> Self {
        self.store.probe_lease = lease;
        self
    }

    /// Who this node is for rule 21's quorum (default: [`process_node_id`](crate::process_node_id),
    /// one random id per process). Nodes sharing a breaker need distinct ids; with a
    /// config's `quorum` above 1, a trip needs failures from that many of them.
    pub fn node_id(mut self, id: u64) -> Self {
        self.store.node_id = id;
        self
    }

    /// Strict or local-view mode (default: [`Mode::LocalView`] with [`LocalView::default`](crate::LocalView::default)).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// What decides while Redis is away (default: [`Fallback::LocalBreaker`]).
    pub fn fallback(mut self, fallback: Fallback) -> Self {
        self.fallback = fallback;
        self
    }

    /// Reconnection backoff (default 50 ms doubling to 2 s).
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Every option of a config file table at once: the store's (prefix, ttl, timeout,
    /// probe lease), the mode, the fallback and the backoff (feature `serde`).
    #[cfg(feature = "serde")]
    #[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
    pub fn options(mut self, options: crate::RedisOptions) -> Self {
        self.store = options.store;
        self.mode = options.mode;
        self.fallback = options.fallback;
        self.backoff = options.backoff;
        self
    }

    /// Adds a listener for transitions, rejections, stale results, outages and repairs
    /// (the core's [`Listener`] and [`EventKind`]s, as for every engine).
    pub fn listener(mut self, listener: impl Listener) -> Self {
        self.listeners.push(Arc::new(listener));
        self
    }

    /// Adds a listener shared with other breakers.
    pub fn shared_listener(mut self, listener: Arc<dyn Listener>) -> Self {
        self.listeners.push(listener);
        self
    }

    /// The randomness for jitter (default: splitmix seeded at random).
    pub fn jitter_source(mut self, source: impl JitterSource) -> Self {
        self.jitter = Some(Arc::new(source));
        self
    }

    /// Uses another local clock (for latency, the local view, the fallback breaker).
    pub fn clock<C2: Clock + Clone>(self, clock: C2) -> RedisBreakerBuilder<C2> {
        RedisBreakerBuilder {
            url: self.url,
            node: self.node,
            target: self.target,
            name: self.name,
            config: self.config,
            store: self.store,
            mode: self.mode,
            fallback: self.fallback,
            backoff: self.backoff,
            clock,
            script_time: self.script_time,
            listeners: self.listeners,
            jitter: self.jitter,
        }
    }

    /// Tests only: the scripts take their time from this breaker's clock (in
    /// microseconds) instead of Redis `TIME`, so a [`breakerbox::ManualClock`] drives
    /// the shared state deterministically.
    pub fn script_time_from_clock(mut self) -> Self {
        self.script_time = true;
        self
    }

    /// Builds the breaker, reads the shared state once and subscribes to its channel
    /// (each bounded by the timeout). If Redis is unreachable the breaker starts on its
    /// fallback.
    pub async fn build(self) -> Result<RedisBreaker<C>, BuildError> {
        let own_channel = self.node.is_none();
        let inner = self.assemble()?;
        inner.refresh().await;
        if own_channel {
            let (ready_tx, ready_rx) = oneshot::channel();
            let channel = Topic::Channel(inner.store.channel().to_string());
            tokio::spawn(pubsub::listen(
                Arc::downgrade(&inner),
                channel,
                Some(ready_tx),
                None,
            ));
            if !inner.is_down() {
                let wait = inner.store.timeout().max(Duration::from_millis(500));
                let _ = tokio::time::timeout(wait, ready_rx).await;
            }
        }
        Ok(RedisBreaker { inner })
    }

    /// Builds the breaker without waiting for anything: on a [`RedisNode`] (whose
    /// subscription it joins), or with a runtime current. The state is read by the first
    /// acquire (or the first refresh), so the first call costs a round trip. What a
    /// registry uses to make breakers on demand.
    pub fn build_now(self) -> Result<RedisBreaker<C>, BuildError> {
        let own_channel = self.node.is_none();
        let inner = self.assemble()?;
        if own_channel {
            let channel = Topic::Channel(inner.store.channel().to_string());
            tokio::spawn(pubsub::listen(Arc::downgrade(&inner), channel, None, None));
        }
        inner.request_refresh();
        Ok(RedisBreaker { inner })
    }

    /// Everything but the first read: the store, the fallback, the view, and the tasks
    /// (the flush/refresh loop; the node's subscription for a node's breaker).
    fn assemble(self) -> Result<Arc<Inner<C>>, BuildError> {
        let config = match self.config {
            Some(config) => config,
            None => Config::builder().build().map_err(BuildError::Config)?,
        };
        let runtime = match &self.node {
            Some(node) => node.runtime().clone(),
            None => tokio::runtime::Handle::try_current().map_err(|_| BuildError::NoRuntime)?,
        };
        let store = match (&self.node, self.target) {
            (Some(node), _) => RedisStore::over(node.link(), &self.name, &config, &self.store),
            (None, Some(target)) => RedisStore::on(target, &self.name, &config, &self.store),
            (None, None) => {
                let target = RedisTarget::parse(&self.url).map_err(BuildError::Url)?;
                RedisStore::on(target, &self.name, &config, &self.store)
            }
        };
        // A script may only touch its slot: on a cluster the channel it publishes on must
        // share the key's hash tag.
        if store.target().topology() == Topology::Cluster
            && !key_and_channel_share_a_slot(store.key(), store.channel())
        {
            return Err(BuildError::Name(format!(
                "on a Redis Cluster the key {:?} and the channel {:?} would hash to different \
                 slots (an empty hash tag): use a name that is not empty and does not start \
                 with '}}'",
                store.key(),
                store.channel()
            )));
        }
        let local_trip: Arc<Mutex<Option<&'static str>>> = Arc::new(Mutex::new(None));
        let trip_log = local_trip.clone();
        // The fallback is this node alone: a quorum of nodes means nothing to it (rule 21).
        let mut alone = config.clone();
        alone.quorum = 1;
        let local = CircuitBreaker::builder()
            .config(alone)
            .name(self.name.clone())
            .clock(self.clock.clone())
            .listener(move |event: &Event<'_>| {
                if let EventKind::Transition(t) = event.kind {
                    if t.to == Phase::Open && t.reason != TransitionReason::Reset {
                        if let Ok(mut r) = trip_log.lock() {
                            r.get_or_insert(t.reason.as_str());
                        }
                    }
                }
            })
            .build()
            .map_err(BuildError::Config)?;
        let jitter = self.jitter.unwrap_or_else(|| {
            let mut h = RandomState::new().build_hasher();
            h.write_u64(self.clock.now().as_u64());
            Arc::new(SplitMix::new(h.finish()))
        });
        let wake = Arc::new(Notify::new());
        #[cfg(feature = "metrics")]
        let counters = breakerbox::metrics::OutcomeCounters::new(&self.name);
        let self_clock_now = self.clock.now().as_u64();
        let node_flush = matches!(self.mode, Mode::LocalView(_))
            && self.node.as_ref().is_some_and(RedisNode::batches_flushes);
        let inner = Arc::new(Inner {
            name: self.name,
            config,
            store,
            mode: self.mode,
            fallback: self.fallback,
            backoff: self.backoff,
            clock: self.clock,
            script_time: self.script_time,
            jitter,
            view: ViewCell::new(),
            down: AtomicBool::new(false),
            down_since: AtomicU64::new(0),
            local,
            local_trip,
            pending_manual: Mutex::new(None),
            pending_shadow: Mutex::new(None),
            batch: Mutex::new(Vec::new()),
            refresh_requested: AtomicBool::new(false),
            orphans: Mutex::new(Vec::new()),
            pending_sample: Mutex::new(None),
            urgent: AtomicBool::new(false),
            suspect: AtomicBool::new(false),
            settled: Notify::new(),
            alerted: AtomicU64::new(0),
            ramp_calls: AtomicU64::new(0),
            #[cfg(feature = "metrics")]
            counters,
            wake: wake.clone(),
            listeners: self.listeners,
            stats: Stats::default(),
            last_news: AtomicU64::new(0),
            loop_handles: AtomicUsize::new(0),
            node: self.node.clone(),
            local_open_until: AtomicU64::new(0),
            flush_lock: Arc::new(tokio::sync::Mutex::new(())),
            // The first periodic flush is one interval after the breaker is made (not at
            // once: thousands made together would all flush in the same round).
            last_flush: AtomicU64::new(self_clock_now),
            node_flush,
        });
        if let Some(node) = &self.node {
            let weak: Weak<dyn Listening> = Arc::downgrade(&inner) as Weak<dyn Listening>;
            node.register(inner.store.channel(), weak);
            if node_flush {
                let weak: Weak<dyn NodeFlush> = Arc::downgrade(&inner) as Weak<dyn NodeFlush>;
                node.register_flush(weak);
            }
        }
        runtime.spawn(background::run(Arc::downgrade(&inner), wake));
        Ok(inner)
    }
}
