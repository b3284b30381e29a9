//! The Lua scripts, one file per operation, each prefixed with the shared prelude
//! (`lua/common.lua`), loaded with `SCRIPT LOAD` and run with `EVALSHA` (reloaded on
//! `NOSCRIPT`, e.g. after a Redis restart, a `SCRIPT FLUSH` or a failover to a replica;
//! on a cluster, loaded on the primary of the key's slot, and sent whole with `EVAL` when
//! the key is on a node importing the slot).

use redis::{ErrorKind, RedisError, ServerErrorKind, Value};

use crate::digests::Digests;
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
    ///
    /// With the feature `lua-mutants`, and `BREAKERBOX_LUA_DIR` set, the source is read
    /// from that directory instead (once per process; see [`ScriptKind::file`]).
    pub fn source(self) -> &'static str {
        #[cfg(feature = "lua-mutants")]
        if let Some(source) = from_dir::source(self) {
            return source;
        }
        match self {
            ScriptKind::Acquire => script!("acquire.lua"),
            ScriptKind::Record => script!("record.lua"),
            ScriptKind::Release => script!("release.lua"),
            ScriptKind::Manual => script!("manual.lua"),
            ScriptKind::Read => script!("read.lua"),
        }
    }

    /// The operation's own file under `lua/` (after the prelude's `common.lua`,
    /// `window.lua` and `transitions.lua`).
    pub fn file(self) -> &'static str {
        match self {
            ScriptKind::Acquire => "acquire.lua",
            ScriptKind::Record => "record.lua",
            ScriptKind::Release => "release.lua",
            ScriptKind::Manual => "manual.lua",
            ScriptKind::Read => "read.lua",
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

/// The scripts read at run time from the directory `BREAKERBOX_LUA_DIR` names (feature
/// `lua-mutants`, for `scripts/lua_mutants.py`: its test binaries are built once, and each
/// mutant only writes the files again and runs them). Read once per process, on first use.
#[cfg(feature = "lua-mutants")]
pub(crate) mod from_dir {
    use std::path::Path;
    use std::sync::OnceLock;

    use super::ScriptKind;

    /// The files of the prelude, in the order `script!` joins them.
    const PRELUDE: [&str; 3] = ["common.lua", "window.lua", "transitions.lua"];

    static SOURCES: OnceLock<Option<[String; 5]>> = OnceLock::new();

    /// The script as the directory holds it, or `None` without `BREAKERBOX_LUA_DIR`.
    pub(super) fn source(kind: ScriptKind) -> Option<&'static str> {
        let sources = SOURCES.get_or_init(|| {
            let dir = std::env::var_os("BREAKERBOX_LUA_DIR")?;
            Some(ScriptKind::ALL.map(|kind| read(Path::new(&dir), kind)))
        });
        sources.as_ref().map(|all| all[kind.index()].as_str())
    }

    static MANY: OnceLock<Option<[String; 2]>> = OnceLock::new();

    /// `record_many.lua` joined like `store::many` joins it (the prelude and the
    /// operation's file, `record.lua` or `read.lua`, as `one`, then the driver), from the
    /// directory, or `None` without `BREAKERBOX_LUA_DIR` (or for another operation).
    pub(crate) fn many(operation: ScriptKind) -> Option<&'static str> {
        let index = match operation {
            ScriptKind::Record => 0,
            ScriptKind::Read => 1,
            _ => return None,
        };
        let all = MANY.get_or_init(|| {
            let dir = std::env::var_os("BREAKERBOX_LUA_DIR")?;
            let dir = Path::new(&dir);
            let file = dir.join("record_many.lua");
            let driver = std::fs::read_to_string(&file);
            Some([ScriptKind::Record, ScriptKind::Read].map(|kind| {
                let one = read(dir, kind);
                match &driver {
                    Ok(driver) => format!("local function one(KEYS, ARGV)\n{one}\nend\n{driver}"),
                    Err(e) => {
                        let why = format!("{}: {e}", file.display());
                        format!("return redis.error_reply({why:?})")
                    }
                }
            }))
        });
        all.as_ref().map(|all| all[index].as_str())
    }

    /// The prelude and the operation's file joined like `script!` joins them. A file that
    /// cannot be read gives a script that fails every call, so no test can pass on it.
    fn read(dir: &Path, kind: ScriptKind) -> String {
        let mut parts = Vec::with_capacity(PRELUDE.len() + 1);
        for file in PRELUDE.iter().copied().chain([kind.file()]) {
            match std::fs::read_to_string(dir.join(file)) {
                Ok(text) => parts.push(text),
                Err(e) => {
                    let why = format!("{}: {e}", dir.join(file).display());
                    return format!("return redis.error_reply({why:?})");
                }
            }
        }
        parts.join("\n")
    }
}

/// The SHA1 digests Redis gave each script, loaded lazily and again after `NOSCRIPT`.
#[derive(Debug, Default)]
pub(crate) struct Scripts {
    digests: Digests<{ ScriptKind::ALL.len() }>,
}

impl Scripts {
    /// Forgets every digest (they are reloaded on next use).
    pub(crate) fn forget(&self) {
        self.digests.forget();
    }

    async fn load(
        &self,
        conn: &RedisConnection,
        kind: ScriptKind,
        key: &str,
        seen: u64,
    ) -> Result<String, RedisError> {
        self.digests
            .load(conn, kind.index(), kind.source(), key, seen)
            .await
    }

    /// `EVALSHA` the script with one key and `args`; on `NOSCRIPT`, load it and retry once.
    pub(crate) async fn run(
        &self,
        conn: &mut RedisConnection,
        kind: ScriptKind,
        key: &str,
        args: &[String],
    ) -> Result<Value, RedisError> {
        let seen = self.digests.loads(kind.index());
        let sha = match self.digests.sha(kind.index()) {
            Some(sha) => sha,
            None => self.load(conn, kind, key, seen).await?,
        };
        match evalsha(conn, &sha, key, args).await {
            Err(e) if no_script(&e) => {
                let sha = self.load(conn, kind, key, seen).await?;
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
