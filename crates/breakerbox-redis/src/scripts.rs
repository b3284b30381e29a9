//! The Lua scripts, one file per operation, each prefixed with the shared prelude
//! (`lua/common.lua`), loaded with `SCRIPT LOAD` and run with `EVALSHA` (reloaded on
//! `NOSCRIPT`, e.g. after a Redis restart, a `SCRIPT FLUSH` or a failover to a replica;
//! on a cluster, loaded on the primary of the key's slot, and sent whole with `EVAL` when
//! the key is on a node importing the slot).

use std::sync::Mutex;

use redis::{ErrorKind, RedisError, ServerErrorKind, Value};

use crate::target::RedisConnection;

macro_rules! script {
    ($file:literal) => {
        concat!(
            include_str!("../lua/common.lua"),
            "\n",
            include_str!("../lua/window.lua"),
            "\n",
            include_str!("../lua/transitions.lua"),
            "\n",
            include_str!(concat!("../lua/", $file))
        )
    };
}

/// The operations, each one Lua script.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ScriptKind {
    /// `lua/acquire.lua`
    Acquire,
    /// `lua/record.lua` (a batch of outcomes)
    Record,
    /// `lua/release.lua`
    Release,
    /// `lua/manual.lua` (force open, disable, reset, trip, repair)
    Manual,
    /// `lua/read.lua`
    Read,
}

impl ScriptKind {
    pub(crate) const ALL: [ScriptKind; 5] = [
        ScriptKind::Acquire,
        ScriptKind::Record,
        ScriptKind::Release,
        ScriptKind::Manual,
        ScriptKind::Read,
    ];

    /// The full source sent to Redis (prelude plus the operation's file).
    pub fn source(self) -> &'static str {
        match self {
            ScriptKind::Acquire => script!("acquire.lua"),
            ScriptKind::Record => script!("record.lua"),
            ScriptKind::Release => script!("release.lua"),
            ScriptKind::Manual => script!("manual.lua"),
            ScriptKind::Read => script!("read.lua"),
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The script's name, as metrics label it (`acquire`, `record`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ScriptKind::Acquire => "acquire",
            ScriptKind::Record => "record",
            ScriptKind::Release => "release",
            ScriptKind::Manual => "manual",
            ScriptKind::Read => "read",
        }
    }
}

/// The SHA1 digests Redis gave each script, loaded lazily and again after `NOSCRIPT`.
#[derive(Debug, Default)]
pub(crate) struct Scripts {
    shas: Mutex<[Option<String>; 5]>,
}

impl Scripts {
    fn sha(&self, kind: ScriptKind) -> Option<String> {
        self.shas
            .lock()
            .ok()
            .and_then(|shas| shas[kind.index()].clone())
    }

    fn set_sha(&self, kind: ScriptKind, sha: Option<String>) {
        if let Ok(mut shas) = self.shas.lock() {
            shas[kind.index()] = sha;
        }
    }

    /// Forgets every digest (they are reloaded on next use).
    pub(crate) fn forget(&self) {
        for kind in ScriptKind::ALL {
            self.set_sha(kind, None);
        }
    }

    /// Loads the script on the server that holds `key` (on a cluster, the primary of its
    /// slot: scripts run where their key lives, and a promoted replica has none loaded).
    async fn load(
        &self,
        conn: &mut RedisConnection,
        kind: ScriptKind,
        key: &str,
    ) -> Result<String, RedisError> {
        let sha = conn.load_script(kind.source(), key).await?;
        self.set_sha(kind, Some(sha.clone()));
        Ok(sha)
    }

    /// `EVALSHA` the script with one key and `args`; on `NOSCRIPT`, load it and retry once.
    pub(crate) async fn run(
        &self,
        conn: &mut RedisConnection,
        kind: ScriptKind,
        key: &str,
        args: &[String],
    ) -> Result<Value, RedisError> {
        let sha = match self.sha(kind) {
            Some(sha) => sha,
            None => self.load(conn, kind, key).await?,
        };
        match evalsha(conn, &sha, key, args).await {
            Err(e) if no_script(&e) => {
                let sha = self.load(conn, kind, key).await?;
                match evalsha(conn, &sha, key, args).await {
                    // Loaded where the slot's owner is, yet the key is elsewhere: its
                    // slot is being moved (ASK sends the call to the importing node).
                    // The source itself goes there, and is cached there for next time.
                    Err(e) if no_script(&e) => eval(conn, kind.source(), key, args).await,
                    other => other,
                }
            }
            other => other,
        }
    }
}

fn no_script(e: &RedisError) -> bool {
    e.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}

async fn eval(
    conn: &mut RedisConnection,
    source: &str,
    key: &str,
    args: &[String],
) -> Result<Value, RedisError> {
    redis::cmd("EVAL")
        .arg(source)
        .arg(1)
        .arg(key)
        .arg(args)
        .query_async(conn)
        .await
}

async fn evalsha(
    conn: &mut RedisConnection,
    sha: &str,
    key: &str,
    args: &[String],
) -> Result<Value, RedisError> {
    redis::cmd("EVALSHA")
        .arg(sha)
        .arg(1)
        .arg(key)
        .arg(args)
        .query_async(conn)
        .await
}
