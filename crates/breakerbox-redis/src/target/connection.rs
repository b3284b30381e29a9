//! Connections to a [`RedisTarget`](super::RedisTarget): one multiplexed connection, or
//! redis-rs's cluster connection.

use std::fmt;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult, Value};

/// A connection to a [`RedisTarget`](crate::RedisTarget): multiplexed over one socket (one per node for a
/// cluster), cheap to clone, and a [`redis::aio::ConnectionLike`], so every `redis`
/// command runs on it. On a cluster, keyed commands go to the key's slot and `MOVED` and
/// `ASK` are followed.
#[derive(Clone)]
pub struct RedisConnection {
    pub(super) conn: Conn,
}

#[derive(Clone)]
pub(super) enum Conn {
    Single(MultiplexedConnection),
    #[cfg(feature = "cluster")]
    Cluster(redis::cluster_async::ClusterConnection),
}

impl fmt::Debug for RedisConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.conn {
            Conn::Single(_) => "single",
            #[cfg(feature = "cluster")]
            Conn::Cluster(_) => "cluster",
        };
        f.debug_struct("RedisConnection")
            .field("kind", &kind)
            .finish_non_exhaustive()
    }
}

impl ConnectionLike for RedisConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match &mut self.conn {
            Conn::Single(c) => c.req_packed_command(cmd),
            #[cfg(feature = "cluster")]
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match &mut self.conn {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            #[cfg(feature = "cluster")]
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match &self.conn {
            Conn::Single(c) => c.get_db(),
            #[cfg(feature = "cluster")]
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

/// `SCAN` walks over one server: at most this many steps (a walk ends when its cursor
/// comes back to 0, long before).
const MAX_SCAN_STEPS: usize = 1_000_000;

impl RedisConnection {
    /// `SCRIPT LOAD` where `key` lives (every primary would fail while one is down).
    pub(crate) async fn load_script(&mut self, source: &str, key: &str) -> RedisResult<String> {
        let mut load = redis::cmd("SCRIPT");
        load.arg("LOAD").arg(source);
        #[cfg(not(feature = "cluster"))]
        let _ = key;
        match &mut self.conn {
            Conn::Single(c) => load.query_async(c).await,
            #[cfg(feature = "cluster")]
            Conn::Cluster(c) => {
                use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
                let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(
                    Route::with_key(key, SlotAddr::Master),
                ));
                let value = c.route_command(load, route).await?;
                Ok(redis::from_redis_value(value)?)
            }
        }
    }

    /// Every key matching the glob `pattern`, over every primary of a cluster (over the
    /// one server otherwise), `SCAN` by `SCAN` with `COUNT count`; each step bounded by
    /// `step_timeout`.
    pub async fn scan_match(
        &mut self,
        pattern: &str,
        count: usize,
        step_timeout: std::time::Duration,
    ) -> RedisResult<Vec<Vec<u8>>> {
        let mut keys = Vec::new();
        match &mut self.conn {
            Conn::Single(c) => scan_one(c, pattern, count, step_timeout, &mut keys).await?,
            #[cfg(feature = "cluster")]
            Conn::Cluster(c) => {
                for (host, port) in primaries(c, step_timeout).await? {
                    let mut node = OnNode {
                        conn: c.clone(),
                        host,
                        port,
                    };
                    scan_one(&mut node, pattern, count, step_timeout, &mut keys).await?;
                }
            }
        }
        Ok(keys)
    }
}

fn timed_out(step: std::time::Duration) -> RedisError {
    RedisError::from((
        ErrorKind::Io,
        "redis did not answer in time",
        format!("{step:?}"),
    ))
}

async fn scan_one<C: ConnectionLike + Send>(
    conn: &mut C,
    pattern: &str,
    count: usize,
    step_timeout: std::time::Duration,
    keys: &mut Vec<Vec<u8>>,
) -> RedisResult<()> {
    let mut cursor: u64 = 0;
    for _ in 0..MAX_SCAN_STEPS {
        let mut scan = redis::cmd("SCAN");
        scan.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(count);
        let step = scan.query_async::<(u64, Vec<Vec<u8>>)>(conn);
        let (next, mut found) = tokio::time::timeout(step_timeout, step)
            .await
            .map_err(|_| timed_out(step_timeout))??;
        keys.append(&mut found);
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    Ok(())
}

/// The primaries of a cluster, as `(host, port)`, from `CLUSTER SLOTS`.
#[cfg(feature = "cluster")]
async fn primaries(
    conn: &mut redis::cluster_async::ClusterConnection,
    step_timeout: std::time::Duration,
) -> RedisResult<Vec<(String, u16)>> {
    use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
    let slots = conn.route_command(
        redis::cmd("CLUSTER").arg("SLOTS").clone(),
        RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
    );
    let slots = tokio::time::timeout(step_timeout, slots)
        .await
        .map_err(|_| timed_out(step_timeout))??;
    // [[start, end, [host, port, id, ...], replicas...], ...]
    let ranges: Vec<Vec<Value>> = redis::from_redis_value(slots)?;
    let mut out: Vec<(String, u16)> = Vec::new();
    for range in ranges {
        let Some(primary) = range.get(2) else {
            continue;
        };
        let node: Vec<Value> = redis::from_redis_value(primary.clone())?;
        let (Some(host), Some(port)) = (node.first(), node.get(1)) else {
            continue;
        };
        let host: String = redis::from_redis_value(host.clone())?;
        let port: u16 = redis::from_redis_value(port.clone())?;
        if !out.contains(&(host.clone(), port)) {
            out.push((host, port));
        }
    }
    Ok(out)
}

/// A cluster connection whose commands all go to one node.
#[cfg(feature = "cluster")]
struct OnNode {
    conn: redis::cluster_async::ClusterConnection,
    host: String,
    port: u16,
}

#[cfg(feature = "cluster")]
impl ConnectionLike for OnNode {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
        let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
            host: self.host.clone(),
            port: self.port,
        });
        Box::pin(self.conn.route_command(cmd.clone(), route))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.conn.req_packed_commands(pipeline, offset, count)
    }

    fn get_db(&self) -> i64 {
        0
    }
}
