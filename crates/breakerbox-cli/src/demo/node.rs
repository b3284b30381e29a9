//! One node's breaker in the demo: none, an in-memory breaker, or a Redis-shared one.

use std::sync::Arc;
use std::time::Duration;

use breakerbox::{CircuitBreaker, OwnedPermit, Phase, Verdict};
use breakerbox_redis::{RedisBreaker, RedisPermit};

/// The breaker a node calls through.
#[derive(Clone)]
pub enum NodeBreaker {
    /// No breaker: every call goes out.
    None,
    /// An in-memory breaker of this node's own.
    Local(CircuitBreaker),
    /// This node's handle on a breaker shared through Redis.
    Redis(Arc<RedisBreaker>),
}

/// A permit from a [`NodeBreaker`].
pub enum NodePermit {
    /// No breaker.
    None,
    /// From an in-memory breaker.
    Local(OwnedPermit),
    /// From a Redis breaker.
    Redis(RedisPermit),
}

impl NodeBreaker {
    /// Asks for a permit; `None` when the breaker rejects the call.
    pub async fn acquire(&self) -> Option<NodePermit> {
        match self {
            NodeBreaker::None => Some(NodePermit::None),
            NodeBreaker::Local(b) => b.try_acquire_owned().ok().map(NodePermit::Local),
            NodeBreaker::Redis(b) => b.acquire().await.ok().map(NodePermit::Redis),
        }
    }

    /// The phase this node sees (`None` without a breaker).
    pub fn phase(&self) -> Option<Phase> {
        match self {
            NodeBreaker::None => None,
            NodeBreaker::Local(b) => Some(b.phase()),
            NodeBreaker::Redis(b) => Some(b.phase()),
        }
    }

    /// Sends what a Redis breaker still holds (batched outcomes).
    pub async fn flush(&self) {
        if let NodeBreaker::Redis(b) = self {
            b.flush().await;
        }
    }
}

impl NodePermit {
    /// Whether the call is a half-open probe.
    pub fn is_probe(&self) -> bool {
        match self {
            NodePermit::None => false,
            NodePermit::Local(p) => p.is_probe(),
            NodePermit::Redis(p) => p.is_probe(),
        }
    }

    /// Records the call's verdict and latency.
    pub async fn record(self, verdict: Verdict, latency: Duration) {
        match self {
            NodePermit::None => {}
            NodePermit::Local(p) => p.record_with_latency(verdict, latency),
            NodePermit::Redis(p) => p.record_with_latency(verdict, latency).await,
        }
    }
}
