//! Behind Sentinels: the client that names the primary, and the task that hears them
//! announce failovers.

use std::sync::Arc;

use redis::{Client, RedisResult};

/// A Sentinel client, asked for the primary whenever a connection is made, and what a
/// Sentinel announced of failovers.
pub(super) struct SentinelLink {
    client: tokio::sync::Mutex<redis::sentinel::SentinelClient>,
    /// The target as shown (addresses and service, no credentials).
    pub(super) shown: String,
    /// Failovers announced (`+switch-master`, any service of these Sentinels).
    switches: std::sync::atomic::AtomicU64,
    /// Woken at each announced failover.
    pub(super) announced: tokio::sync::Notify,
    /// Whether the task listening for them runs.
    watching: std::sync::atomic::AtomicBool,
}

impl SentinelLink {
    pub(super) fn new(client: redis::sentinel::SentinelClient, shown: String) -> SentinelLink {
        SentinelLink {
            client: tokio::sync::Mutex::new(client),
            shown,
            switches: std::sync::atomic::AtomicU64::new(0),
            announced: tokio::sync::Notify::new(),
            watching: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// A client for the current primary (redis-rs checks its role before answering).
    pub(super) async fn primary(&self) -> RedisResult<Client> {
        self.client.lock().await.async_get_client().await
    }

    /// The failovers announced so far; starts listening (on the current tokio runtime)
    /// the first time.
    pub(super) fn failovers(self: &Arc<Self>) -> u64 {
        use std::sync::atomic::Ordering;
        if !self.watching.swap(true, Ordering::AcqRel) {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    runtime.spawn(watch_failovers(Arc::downgrade(self)));
                }
                Err(_) => self.watching.store(false, Ordering::Release),
            }
        }
        self.switches.load(Ordering::Acquire)
    }

    /// Subscribed to `+switch-master` on the first Sentinel that answers.
    async fn switch_announcements(&self) -> RedisResult<redis::aio::PubSub> {
        let sentinel = self.client.lock().await.async_get_sentinel_client().await?;
        let mut pubsub = sentinel.get_async_pubsub().await?;
        pubsub.subscribe("+switch-master").await?;
        Ok(pubsub)
    }
}

/// While `link` lives: listens to a Sentinel's `+switch-master` announcements and counts
/// them (connections made before one are dropped by their users). Reconnects with
/// backoff.
async fn watch_failovers(link: std::sync::Weak<SentinelLink>) {
    use futures_util::StreamExt;
    use std::sync::atomic::Ordering;
    use std::time::Duration;
    let mut delay = Duration::from_millis(50);
    loop {
        let Some(sentinels) = link.upgrade() else {
            return;
        };
        let subscribed =
            tokio::time::timeout(Duration::from_secs(1), sentinels.switch_announcements()).await;
        drop(sentinels);
        if let Ok(Ok(pubsub)) = subscribed {
            delay = Duration::from_millis(50);
            let mut stream = pubsub.into_on_message();
            loop {
                tokio::select! {
                    message = stream.next() => match (message, link.upgrade()) {
                        (Some(_), Some(sentinels)) => {
                            tracing::info!(
                                target: "breakerbox_redis",
                                redis = sentinels.shown.as_str(),
                                "the sentinels switched the primary; reconnecting"
                            );
                            sentinels.switches.fetch_add(1, Ordering::AcqRel);
                            sentinels.announced.notify_waiters();
                        }
                        (Some(_), None) => return,
                        (None, _) => break,
                    },
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {
                        if link.strong_count() == 0 {
                            return;
                        }
                    }
                }
            }
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(2));
    }
}
