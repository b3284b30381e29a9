//! One subscription loop for every listener: a breaker's own channel, or a node's pattern
//! serving all its breakers. Reconnects with backoff; ends when its owner is gone.

use std::sync::Weak;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::oneshot;

use crate::options::Backoff;

/// What a subscription listens to.
pub(crate) enum Topic {
    /// One channel (`SUBSCRIBE`).
    Channel(String),
    /// Every channel matching a pattern (`PSUBSCRIBE`).
    Pattern(String),
}

/// The owner of a subscription: where it connects and what it does with messages.
pub(crate) trait Listening: Send + Sync + 'static {
    /// The client to subscribe with.
    fn client(&self) -> redis::Client;
    /// The reconnection backoff.
    fn backoff(&self) -> Backoff;
    /// A message on `channel`.
    fn message(&self, channel: &str, payload: &str);
    /// Subscribed again after a break: messages may have been missed.
    fn resubscribed(&self);
    /// How long connecting and subscribing may take.
    fn subscribe_timeout(&self) -> Duration {
        MIN_SUBSCRIBE_TIMEOUT
    }
}

/// Connecting and subscribing may always take this long.
pub(crate) const MIN_SUBSCRIBE_TIMEOUT: Duration = Duration::from_millis(500);

/// Listens to `topic` for `owner` while it lives, reconnecting with backoff. Signals
/// `ready` once subscribed the first time.
pub(crate) async fn listen<L: Listening>(
    owner: Weak<L>,
    topic: Topic,
    mut ready: Option<oneshot::Sender<()>>,
) {
    let mut delay: Option<Duration> = None;
    let mut first = true;
    loop {
        let Some((client, backoff, timeout)) = owner
            .upgrade()
            .map(|o| (o.client(), o.backoff(), o.subscribe_timeout()))
        else {
            return;
        };
        if let Ok(Ok(mut pubsub)) = tokio::time::timeout(timeout, client.get_async_pubsub()).await {
            let subscribed = match &topic {
                Topic::Channel(channel) => {
                    tokio::time::timeout(timeout, pubsub.subscribe(channel)).await
                }
                Topic::Pattern(pattern) => {
                    tokio::time::timeout(timeout, pubsub.psubscribe(pattern)).await
                }
            };
            if let Ok(Ok(())) = subscribed {
                if let Some(tx) = ready.take() {
                    let _ = tx.send(());
                }
                if !first {
                    if let Some(owner) = owner.upgrade() {
                        owner.resubscribed();
                    }
                }
                first = false;
                delay = None;
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
                    }
                }
            }
        }
        let next = match delay {
            None => backoff.min,
            Some(d) => (d * 2).min(backoff.max),
        };
        delay = Some(next);
        tokio::time::sleep(next).await;
    }
}
