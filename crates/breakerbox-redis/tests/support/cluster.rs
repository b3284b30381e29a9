//! A real Redis Cluster for tests: 3 primaries and 3 replicas (`redis-server
//! --cluster-enabled yes`, joined by `redis-cli --cluster create`) on free loopback ports,
//! each in its own temporary directory, killed and removed on drop. Nodes can be killed,
//! paused, resumed and restarted (they rejoin with their identity), and a replica can
//! take over its primary (`CLUSTER FAILOVER`).

#![allow(dead_code)]
// Tests wait on the real OS clock (real servers starting up, failing over).
#![allow(clippy::disallowed_methods)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::redis_server::RedisServer;

/// How long a node may be silent before its peers count it as failed (milliseconds): short,
/// so a replica takes over a killed primary within about two seconds.
pub const NODE_TIMEOUT_MS: u64 = 1000;

/// One line of `CLUSTER NODES`.
#[derive(Clone, Debug)]
pub struct NodeInfo {
    pub id: String,
    pub port: u16,
    pub primary: bool,
    pub failed: bool,
    /// A replica's primary id.
    pub primary_id: Option<String>,
    /// Slot ranges `(first, last)` (primaries).
    pub slots: Vec<(u16, u16)>,
}

/// A slot being moved between primaries ([`RedisCluster::start_move`]).
pub struct SlotMove {
    slot: String,
    from: usize,
    to: usize,
    to_id: String,
}

/// The cluster's processes and their directory.
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
    dir: PathBuf,
}

fn cli() -> String {
    std::env::var("REDIS_CLI").unwrap_or_else(|_| "redis-cli".to_string())
}

impl RedisCluster {
    /// Starts 6 nodes and joins them as 3 primaries with one replica each; returns once
    /// every node sees the whole cluster healthy and every replica is in sync.
    pub fn start() -> RedisCluster {
        let started = Instant::now();
        let dir = std::env::temp_dir().join(format!(
            "breakerbox-cluster-{}-{}",
            std::process::id(),
            started_nanos()
        ));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let timeout = NODE_TIMEOUT_MS.to_string();
        let nodes: Vec<RedisServer> = (0..6)
            .map(|i| {
                let node_dir = dir.join(format!("node{i}"));
                std::fs::create_dir_all(&node_dir).expect("a node directory");
                let node_dir = node_dir.to_string_lossy().into_owned();
                RedisServer::start_with(
                    &[
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--dir",
                        &node_dir,
                        "--cluster-node-timeout",
                        &timeout,
                        // A replica takes over however long its link has been down.
                        "--cluster-replica-validity-factor",
                        "0",
                        // Replicas sync at once (the default waits 5 s for more replicas).
                        "--repl-diskless-sync-delay",
                        "0",
                    ],
                    None,
                )
            })
            .collect();
        let addresses: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        let status = Command::new(cli())
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run redis-cli --cluster create");
        assert!(status.success(), "redis-cli --cluster create failed");
        let cluster = RedisCluster { nodes, dir };
        cluster.wait_healthy(Duration::from_secs(20));
        eprintln!("cluster of 6 nodes ready in {:?}", started.elapsed());
        cluster
    }

    /// `redis+cluster://` with the three first nodes as seeds.
    pub fn url(&self) -> String {
        let seeds: Vec<String> = self.nodes[..3]
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        format!("redis+cluster://{}", seeds.join(","))
    }

    /// Waits until every running node reports `cluster_state:ok`, knows 6 nodes, and
    /// every primary has a replica in sync.
    pub fn wait_healthy(&self, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            if self.is_healthy() {
                return;
            }
            assert!(Instant::now() < deadline, "the cluster did not get healthy");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn is_healthy(&self) -> bool {
        for node in &self.nodes {
            let info = node.command(&["CLUSTER", "INFO"]).unwrap_or_default();
            if !info.contains("cluster_state:ok") || !info.contains("cluster_known_nodes:6") {
                return false;
            }
            let replication = node.info("replication");
            if replication.contains("role:slave") && !replication.contains("master_link_status:up")
            {
                return false;
            }
        }
        let nodes = self.cluster_nodes();
        nodes.iter().filter(|n| n.primary).count() == 3
            && nodes.iter().filter(|n| !n.primary).count() == 3
            && nodes.iter().all(|n| !n.failed)
    }

    /// `CLUSTER NODES` as seen by the first node that answers.
    pub fn cluster_nodes(&self) -> Vec<NodeInfo> {
        let text = self
            .nodes
            .iter()
            .find_map(|n| n.command(&["CLUSTER", "NODES"]))
            .unwrap_or_default();
        text.lines().filter_map(parse_node).collect()
    }

    /// The slot of `key`.
    pub fn slot(&self, key: &str) -> u16 {
        let reply = self
            .nodes
            .iter()
            .find_map(|n| n.command(&["CLUSTER", "KEYSLOT", key]))
            .expect("a node answers");
        reply
            .trim_start_matches(':')
            .parse()
            .expect("a slot number")
    }

    /// The index (in `nodes`) of the primary serving `key`'s slot, as the cluster says
    /// (waiting up to 10 s for a view that names one: gossip settles after a failover).
    pub fn primary_of(&self, key: &str) -> usize {
        let slot = self.slot(key);
        self.settled(|nodes| {
            nodes
                .iter()
                .find(|n| {
                    n.primary && !n.failed && n.slots.iter().any(|(a, b)| *a <= slot && slot <= *b)
                })
                .map(|n| n.port)
        })
    }

    /// The index of a live replica of the primary serving `key` (waiting up to 10 s for
    /// the cluster to list one).
    pub fn replica_of(&self, key: &str) -> usize {
        let primary_port = self.nodes[self.primary_of(key)].port();
        self.settled(|nodes| {
            let primary_id = nodes.iter().find(|n| n.port == primary_port)?.id.clone();
            nodes
                .iter()
                .find(|n| {
                    !n.primary && !n.failed && n.primary_id.as_deref() == Some(primary_id.as_str())
                })
                .map(|n| n.port)
        })
    }

    /// The node whose port `pick` finds in the cluster's view, retried for 10 s.
    fn settled(&self, pick: impl Fn(&[NodeInfo]) -> Option<u16>) -> usize {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(port) = pick(&self.cluster_nodes()) {
                return self.index_of(port);
            }
            assert!(
                Instant::now() < deadline,
                "the cluster's view did not settle"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The index of the node listening on `port`.
    pub fn index_of(&self, port: u16) -> usize {
        self.nodes
            .iter()
            .position(|n| n.port() == port)
            .expect("a node of this cluster")
    }

    /// Makes the replica `replica` take over its primary (`CLUSTER FAILOVER`, graceful:
    /// the replica catches up first) and waits until it is a primary.
    pub fn failover(&self, replica: usize, within: Duration) -> Duration {
        let started = Instant::now();
        let reply = self.nodes[replica].command(&["CLUSTER", "FAILOVER"]);
        assert_eq!(reply.as_deref(), Some("+OK"), "CLUSTER FAILOVER");
        self.wait_primary(replica, within);
        started.elapsed()
    }

    /// Waits until node `index` says it is a primary; returns how long that took.
    pub fn wait_primary(&self, index: usize, within: Duration) -> Duration {
        let started = Instant::now();
        let deadline = started + within;
        loop {
            let info = self.nodes[index].info("replication");
            if info.contains("role:master") {
                return started.elapsed();
            }
            assert!(
                Instant::now() < deadline,
                "node {index} did not become a primary"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether node `index` is a primary (as the cluster says).
    pub fn is_primary(&self, index: usize) -> bool {
        let port = self.nodes[index].port();
        self.cluster_nodes()
            .iter()
            .any(|n| n.primary && !n.failed && n.port == port)
    }

    /// Starts moving `key`'s slot from its primary to the primary `to` the way resharding
    /// does (`SETSLOT IMPORTING` / `MIGRATING`, then `MIGRATE` of the key, the slot's only
    /// one in these tests): until [`RedisCluster::finish_move`], requests for the key get
    /// `ASK` from the source.
    pub fn start_move(&self, key: &str, to: usize) -> SlotMove {
        let slot = self.slot(key).to_string();
        let from = self.primary_of(key);
        let ids = self.cluster_nodes();
        let id_of = |i: usize| {
            ids.iter()
                .find(|n| n.port == self.nodes[i].port())
                .map(|n| n.id.clone())
                .expect("listed")
        };
        let (from_id, to_id) = (id_of(from), id_of(to));
        let ok = |reply: Option<String>, what: &str| {
            assert_eq!(reply.as_deref(), Some("+OK"), "{what}");
        };
        ok(
            self.nodes[to].command(&["CLUSTER", "SETSLOT", &slot, "IMPORTING", &from_id]),
            "SETSLOT IMPORTING",
        );
        ok(
            self.nodes[from].command(&["CLUSTER", "SETSLOT", &slot, "MIGRATING", &to_id]),
            "SETSLOT MIGRATING",
        );
        let port = self.nodes[to].port().to_string();
        let reply = self.nodes[from].command(&["MIGRATE", "127.0.0.1", &port, key, "0", "5000"]);
        assert_eq!(reply.as_deref(), Some("+OK"), "MIGRATE");
        SlotMove {
            slot,
            from,
            to,
            to_id,
        }
    }

    /// Ends a move: the slot is the target's (`SETSLOT NODE` on both, then the others),
    /// so requests for it at the source get `MOVED`.
    pub fn finish_move(&self, moving: SlotMove) {
        for node in [moving.to, moving.from] {
            let reply = self.nodes[node].command(&[
                "CLUSTER",
                "SETSLOT",
                &moving.slot,
                "NODE",
                &moving.to_id,
            ]);
            assert_eq!(reply.as_deref(), Some("+OK"), "SETSLOT NODE");
        }
        for (i, node) in self.nodes.iter().enumerate() {
            if i != moving.to && i != moving.from {
                let _ = node.command(&["CLUSTER", "SETSLOT", &moving.slot, "NODE", &moving.to_id]);
            }
        }
    }
}

/// Runs one command on `server` through redis-rs (a fresh connection, 500 ms at most)
/// and converts its reply; `None` on any failure.
pub fn query<T: redis::FromRedisValue>(server: &RedisServer, args: &[&str]) -> Option<T> {
    let client = redis::Client::open(server.url()).ok()?;
    let mut conn = client
        .get_connection_with_timeout(Duration::from_millis(500))
        .ok()?;
    conn.set_read_timeout(Some(Duration::from_millis(500)))
        .ok()?;
    let (first, rest) = args.split_first()?;
    let mut cmd = redis::cmd(first);
    for a in rest {
        cmd.arg(*a);
    }
    cmd.query(&mut conn).ok()
}

fn started_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// `id ip:port@cport flags primary ping pong epoch state slots...`
fn parse_node(line: &str) -> Option<NodeInfo> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let address = fields.get(1)?;
    let port: u16 = address
        .split('@')
        .next()?
        .rsplit(':')
        .next()?
        .parse()
        .ok()?;
    let flags = fields.get(2)?;
    let primary = flags.contains("master");
    let slots = fields
        .iter()
        .skip(8)
        .filter(|f| !f.starts_with('['))
        .filter_map(|f| match f.split_once('-') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => f.parse().ok().map(|s| (s, s)),
        })
        .collect();
    Some(NodeInfo {
        id: fields.first()?.to_string(),
        port,
        primary,
        failed: flags.contains("fail") && !flags.contains("fail?"),
        primary_id: fields
            .get(3)
            .filter(|id| **id != "-")
            .map(|id| id.to_string()),
        slots,
    })
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            node.resume();
            node.kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
