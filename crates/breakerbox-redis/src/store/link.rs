//! The link to one Redis: a multiplexed connection, made once whoever asks (and made
//! again after a failover or a lost connection), and the digests of the scripts loaded on
//! it. Every store of a node shares its link.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use redis::RedisError;

use super::many::Many;
use crate::scripts::Scripts;
use crate::shared_task::{spawn_shared, SharedTask};
use crate::target::{RedisConnection, RedisTarget};

/// One multiplexed connection to Redis and the digests of the loaded scripts, shared by
/// every store made over it (every breaker of a [`RedisNode`](crate::RedisNode)).
pub(crate) struct Link {
    pub(super) target: RedisTarget,
    conn: Mutex<Option<RedisConnection>>,
    /// The connection being made, on a task of its own: callers that find none wait for
    /// it instead of each opening their own, and one whose operation timed out does not
    /// cancel it (making a connection may take longer than one operation's timeout: a
    /// TLS handshake, asking the Sentinels), so a later call finds it made.
    connecting: Mutex<Option<Connecting>>,
    pub(super) scripts: Scripts,
    /// `record.lua` for many breakers in one call (node-level flushes).
    pub(super) many: Many,
    /// Behind Sentinels: the failovers announced when the connection was made (one
    /// announced since makes it go).
    failovers: AtomicU64,
}

/// A connection attempt that any number of callers can await.
type Connecting = SharedTask<RedisConnection>;

impl fmt::Debug for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Link")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl Link {
    pub(crate) fn new(target: RedisTarget) -> Self {
        Link {
            target,
            conn: Mutex::new(None),
            connecting: Mutex::new(None),
            scripts: Scripts::default(),
            many: Many::default(),
            failovers: AtomicU64::new(0),
        }
    }

    /// Forgets the connection (and the attempt under way) and the scripts' digests.
    pub(super) fn forget(&self) {
        if let Ok(mut conn) = self.conn.lock() {
            *conn = None;
        }
        if let Ok(mut connecting) = self.connecting.lock() {
            *connecting = None;
        }
        self.scripts.forget();
        self.many.forget();
    }

    /// The attempt under way, or a new one (an attempt that already failed is not
    /// reused).
    fn attempt(&self) -> Connecting {
        let mut slot = self
            .connecting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(attempt) = slot.as_ref() {
            if !matches!(attempt.peek(), Some(Err(_))) {
                return attempt.clone();
            }
        }
        let target = self.target.clone();
        let attempt = spawn_shared(
            async move { target.connect().await },
            "the connection task ended without a connection",
        );
        *slot = Some(attempt.clone());
        attempt
    }

    pub(crate) fn target(&self) -> &RedisTarget {
        &self.target
    }

    /// The connection, made (once, whoever asks) if there is none.
    pub(crate) async fn connection(&self) -> Result<RedisConnection, RedisError> {
        // Behind Sentinels, a failover announced since the connection was made: it may
        // reach a primary that is one no more.
        let failovers = self.target.failovers();
        if self.failovers.swap(failovers, Ordering::AcqRel) != failovers {
            self.forget();
        }
        if let Some(conn) = self.conn.lock().ok().and_then(|c| c.clone()) {
            return Ok(conn);
        }
        let attempt = self.attempt();
        let result = attempt.clone().await;
        if let Ok(mut connecting) = self.connecting.lock() {
            if connecting.as_ref().is_some_and(|a| a.ptr_eq(&attempt)) {
                *connecting = None;
                if let (Ok(conn), Ok(mut slot)) = (&result, self.conn.lock()) {
                    *slot = Some(conn.clone());
                }
            }
        }
        result
    }
}
