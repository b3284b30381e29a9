//! One subscription loop for every listener: a breaker's own channel, or a node's
//! subscription serving all its breakers. Reconnects with backoff; ends when its owner is
//! gone.
//!
//! On one server (or the primary Sentinels name) a node listens to every breaker's channel
//! with one pattern (`PSUBSCRIBE *:events`). On a Redis Cluster each channel is a sharded
//! channel (`SSUBSCRIBE`, Redis 7), subscribed on its own on the shard that holds the
//! breaker, so a breaker's news stays on its shard; on a cluster without sharded pub/sub,
//! the pattern again (plain `PUBLISH` reaches every node of a cluster).

use std::sync::Weak;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::oneshot;

use crate::options::Backoff;
use crate::target::RedisTarget;

/// What a subscription listens to.
pub(crate) enum Topic {
    /// One channel (`SUBSCRIBE`; `SSUBSCRIBE` on a cluster).
    Channel(String),
    /// Every channel matching a pattern (`PSUBSCRIBE`).
    Pattern(String),
    /// On a cluster: the owner's channels ([`Listening::channels`]), each subscribed on
    /// its own (`SSUBSCRIBE`), later ones announced through a [`Change`] receiver; this
    /// pattern where the cluster has no sharded pub/sub.
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    Channels(String),
}

/// A channel to start or stop listening to (a node's breaker made or gone).
#[cfg_attr(not(feature = "cluster"), allow(dead_code))]
#[derive(Debug)]
pub(crate) enum Change {
    Subscribe(String),
    Unsubscribe(String),
}

/// The owner of a subscription: where it connects and what it does with messages.
pub(crate) trait Listening: Send + Sync + 'static {
    /// Where to subscribe.
    fn target(&self) -> RedisTarget;
    /// The reconnection backoff.
    fn backoff(&self) -> Backoff;
    /// A message on `channel`.
    fn message(&self, channel: &str, payload: &str);
    /// Subscribed again after a break: messages may have been missed.
    fn resubscribed(&self);
    /// `channel` alone was subscribed again (its shard failed over or moved): its
    /// messages may have been missed.
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    fn resubscribed_to(&self, _channel: &str) {
        self.resubscribed();
    }
    /// The subscription is up (`true`: subscribed) or down (`false`: lost); on one
    /// server only.
    fn live(&self, _up: bool) {}
    /// The channels to listen to one by one ([`Topic::Channels`]).
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    fn channels(&self) -> Vec<String> {
        Vec::new()
    }
    /// How long connecting and subscribing may take.
    fn subscribe_timeout(&self) -> Duration {
        MIN_SUBSCRIBE_TIMEOUT
    }
}

/// Connecting and subscribing may always take this long.
pub(crate) const MIN_SUBSCRIBE_TIMEOUT: Duration = Duration::from_millis(500);

/// The next reconnection delay after `delay`.
fn next_delay(delay: Option<Duration>, backoff: Backoff) -> Duration {
    match delay {
        None => backoff.min,
        Some(d) => (d * 2).min(backoff.max),
    }
}

/// Listens to `topic` for `owner` while it lives, reconnecting with backoff. Signals
/// `ready` once subscribed the first time. `changes` announces channels to add or drop
/// ([`Topic::Channels`]).
pub(crate) async fn listen<L: Listening>(
    owner: Weak<L>,
    topic: Topic,
    ready: Option<oneshot::Sender<()>>,
    changes: Option<tokio::sync::mpsc::UnboundedReceiver<Change>>,
) {
    #[cfg(feature = "cluster")]
    {
        let cluster = owner
            .upgrade()
            .is_some_and(|o| o.target().topology() == crate::Topology::Cluster);
        if cluster {
            return cluster::listen(owner, topic, ready, changes).await;
        }
    }
    let _ = changes;
    listen_one(owner, topic, ready).await
}

/// [`listen`] on one server: the server itself, or the primary the Sentinels name (asked
/// again at every reconnection, so a failover is followed).
async fn listen_one<L: Listening>(
    owner: Weak<L>,
    topic: Topic,
    mut ready: Option<oneshot::Sender<()>>,
) {
    let mut delay: Option<Duration> = None;
    loop {
        let Some((target, backoff, timeout)) = owner
            .upgrade()
            .map(|o| (o.target(), o.backoff(), o.subscribe_timeout()))
        else {
            return;
        };
        let connect = async {
            match target.pubsub_client().await {
                Some(Ok(client)) => client.get_async_pubsub().await.ok(),
                _ => None,
            }
        };
        if let Ok(Some(mut pubsub)) = tokio::time::timeout(timeout, connect).await {
            let subscribed = match &topic {
                Topic::Channel(channel) => {
                    tokio::time::timeout(timeout, pubsub.subscribe(channel)).await
                }
                Topic::Pattern(pattern) | Topic::Channels(pattern) => {
                    tokio::time::timeout(timeout, pubsub.psubscribe(pattern)).await
                }
            };
            if let Ok(Ok(())) = subscribed {
                if let Some(tx) = ready.take() {
                    let _ = tx.send(());
                }
                // Messages sent before this subscription was up were missed: the first
                // one's too (its breakers may have read their state before it, while it
                // was slow or refused), so every listener re-reads. A node that took its
                // views as current from then on re-read them only 30 refresh intervals
                // apart, calling a tripped dependency all that time.
                if let Some(owner) = owner.upgrade() {
                    owner.resubscribed();
                }
                delay = None;
                if let Some(owner) = owner.upgrade() {
                    owner.live(true);
                }
                let mut stream = pubsub.into_on_message();
                loop {
                    tokio::select! {
                        message = stream.next() => match message {
                            Some(message) => {
                                let Some(owner) = owner.upgrade() else { return };
                                if let Ok(payload) = message.get_payload::<String>() {
                                    owner.message(message.get_channel_name(), &payload);
                                }
                            }
                            None => break,
                        },
                        _ = tokio::time::sleep(MIN_SUBSCRIBE_TIMEOUT) => {
                            if owner.strong_count() == 0 {
                                return;
                            }
                        }
                        // Behind Sentinels: subscribe again on the new primary.
                        _ = target.next_failover() => break,
                    }
                }
                if let Some(owner) = owner.upgrade() {
                    owner.live(false);
                }
            }
        }
        let next = next_delay(delay, backoff);
        delay = Some(next);
        tokio::time::sleep(next).await;
    }
}

#[cfg(feature = "cluster")]
mod cluster {
    //! Subscriptions on a Redis Cluster, through redis-rs's cluster client (RESP3, pushes
    //! on a channel): sharded channels where the cluster has them, each on its shard's
    //! primary; redis-rs moves them when a node is reconnected or the slots move, and
    //! this loop subscribes again what the server dropped (a slot that moved away, a
    //! primary demoted) or what a broken connection may have lost.

    use std::collections::HashSet;
    use std::sync::Weak;
    use std::time::Duration;

    use redis::cluster_async::ClusterConnection;
    use redis::{ErrorKind, PushInfo, PushKind, RedisResult, Value};
    use tokio::sync::mpsc::UnboundedReceiver;
    use tokio::sync::oneshot;

    use super::{next_delay, Change, Listening, Topic, MIN_SUBSCRIBE_TIMEOUT};

    /// At most this many channels are subscribed again per round (every 500 ms).
    const RESUBSCRIBE_PER_ROUND: usize = 256;

    /// The subscriptions of one loop: what is wanted, what the server confirmed, and what
    /// is to be subscribed again.
    struct Subscriptions {
        /// Sharded channels (`SSUBSCRIBE`); `false` after the server refused them (no
        /// sharded pub/sub): the owner's pattern (or its one channel) instead.
        sharded: bool,
        wanted: HashSet<String>,
        confirmed: HashSet<String>,
        /// To subscribe (again): new, dropped by the server, or possibly lost with a
        /// broken connection.
        pending: HashSet<String>,
    }

    fn text(value: Option<&Value>) -> Option<String> {
        value.and_then(|v| redis::from_redis_value::<String>(v.clone()).ok())
    }

    fn unknown_command(e: &redis::RedisError) -> bool {
        // "ERR unknown command 'SSUBSCRIBE'" from a server before Redis 7.
        e.to_string()
            .to_ascii_lowercase()
            .contains("unknown command")
    }

    impl Subscriptions {
        /// Subscribes to everything the owner wants, on a fresh connection.
        async fn start<L: Listening>(
            &mut self,
            conn: &mut ClusterConnection,
            owner: &L,
            topic: &Topic,
            timeout: Duration,
        ) -> RedisResult<()> {
            self.wanted = match topic {
                Topic::Channel(channel) => [channel.clone()].into(),
                Topic::Channels(_) => owner.channels().into_iter().collect(),
                Topic::Pattern(_) => HashSet::new(),
            };
            if let Topic::Pattern(pattern) = topic {
                self.sharded = false;
                return bounded(timeout, conn.psubscribe(pattern)).await;
            }
            // Probe for sharded pub/sub with the first channel (or a harmless one).
            let probe = self
                .wanted
                .iter()
                .next()
                .cloned()
                .unwrap_or_else(|| "breakerbox:probe:{ssubscribe}".to_string());
            match bounded(timeout, conn.ssubscribe(&probe)).await {
                Ok(()) => {
                    self.sharded = true;
                    if !self.wanted.contains(&probe) {
                        let _ = bounded(timeout, conn.sunsubscribe(&probe)).await;
                    }
                    self.pending = self.wanted.clone();
                    self.pending.remove(&probe);
                    self.flush(conn, timeout).await;
                    Ok(())
                }
                Err(e) if unknown_command(&e) => {
                    self.sharded = false;
                    match topic {
                        Topic::Channels(pattern) => {
                            bounded(timeout, conn.psubscribe(pattern)).await
                        }
                        Topic::Channel(channel) => bounded(timeout, conn.subscribe(channel)).await,
                        Topic::Pattern(_) => Ok(()),
                    }
                }
                Err(e) => Err(e),
            }
        }

        /// Subscribes what is pending (a bounded number per call, concurrently).
        async fn flush(&mut self, conn: &ClusterConnection, timeout: Duration) {
            if !self.sharded || self.pending.is_empty() {
                return;
            }
            let round: Vec<String> = self
                .pending
                .iter()
                .take(RESUBSCRIBE_PER_ROUND)
                .cloned()
                .collect();
            let calls = round.iter().map(|channel| {
                let mut conn = conn.clone();
                async move { bounded(timeout, conn.ssubscribe(channel)).await.is_ok() }
            });
            let done = futures_util::future::join_all(calls).await;
            for (channel, ok) in round.iter().zip(done) {
                if ok {
                    self.pending.remove(channel);
                }
            }
        }

        /// A channel added or dropped by the owner.
        async fn change(
            &mut self,
            change: Change,
            conn: &mut ClusterConnection,
            timeout: Duration,
        ) {
            match change {
                Change::Subscribe(channel) => {
                    if self.wanted.insert(channel.clone()) {
                        self.pending.insert(channel);
                        self.flush(conn, timeout).await;
                    }
                }
                Change::Unsubscribe(channel) => {
                    self.wanted.remove(&channel);
                    self.pending.remove(&channel);
                    self.confirmed.remove(&channel);
                    if self.sharded {
                        let _ = bounded(timeout, conn.sunsubscribe(&channel)).await;
                    }
                }
            }
        }

        /// A push from the server (or redis-rs's own `Disconnection`).
        fn push<L: Listening>(&mut self, push: PushInfo, owner: &L) {
            match push.kind {
                PushKind::Message | PushKind::SMessage => {
                    if let (Some(channel), Some(payload)) =
                        (text(push.data.first()), text(push.data.get(1)))
                    {
                        owner.message(&channel, &payload);
                    }
                }
                PushKind::PMessage => {
                    if let (Some(channel), Some(payload)) =
                        (text(push.data.get(1)), text(push.data.get(2)))
                    {
                        owner.message(&channel, &payload);
                    }
                }
                PushKind::SSubscribe | PushKind::Subscribe | PushKind::PSubscribe => {
                    if let Some(channel) = text(push.data.first()) {
                        if !self.confirmed.insert(channel.clone()) {
                            // Subscribed again (redis-rs moved it, or this loop did):
                            // messages of the gap may be lost.
                            if push.kind == PushKind::PSubscribe {
                                owner.resubscribed();
                            } else {
                                owner.resubscribed_to(&channel);
                            }
                        }
                    }
                }
                PushKind::SUnsubscribe => {
                    // The server dropped a channel still wanted: its slot moved away, or
                    // the node is a replica now. Subscribe again where the slot lives.
                    if let Some(channel) = text(push.data.first()) {
                        if self.wanted.contains(&channel) {
                            self.pending.insert(channel);
                        }
                    }
                }
                // A node's connection broke: the channels it held are subscribed again,
                // which also sends redis-rs to the slot's new owner.
                PushKind::Disconnection if self.sharded => {
                    self.pending.extend(self.wanted.iter().cloned());
                }
                _ => {}
            }
        }
    }

    async fn bounded(
        timeout: Duration,
        call: impl std::future::Future<Output = RedisResult<()>>,
    ) -> RedisResult<()> {
        match tokio::time::timeout(timeout, call).await {
            Ok(result) => result,
            Err(_) => Err(redis::RedisError::from((
                ErrorKind::Io,
                "subscription timed out",
            ))),
        }
    }

    async fn next_change(changes: &mut Option<UnboundedReceiver<Change>>) -> Option<Change> {
        match changes {
            Some(rx) => rx.recv().await,
            None => std::future::pending().await,
        }
    }

    pub(super) async fn listen<L: Listening>(
        owner: Weak<L>,
        topic: Topic,
        mut ready: Option<oneshot::Sender<()>>,
        mut changes: Option<UnboundedReceiver<Change>>,
    ) {
        let mut delay: Option<Duration> = None;
        loop {
            let Some((target, backoff, timeout)) = owner
                .upgrade()
                .map(|o| (o.target(), o.backoff(), o.subscribe_timeout()))
            else {
                return;
            };
            let Some(seeds) = target.cluster_seeds() else {
                return;
            };
            let (tx, mut pushes) = tokio::sync::mpsc::unbounded_channel::<PushInfo>();
            let client = match seeds
                .builder()
                .use_protocol(redis::ProtocolVersion::RESP3)
                .push_sender(tx)
                .build()
            {
                Ok(client) => client,
                Err(error) => {
                    tracing::warn!(
                        target: "breakerbox_redis",
                        error = %error,
                        "cannot subscribe on the cluster; relying on refreshes"
                    );
                    return;
                }
            };
            let connected = tokio::time::timeout(timeout, client.get_async_connection()).await;
            if let Ok(Ok(mut conn)) = connected {
                let mut subs = Subscriptions {
                    sharded: true,
                    wanted: HashSet::new(),
                    confirmed: HashSet::new(),
                    pending: HashSet::new(),
                };
                let started = match owner.upgrade() {
                    Some(o) => subs.start(&mut conn, &*o, &topic, timeout).await,
                    None => return,
                };
                if started.is_ok() {
                    if let Some(tx) = ready.take() {
                        let _ = tx.send(());
                    }
                    delay = None;
                    loop {
                        tokio::select! {
                            push = pushes.recv() => match push {
                                Some(push) => {
                                    let Some(o) = owner.upgrade() else { return };
                                    subs.push(push, &*o);
                                }
                                None => break,
                            },
                            change = next_change(&mut changes) => match change {
                                Some(change) => subs.change(change, &mut conn, timeout).await,
                                None => changes = None,
                            },
                            _ = tokio::time::sleep(MIN_SUBSCRIBE_TIMEOUT) => {
                                if owner.strong_count() == 0 {
                                    return;
                                }
                                subs.flush(&conn, timeout).await;
                            }
                        }
                    }
                }
            }
            let next = next_delay(delay, backoff);
            delay = Some(next);
            tokio::time::sleep(next).await;
        }
    }
}
