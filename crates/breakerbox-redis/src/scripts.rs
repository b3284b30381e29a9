//! The Lua scripts, one file per operation, each prefixed with the shared prelude
//! (`lua/common.lua`), loaded with `SCRIPT LOAD` and run with `EVALSHA` (reloaded on
//! `NOSCRIPT`, e.g. after a Redis restart or `SCRIPT FLUSH`).

use std::sync::Mutex;

use redis::aio::MultiplexedConnection;
use redis::{ErrorKind, RedisError, ServerErrorKind, Value};

macro_rules! script {
    ($file:literal) => {
        concat!(
            include_str!("../lua/common.lua"),
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

    async fn load(
        &self,
        conn: &mut MultiplexedConnection,
        kind: ScriptKind,
    ) -> Result<String, RedisError> {
        let sha: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(kind.source())
            .query_async(conn)
            .await?;
        self.set_sha(kind, Some(sha.clone()));
        Ok(sha)
    }

    /// `EVALSHA` the script with one key and `args`; on `NOSCRIPT`, load it and retry once.
    pub(crate) async fn run(
        &self,
        conn: &mut MultiplexedConnection,
        kind: ScriptKind,
        key: &str,
        args: &[String],
    ) -> Result<Value, RedisError> {
        let sha = match self.sha(kind) {
            Some(sha) => sha,
            None => self.load(conn, kind).await?,
        };
        match evalsha(conn, &sha, key, args).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                let sha = self.load(conn, kind).await?;
                evalsha(conn, &sha, key, args).await
            }
            other => other,
        }
    }
}

async fn evalsha(
    conn: &mut MultiplexedConnection,
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
