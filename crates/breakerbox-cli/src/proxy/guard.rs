//! One upstream's breaker: in memory, or shared through Redis.

use std::sync::Arc;
use std::time::Duration;

use breakerbox::{CircuitBreaker, CircuitOpen, OwnedPermit, Phase, Snapshot, Verdict};
use breakerbox_redis::{RedisBreaker, RedisPermit};

use super::metrics::Recorder;

/// The breaker of one upstream.
#[derive(Clone)]
pub enum Guard {
    /// State in this process.
    Local(CircuitBreaker),
    /// State shared through Redis.
    Shared(RedisBreaker),
}

/// The right to forward one request.
pub enum Ticket {
    /// From an in-memory breaker.
    Local(OwnedPermit),
    /// From a Redis breaker.
    Shared(RedisPermit),
}

/// How long an admin read or action may wait on Redis.
const REDIS_ADMIN_TIMEOUT: Duration = Duration::from_secs(2);

impl Guard {
    /// An in-memory breaker reporting to `recorder`.
    pub fn local(
        name: &str,
        config: breakerbox::Config,
        recorder: Arc<Recorder>,
    ) -> anyhow::Result<Guard> {
        let breaker = CircuitBreaker::builder()
            .name(name)
            .config(config)
            .shared_listener(recorder)
            .build()?;
        Ok(Guard::Local(breaker))
    }

    /// A Redis breaker reporting to `recorder`.
    pub async fn shared(
        url: &str,
        prefix: Option<&str>,
        name: &str,
        config: breakerbox::Config,
        recorder: Arc<Recorder>,
    ) -> anyhow::Result<Guard> {
        let mut builder = RedisBreaker::builder(url, name)
            .config(config)
            .shared_listener(recorder);
        if let Some(prefix) = prefix {
            builder = builder.prefix(prefix);
        }
        Ok(Guard::Shared(builder.build().await?))
    }

    /// Asks to forward one request.
    #[inline]
    pub async fn acquire(&self) -> Result<Ticket, CircuitOpen> {
        match self {
            Guard::Local(b) => b.try_acquire_owned().map(Ticket::Local),
            Guard::Shared(b) => b.acquire().await.map(Ticket::Shared),
        }
    }

    /// The phase as this process sees it (no I/O).
    pub fn phase(&self) -> Phase {
        match self {
            Guard::Local(b) => b.phase(),
            Guard::Shared(b) => b.phase(),
        }
    }

    /// Whether the state is shared through Redis.
    pub fn is_shared(&self) -> bool {
        matches!(self, Guard::Shared(_))
    }

    /// The breaker's state (read from Redis for a shared breaker).
    pub async fn snapshot(&self) -> Result<Snapshot, String> {
        match self {
            Guard::Local(b) => Ok(b.snapshot()),
            Guard::Shared(b) => match tokio::time::timeout(REDIS_ADMIN_TIMEOUT, b.snapshot()).await
            {
                Ok(Ok(s)) => Ok(s),
                Ok(Err(e)) => Err(format!("redis: {e}")),
                Err(_) => Err("redis: timed out".to_string()),
            },
        }
    }

    /// Opens the breaker until reset.
    pub async fn trip(&self) -> Result<(), String> {
        match self {
            Guard::Local(b) => {
                b.force_open();
                Ok(())
            }
            Guard::Shared(b) => redis_action(b.force_open()).await,
        }
    }

    /// Back to a fresh closed phase.
    pub async fn reset(&self) -> Result<(), String> {
        match self {
            Guard::Local(b) => {
                b.reset();
                Ok(())
            }
            Guard::Shared(b) => redis_action(b.reset()).await,
        }
    }
}

async fn redis_action(
    action: impl std::future::Future<Output = Result<(), breakerbox_redis::StoreError>>,
) -> Result<(), String> {
    match tokio::time::timeout(REDIS_ADMIN_TIMEOUT, action).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!(
            "redis: {:#} (kept locally, pushed when redis is back)",
            anyhow::Error::new(e)
        )),
        Err(_) => Err("redis: timed out".to_string()),
    }
}

impl Ticket {
    /// Whether this request is a half-open probe.
    #[inline]
    pub fn is_probe(&self) -> bool {
        match self {
            Ticket::Local(p) => p.is_probe(),
            Ticket::Shared(p) => p.is_probe(),
        }
    }

    /// Records `verdict` with the upstream's retry hint (a judged `Retry-After`): a
    /// breaker opened by this outcome stays open at least that long.
    pub async fn record_hinted(
        self,
        verdict: Verdict,
        latency: Duration,
        retry_hint: Option<Duration>,
    ) {
        match self {
            Ticket::Local(p) => p.record_with_retry_hint(verdict, latency, retry_hint),
            Ticket::Shared(p) => p.record_with_retry_hint(verdict, latency, retry_hint).await,
        }
    }

    /// Like [`Ticket::record_hinted`], from where nothing can be awaited (the end of a
    /// response body): an in-memory breaker records at once, a Redis one in a task.
    pub fn record_detached(
        self,
        verdict: Verdict,
        latency: Duration,
        retry_hint: Option<Duration>,
    ) {
        match self {
            Ticket::Local(p) => p.record_with_retry_hint(verdict, latency, retry_hint),
            Ticket::Shared(p) => {
                tokio::spawn(p.record_with_retry_hint(verdict, latency, retry_hint));
            }
        }
    }
}
