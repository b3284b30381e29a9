//! `lua/record_many.lua`: `record.lua` (or `read.lua`) for many breakers of one link in
//! one script call, so a node's periodic flushes and reads of thousands of breakers cost
//! a few calls, not thousands.

use redis::{ErrorKind, RedisError, ServerErrorKind, Value};

use super::{Link, StoreError};
use crate::digests::Digests;
use crate::target::Topology;
use crate::wire::{parse_reply, ParseError, Reply};

/// `script` (the prelude and an operation's file) as `one(KEYS, ARGV)`, then the driver
/// that calls it per key.
macro_rules! many {
    ($file:literal) => {
        concat!(
            "local function one(KEYS, ARGV)\n",
            include_str!("../../lua/common.lua"),
            "\n",
            include_str!("../../lua/window.lua"),
            "\n",
            include_str!("../../lua/transitions.lua"),
            "\n",
            include_str!(concat!("../../lua/", $file)),
            "\nend\n",
            include_str!("../../lua/record_many.lua")
        )
    };
}

/// What a many-breaker call runs per key.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum ManyKind {
    /// `record.lua`: a node's periodic flushes.
    Record,
    /// `read.lua` with `repair`: a node's reads (first reads, refreshes, health checks).
    Read,
}

impl ManyKind {
    /// The source sent to Redis; with the feature `lua-mutants` and `BREAKERBOX_LUA_DIR`
    /// set, the same files read from that directory (as [`crate::ScriptKind::source`]
    /// reads the other scripts).
    fn source(self) -> &'static str {
        #[cfg(feature = "lua-mutants")]
        if let Some(source) = crate::scripts::from_dir::many(self.operation()) {
            return source;
        }
        match self {
            ManyKind::Record => many!("record.lua"),
            ManyKind::Read => many!("read.lua"),
        }
    }

    /// The script each key's call runs.
    #[cfg(feature = "lua-mutants")]
    fn operation(self) -> crate::ScriptKind {
        match self {
            ManyKind::Record => crate::ScriptKind::Record,
            ManyKind::Read => crate::ScriptKind::Read,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The digests Redis gave the scripts.
#[derive(Debug, Default)]
pub(crate) struct Many {
    digests: Digests<2>,
}

impl Many {
    pub(crate) fn forget(&self) {
        self.digests.forget();
    }
}

/// One breaker's part of a [`Link::record_many`] call: its key and `record.lua`'s
/// arguments for it.
pub(crate) struct Part {
    pub(crate) key: String,
    pub(crate) args: Vec<String>,
}

impl Link {
    /// Whether [`Link::record_many`] may serve this link: one server (a cluster's keys
    /// live on many).
    pub(crate) fn batches_many(&self) -> bool {
        self.target.topology() != Topology::Cluster
    }

    /// `record_many.lua` for `parts`: per part, what its own `record.lua` call would have
    /// answered (a corrupt value repaired is answered `Repaired`, the entries not
    /// applied, as by `record.lua`). The whole call is bounded by `timeout`.
    pub(crate) async fn record_many(
        &self,
        parts: &[Part],
        timeout: std::time::Duration,
    ) -> Result<Vec<Result<Reply, StoreError>>, StoreError> {
        self.many(ManyKind::Record, parts, timeout).await
    }

    /// `read.lua` (with `repair`) for `parts` in one call: per part, what its own read
    /// would have answered (a corrupt value repaired is answered `Repaired`: read again).
    pub(crate) async fn read_many(
        &self,
        parts: &[Part],
        timeout: std::time::Duration,
    ) -> Result<Vec<Result<Reply, StoreError>>, StoreError> {
        self.many(ManyKind::Read, parts, timeout).await
    }

    async fn many(
        &self,
        kind: ManyKind,
        parts: &[Part],
        timeout: std::time::Duration,
    ) -> Result<Vec<Result<Reply, StoreError>>, StoreError> {
        let mut keys = Vec::with_capacity(parts.len());
        let mut args = Vec::with_capacity(parts.iter().map(|p| p.args.len() + 1).sum());
        for part in parts {
            keys.push(part.key.as_str());
            args.push(part.args.len().to_string());
            args.extend(part.args.iter().cloned());
        }
        let call = async {
            let conn = self.connection().await.map_err(|e| self.failed(e))?;
            let seen = self.many.digests.loads(kind.index());
            let sha = match self.many.digests.sha(kind.index()) {
                Some(sha) => sha,
                None => self.load(&conn, kind, seen).await?,
            };
            let run = |sha: String, mut conn: crate::target::RedisConnection| {
                let (keys, args) = (&keys, &args);
                async move {
                    redis::cmd("EVALSHA")
                        .arg(sha)
                        .arg(keys.len())
                        .arg(keys)
                        .arg(args)
                        .query_async::<Value>(&mut conn)
                        .await
                }
            };
            match run(sha, conn.clone()).await {
                Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                    let sha = self.load(&conn, kind, seen).await?;
                    run(sha, conn).await.map_err(|e| self.failed(e))
                }
                other => other.map_err(|e| self.failed(e)),
            }
        };
        let value = match tokio::time::timeout(timeout, call).await {
            Ok(value) => value?,
            Err(_) => {
                if self.target.drop_on_timeout() {
                    self.forget();
                }
                return Err(StoreError::Timeout(timeout));
            }
        };
        let Value::Array(replies) = value else {
            return Err(StoreError::Protocol(format!(
                "record_many replied {value:?}, expected an array"
            )));
        };
        if replies.len() != parts.len() {
            return Err(StoreError::Protocol(format!(
                "record_many replied {} replies for {} keys",
                replies.len(),
                parts.len()
            )));
        }
        Ok(replies
            .iter()
            .map(|v| {
                parse_reply(v).map_err(|e| match e {
                    ParseError::Corrupt(why) => StoreError::Corrupt(why),
                    ParseError::Protocol(why) => StoreError::Protocol(why),
                })
            })
            .collect())
    }

    /// Loads `kind`'s script, one load at a time (see [`Digests::load`]).
    async fn load(
        &self,
        conn: &crate::target::RedisConnection,
        kind: ManyKind,
        seen: u64,
    ) -> Result<String, StoreError> {
        self.many
            .digests
            .load(conn, kind.index(), kind.source(), "", seen)
            .await
            .map_err(|e| self.failed(e))
    }

    /// As a store's: a dropped or demoted connection is made again on the next call.
    fn failed(&self, e: RedisError) -> StoreError {
        if e.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly)
            || e.is_io_error()
            || e.is_connection_dropped()
            || e.is_unrecoverable_error()
        {
            self.forget();
        }
        StoreError::Redis(e)
    }
}

impl StoreError {
    /// The same error again, for each breaker of a call that failed as a whole.
    pub(crate) fn again(&self) -> StoreError {
        match self {
            StoreError::Timeout(after) => StoreError::Timeout(*after),
            StoreError::Redis(e) => StoreError::Redis(e.clone()),
            StoreError::Protocol(why) => StoreError::Protocol(why.clone()),
            StoreError::Corrupt(why) => StoreError::Corrupt(why.clone()),
            StoreError::Unavailable => StoreError::Unavailable,
            StoreError::Invalid(why) => StoreError::Invalid(why.clone()),
        }
    }
}
