//! [`RedisNode`]: one process's link to a Redis shared by any number of breakers.

use std::collections::HashMap;
use std::fmt::Display;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use breakerbox::{Config, ConfigError, MonotonicClock, Registry};

mod flush;
mod read;

use crate::breaker::{BuildError, RedisBreaker, RedisBreakerBuilder};
use crate::options::Backoff;
use crate::pubsub::{self, Change, Listening, Topic};
use crate::store::{Link, Part, StoreError};
use crate::target::{RedisTarget, Topology};
use crate::wire::Reply;
pub(crate) use flush::{NodeFlush, Taken};

/// The subscribers of one node, by channel.
type Subscribers = Mutex<HashMap<String, Weak<dyn Listening>>>;

/// One process's link to a Redis: one multiplexed connection and one pub/sub
/// subscription, shared by every breaker made from it, however many there are. Use it
/// when a process guards many dependencies with shared breakers (one per host, per
/// tenant): [`RedisNode::registry`] makes them on demand, and evicts idle ones.
///
/// On a Redis Cluster the connection is the cluster client's (one socket per node), and
/// each breaker's channel is a sharded channel subscribed on the breaker's own shard.
///
/// ```no_run
/// use breakerbox::Config;
/// use breakerbox_redis::RedisNode;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let node = RedisNode::connect("redis://127.0.0.1:6379/")?;
/// let template = Config::builder().consecutive_failures(5).build()?;
/// let hosts = node.registry::<String>(template, 1024)?;
/// let api = hosts.get(&"api.example.com:443".to_string())?; // shared by every process
/// # let _ = api;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RedisNode {
    shared: Arc<Shared>,
}

struct Shared {
    link: Arc<Link>,
    subscribers: Subscribers,
    listening: AtomicBool,
    runtime: tokio::runtime::Handle,
    backoff: Backoff,
    /// On a cluster: channels to add to or drop from the subscription, and the receiving
    /// end until the subscription starts.
    changes: tokio::sync::mpsc::UnboundedSender<Change>,
    changes_rx: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<Change>>>,
    /// The breakers whose periodic flushes the node sends together (see `node/flush.rs`).
    flushers: Arc<flush::Flushers>,
    /// The subscription is up: what changes in Redis reaches the node's breakers.
    live: AtomicBool,
    /// Slots for the breakers' reads (a new view's first, a refresh, a health check):
    /// thousands of breakers made at once would otherwise queue thousands of reads on the
    /// one connection, and the last ones would time out behind the first.
    reads: Arc<tokio::sync::Semaphore>,
    /// On one server: the breakers' reads, sent many per script call by the node's read
    /// task (see `node/read.rs`), started with the first.
    batched_reads: Arc<read::Reads>,
    reading: AtomicBool,
}

/// Reads of a node's breakers in flight at once (see `Shared::reads`).
const READS_IN_FLIGHT: usize = 64;

impl std::fmt::Debug for RedisNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisNode")
            .field("breakers", &self.breakers())
            .finish_non_exhaustive()
    }
}

impl RedisNode {
    /// A node for the Redis at `url`: `redis://` (`rediss://` with the `tls` feature),
    /// `redis+cluster://HOST:PORT,HOST:PORT` (feature `cluster`) or
    /// `redis+sentinel://HOST:PORT,HOST:PORT/SERVICE` (feature `sentinel`); see
    /// [`RedisTarget::parse`]. Nothing is sent yet; needs a tokio runtime (the node's
    /// tasks run on it).
    pub fn connect(url: &str) -> Result<RedisNode, BuildError> {
        RedisNode::on(RedisTarget::parse(url).map_err(BuildError::Url)?)
    }

    /// A node over a ready client (a private CA, a client certificate).
    pub fn with_client(client: redis::Client) -> Result<RedisNode, BuildError> {
        RedisNode::on(RedisTarget::single(client))
    }

    /// A node on `target`: one server, a cluster, or a primary behind Sentinels.
    pub fn on(target: RedisTarget) -> Result<RedisNode, BuildError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| BuildError::NoRuntime)?;
        let (changes, changes_rx) = tokio::sync::mpsc::unbounded_channel();
        Ok(RedisNode {
            shared: Arc::new(Shared {
                link: Arc::new(Link::new(target)),
                subscribers: Mutex::new(HashMap::new()),
                listening: AtomicBool::new(false),
                runtime,
                backoff: Backoff::default(),
                changes,
                changes_rx: Mutex::new(Some(changes_rx)),
                flushers: Arc::new(flush::Flushers::default()),
                live: AtomicBool::new(false),
                reads: Arc::new(tokio::sync::Semaphore::new(READS_IN_FLIGHT)),
                batched_reads: Arc::new(read::Reads::default()),
                reading: AtomicBool::new(false),
            }),
        })
    }

    /// Where the node's breakers keep their state.
    pub fn target(&self) -> &RedisTarget {
        self.shared.link.target()
    }

    /// A builder for the breaker `name` on this node's connection and subscription
    /// (every option of [`RedisBreaker::builder`] applies).
    pub fn breaker(&self, name: impl Into<String>) -> RedisBreakerBuilder {
        RedisBreakerBuilder::on_node(self.clone(), name.into())
    }

    /// A registry of breakers per key, made on demand from `template` on this node: each
    /// key's breaker is shared by every process that names it, idle ones are evicted
    /// when the registry is full, and abandoned keys expire in Redis (after 24 h).
    pub fn registry<K: Hash + Eq + Clone + Display>(
        &self,
        template: Config,
        capacity: usize,
    ) -> Result<Registry<K, RedisBreaker>, ConfigError> {
        self.registry_with(template, capacity, |builder| builder)
    }

    /// Like [`RedisNode::registry`], each breaker's builder adjusted by `adjust` (a
    /// prefix, a mode, a fallback).
    pub fn registry_with<K: Hash + Eq + Clone + Display>(
        &self,
        template: Config,
        capacity: usize,
        adjust: impl Fn(RedisBreakerBuilder) -> RedisBreakerBuilder + Send + Sync + 'static,
    ) -> Result<Registry<K, RedisBreaker>, ConfigError> {
        // Refused here, once, rather than by every breaker made later.
        breakerbox::CircuitBreaker::from_config(template.clone())?;
        let node = self.clone();
        Ok(Registry::with_factory(
            capacity,
            MonotonicClock,
            move |name, listeners| {
                let mut builder = adjust(node.breaker(name).config(template.clone()));
                for listener in listeners {
                    builder = builder.shared_listener(listener.clone());
                }
                builder.build_now().map_err(|error| match error {
                    BuildError::Config(error) => error,
                    other => ConfigError::new("redis", other, "a usable redis breaker"),
                })
            },
        ))
    }

    /// How many live breakers this node serves.
    pub fn breakers(&self) -> usize {
        self.shared
            .subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter(|s| s.strong_count() > 0)
            .count()
    }

    pub(crate) fn link(&self) -> Arc<Link> {
        self.shared.link.clone()
    }

    pub(crate) fn runtime(&self) -> &tokio::runtime::Handle {
        &self.shared.runtime
    }

    /// Whether the node sends its breakers' periodic flushes together (one server; on a
    /// cluster each breaker flushes on its own).
    pub(crate) fn batches_flushes(&self) -> bool {
        self.shared.link.batches_many()
    }

    /// Hands `breaker`'s periodic flushes to the node's flush task (started with the
    /// first).
    pub(crate) fn register_flush(&self, breaker: Weak<dyn NodeFlush>) {
        if self.shared.flushers.add(breaker) {
            let weak = Arc::downgrade(&self.shared);
            self.shared.runtime.spawn(flush::run(weak));
        }
    }

    /// One authoritative read of a breaker (`part`: its key and `read.lua`'s arguments),
    /// sent with the other breakers' reads queued meanwhile (one server only; see
    /// [`RedisNode::batches_flushes`]). The call is bounded by `timeout`, the wait for it
    /// is not.
    pub(crate) async fn read(&self, part: Part, timeout: Duration) -> Result<Reply, StoreError> {
        let rx = self.shared.batched_reads.push(part, timeout);
        if !self.shared.reading.swap(true, Ordering::AcqRel) {
            let weak = Arc::downgrade(&self.shared);
            self.shared.runtime.spawn(read::run(weak));
        }
        rx.await.unwrap_or(Err(StoreError::Unavailable))
    }

    /// A slot for one read of a breaker (held while it runs; the wait is not part of the
    /// read's timeout).
    pub(crate) async fn read_slot(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.shared.reads.clone().acquire_owned().await.ok()
    }

    /// Whether the node's subscription is up: a change in Redis (a trip, a warm streak,
    /// a manual switch) is announced to its breakers, and lost news makes them re-read
    /// when it comes back up.
    pub(crate) fn subscription_live(&self) -> bool {
        self.shared.live.load(Ordering::Acquire)
    }

    /// Delivers `channel`'s messages to `subscriber` (and forgets breakers that are gone).
    pub(crate) fn register(&self, channel: &str, subscriber: Weak<dyn Listening>) {
        let cluster = self.target().topology() == Topology::Cluster;
        {
            let mut subscribers = self
                .shared
                .subscribers
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            // Breakers that are gone are forgotten when the map doubles (amortised: at
            // thousands of breakers, a sweep per new breaker made them quadratic).
            let len = subscribers.len();
            if len < 64 || len.is_power_of_two() {
                subscribers.retain(|gone, s| {
                    let live = s.strong_count() > 0;
                    if !live && cluster && gone != channel {
                        let _ = self.shared.changes.send(Change::Unsubscribe(gone.clone()));
                    }
                    live
                });
            }
            subscribers.insert(channel.to_string(), subscriber);
        }
        if cluster {
            let _ = self
                .shared
                .changes
                .send(Change::Subscribe(channel.to_string()));
        }
        if !self.shared.listening.swap(true, Ordering::AcqRel) {
            let weak = Arc::downgrade(&self.shared);
            let every_breaker = "*:events".to_string();
            let (topic, changes) = if cluster {
                let changes = self
                    .shared
                    .changes_rx
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                (Topic::Channels(every_breaker), changes)
            } else {
                (Topic::Pattern(every_breaker), None)
            };
            self.shared
                .runtime
                .spawn(pubsub::listen(weak, topic, None, changes));
        }
    }
}

/// The node's one subscription (every breaker channel, `*:events`) delivers to its
/// breakers by channel.
impl Listening for Shared {
    fn target(&self) -> RedisTarget {
        self.link.target().clone()
    }

    fn backoff(&self) -> Backoff {
        self.backoff
    }

    fn message(&self, channel: &str, payload: &str) {
        self.deliver(channel, payload);
    }

    fn resubscribed(&self) {
        self.subscribed();
    }

    fn live(&self, up: bool) {
        // Only the pattern subscription of one server says so (on a cluster, per shard).
        if self.link.target().topology() != Topology::Cluster {
            self.live.store(up, Ordering::Release);
        }
    }

    fn resubscribed_to(&self, channel: &str) {
        let subscriber = self
            .subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(channel)
            .and_then(Weak::upgrade);
        if let Some(subscriber) = subscriber {
            subscriber.resubscribed();
        }
    }

    fn channels(&self) -> Vec<String> {
        self.subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(_, s)| s.strong_count() > 0)
            .map(|(channel, _)| channel.clone())
            .collect()
    }
}

impl Shared {
    fn deliver(&self, channel: &str, payload: &str) {
        let subscriber = self
            .subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(channel)
            .and_then(Weak::upgrade);
        if let Some(subscriber) = subscriber {
            subscriber.message(channel, payload);
        }
    }

    fn subscribed(&self) {
        let all: Vec<Arc<dyn Listening>> = self
            .subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter_map(Weak::upgrade)
            .collect();
        for subscriber in all {
            subscriber.resubscribed();
        }
    }
}
