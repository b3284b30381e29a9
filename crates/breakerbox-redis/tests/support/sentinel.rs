//! A primary, a replica and three Sentinels watching them (`redis-server --sentinel` with
//! a generated `sentinel.conf`), on free loopback ports, killed and removed on drop.
//! Sentinels count the primary as down after 400 ms, so killing it makes them promote the
//! replica within a few seconds.

#![allow(dead_code)]
// Tests wait on the real OS clock (real servers starting up, failing over).
#![allow(clippy::disallowed_methods)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::redis_server::RedisServer;

/// The service the Sentinels watch.
pub const SERVICE: &str = "main";

/// How long the primary may be silent before a Sentinel counts it as down (milliseconds).
pub const DOWN_AFTER_MS: u64 = 400;

/// One Sentinel process.
pub struct Sentinel {
    pub port: u16,
    child: Option<Child>,
}

impl Sentinel {
    /// Runs one command on this Sentinel.
    pub fn query<T: redis::FromRedisValue>(&self, args: &[&str]) -> Option<T> {
        query(self.port, args)
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs one command on the server at `port` (a fresh connection, 500 ms at most).
pub fn query<T: redis::FromRedisValue>(port: u16, args: &[&str]) -> Option<T> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).ok()?;
    let mut conn = client
        .get_connection_with_timeout(Duration::from_millis(500))
        .ok()?;
    conn.set_read_timeout(Some(Duration::from_millis(500)))
        .ok()?;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(&mut conn).ok()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind a free port")
        .local_addr()
        .expect("local addr")
        .port()
}

/// The primary, its replica and the Sentinels.
pub struct SentinelSet {
    pub primary: RedisServer,
    pub replica: RedisServer,
    pub sentinels: Vec<Sentinel>,
    dir: PathBuf,
    /// When [`SentinelSet::cut_replica`] froze the replica (for the failure report).
    cut_at: std::cell::Cell<Option<Instant>>,
    /// How long the replica stayed frozen, once thawed.
    cut_for: std::cell::Cell<Option<Duration>>,
}

impl SentinelSet {
    /// Starts everything and returns once the replica is in sync and every Sentinel knows
    /// the replica and the two other Sentinels.
    pub fn start() -> SentinelSet {
        let started = Instant::now();
        let dir = std::env::temp_dir().join(format!(
            "breakerbox-sentinel-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        // Each server in its own directory (a replica writes the RDB it receives).
        let server_dir = |name: &str| {
            let d = dir.join(name);
            std::fs::create_dir_all(&d).expect("a server directory");
            d.to_string_lossy().into_owned()
        };
        let primary_dir = server_dir("primary");
        // The replica syncs at once (the default waits 5 s for more replicas).
        let primary = RedisServer::start_with(
            &["--repl-diskless-sync-delay", "0", "--dir", &primary_dir],
            None,
        );
        let port = primary.port().to_string();
        let replica_dir = server_dir("replica");
        let replica = RedisServer::start_with(
            &["--replicaof", "127.0.0.1", &port, "--dir", &replica_dir],
            None,
        );
        let sentinels = (0..3)
            .map(|i| {
                for _ in 0..5 {
                    if let Some(s) = spawn_sentinel(&dir, i, primary.port()) {
                        return s;
                    }
                }
                panic!("could not start redis-server --sentinel");
            })
            .collect();
        let set = SentinelSet {
            primary,
            replica,
            sentinels,
            dir,
            cut_at: std::cell::Cell::new(None),
            cut_for: std::cell::Cell::new(None),
        };
        set.wait_ready(Duration::from_secs(20));
        eprintln!(
            "primary, replica and 3 sentinels ready in {:?}",
            started.elapsed()
        );
        set
    }

    /// `redis+sentinel://s1,s2,s3/main`.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        format!("redis+sentinel://{}/{SERVICE}", hosts.join(","))
    }

    fn wait_ready(&self, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let synced = self
                .replica
                .info("replication")
                .contains("master_link_status:up");
            let known = self.sentinels.iter().all(|s| {
                let fields: Vec<String> = s
                    .query(&["SENTINEL", "MASTER", SERVICE])
                    .unwrap_or_default();
                let field = |name: &str| {
                    fields
                        .iter()
                        .position(|f| f == name)
                        .and_then(|i| fields.get(i + 1))
                        .cloned()
                        .unwrap_or_default()
                };
                field("num-slaves") == "1" && field("num-other-sentinels") == "2"
            });
            if synced && known {
                return;
            }
            assert!(Instant::now() < deadline, "the sentinels did not get ready");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The primary's port as the first Sentinel that answers names it.
    pub fn primary_port(&self) -> Option<u16> {
        self.sentinels.iter().find_map(|s| {
            let addr: Vec<String> = s.query(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE])?;
            addr.get(1)?.parse().ok()
        })
    }

    /// Waits until the Sentinels name the replica as the primary and it says so itself;
    /// returns how long that took.
    pub fn wait_promoted(&self, within: Duration) -> Duration {
        let started = Instant::now();
        let deadline = started + within;
        loop {
            let named = self.primary_port() == Some(self.replica.port());
            if named && self.replica.info("replication").contains("role:master") {
                return started.elapsed();
            }
            assert!(
                Instant::now() < deadline,
                "the sentinels did not promote the replica within {within:?}; the replica \
                 was cut off for {:?}; what the sentinels and the replica say:\n{}",
                self.cut_for.get(),
                self.report()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Cuts the replica off (frozen, its link closed by the primary), so writes from now
    /// on reach the primary only; [`SentinelSet::kill_primary_and_resume_replica`] then
    /// makes the Sentinels promote a replica that lost them. A cut longer than
    /// [`DOWN_AFTER_MS`] has the Sentinels count the replica down until it answers again,
    /// which it does once thawed (a 5 s cut was still promoted, Redis 7.0.15).
    pub fn cut_replica(&self) {
        self.cut_at.set(Some(Instant::now()));
        self.replica.pause();
        let killed = self
            .primary
            .command(&["CLIENT", "KILL", "TYPE", "replica"])
            .unwrap_or_default();
        assert!(
            killed.starts_with(":1"),
            "the replica's link closed: {killed}"
        );
    }

    /// How long the last [`SentinelSet::cut_replica`] kept the replica frozen.
    pub fn cut_for(&self) -> Option<Duration> {
        self.cut_for.get()
    }

    /// Kills the primary and thaws the replica.
    pub fn kill_primary_and_resume_replica(&mut self) {
        self.primary.kill();
        self.replica.resume();
        if let Some(at) = self.cut_at.take() {
            self.cut_for.set(Some(at.elapsed()));
        }
    }

    /// Each Sentinel's view of the service and its replicas (flags, failover state, link
    /// down time, last ping reply, INFO age) and the replica's replication section: what a
    /// failed promotion is read from.
    fn report(&self) -> String {
        let pick = |fields: &[String], names: &[&str]| -> String {
            names
                .iter()
                .map(|name| {
                    let value = fields
                        .iter()
                        .position(|f| f == name)
                        .and_then(|i| fields.get(i + 1))
                        .map_or("?", String::as_str);
                    format!("{name}={value}")
                })
                .collect::<Vec<_>>()
                .join(" ")
        };
        let mut out = String::new();
        for s in &self.sentinels {
            let master: Vec<String> = s
                .query(&["SENTINEL", "MASTER", SERVICE])
                .unwrap_or_default();
            let info: String = s.query(&["INFO", "sentinel"]).unwrap_or_default();
            let tilt = info
                .lines()
                .filter(|l| l.starts_with("sentinel_tilt"))
                .collect::<Vec<_>>()
                .join(" ");
            out.push_str(&format!(
                "sentinel {} ({tilt}): master {}\n",
                s.port,
                pick(
                    &master,
                    &[
                        "port",
                        "flags",
                        "failover-state",
                        "num-slaves",
                        "config-epoch"
                    ]
                )
            ));
            let replicas: Vec<Vec<String>> = s
                .query(&["SENTINEL", "REPLICAS", SERVICE])
                .unwrap_or_default();
            for r in &replicas {
                out.push_str(&format!(
                    "  replica {}\n",
                    pick(
                        r,
                        &[
                            "port",
                            "flags",
                            "master-link-down-time",
                            "master-link-status",
                            "last-ok-ping-reply",
                            "info-refresh",
                            "slave-priority"
                        ]
                    )
                ));
            }
        }
        let replication = self.replica.info("replication");
        out.push_str(&format!(
            "replica {}: {}",
            self.replica.port(),
            replication
                .lines()
                .filter(|l| l.starts_with("role")
                    || l.starts_with("master_link")
                    || l.starts_with("master_port"))
                .collect::<Vec<_>>()
                .join(" ")
        ));
        out
    }
}

fn spawn_sentinel(dir: &std::path::Path, i: usize, primary_port: u16) -> Option<Sentinel> {
    let port = free_port();
    let conf = dir.join(format!("sentinel-{i}-{port}.conf"));
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\ndir {dir}\n\
             sentinel monitor {SERVICE} 127.0.0.1 {primary_port} 2\n\
             sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n\
             sentinel failover-timeout {SERVICE} 4000\n\
             sentinel parallel-syncs {SERVICE} 1\n",
            dir = dir.display()
        ),
    )
    .ok()?;
    let binary = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_string());
    let child = Command::new(binary)
        .arg(&conf)
        .arg("--sentinel")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut sentinel = Sentinel {
        port,
        child: Some(child),
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if sentinel.query::<String>(&["PING"]).as_deref() == Some("PONG") {
            // A Sentinel whose timer ran late by over 2 s (a stalled, loaded machine)
            // enters TILT mode and takes no action for 30 s, the whole of a test's wait
            // for a promotion: keep TILT, but for 1 s (`SENTINEL DEBUG`, Redis 7.0 and
            // later; an older server keeps its default).
            let _ = sentinel.query::<String>(&["SENTINEL", "DEBUG", "tilt-period", "1000"]);
            return Some(sentinel);
        }
        if let Some(child) = sentinel.child.as_mut() {
            if let Ok(Some(_)) = child.try_wait() {
                sentinel.child = None;
                return None;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

impl Drop for SentinelSet {
    fn drop(&mut self) {
        self.sentinels.clear();
        for server in [&mut self.primary, &mut self.replica] {
            server.resume();
            server.kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
