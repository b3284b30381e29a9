//! Where the shared state lives: one Redis server, a Redis Cluster (feature `cluster`), or
//! the primary a set of Sentinels names (feature `sentinel`); and the connections made to
//! it. The URL forms are listed on [`RedisTarget`].

mod connection;
#[cfg(feature = "sentinel")]
mod sentinel;
mod url;

use std::fmt;
use std::sync::Arc;

use redis::{Client, RedisResult};

use connection::Conn;
pub use connection::RedisConnection;
#[cfg(feature = "sentinel")]
use sentinel::SentinelLink;
pub(crate) use url::url_error;
use url::{parse_cluster, parse_sentinel, URL_FORMS};

/// What a breaker's state is kept in: one Redis server, a Redis Cluster or a primary found
/// through Sentinels. Made from a URL ([`RedisTarget::parse`]) or from ready clients;
/// cloning is cheap. Its `Debug` and [`Display`](fmt::Display) show addresses, never
/// credentials.
///
/// | URL form | what it names |
/// |---|---|
/// | `redis://[user:password@]host[:port][/db]` | one server (`rediss://` with the `tls` feature) |
/// | `redis+cluster://[user:password@]host:port,host:port,...` | a Redis Cluster, through any of these seed nodes (`rediss+cluster://` with TLS) |
/// | `redis+sentinel://[user:password@]host:port,host:port,.../service[/db]` | the primary of `service`, found through these Sentinels (default port 26379; `rediss+sentinel://` with TLS to both) |
///
/// The credentials (and the database, for Sentinel) are the data nodes'; the Sentinels
/// themselves are asked without AUTH (build a `redis::sentinel::SentinelClient` and use
/// [`RedisTarget::sentinel`] for more).
///
/// ```
/// use breakerbox_redis::{RedisTarget, Topology};
///
/// let one = RedisTarget::parse("redis://127.0.0.1:6379/")?;
/// assert_eq!(one.topology(), Topology::Single);
/// # #[cfg(feature = "cluster")] {
/// let cluster = RedisTarget::parse("redis+cluster://10.0.0.1:7000,10.0.0.2:7000")?;
/// assert_eq!(cluster.topology(), Topology::Cluster);
/// # }
/// # #[cfg(feature = "sentinel")] {
/// let sentinel = RedisTarget::parse("redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/payments")?;
/// assert_eq!(sentinel.to_string(), "redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/payments");
/// # }
/// # Ok::<(), redis::RedisError>(())
/// ```
#[derive(Clone)]
pub struct RedisTarget {
    kind: Kind,
}

#[derive(Clone)]
enum Kind {
    Single(Arc<Client>),
    #[cfg(feature = "cluster")]
    Cluster(Arc<ClusterSeeds>),
    #[cfg(feature = "sentinel")]
    Sentinel(Arc<SentinelLink>),
}

/// The kind of deployment a [`RedisTarget`] names.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Topology {
    /// One server.
    Single,
    /// A Redis Cluster: keys hashed to slots over several primaries, each with replicas.
    Cluster,
    /// A primary found through Sentinels, found again after they fail it over.
    Sentinel,
}

impl Topology {
    /// The topology's name in URLs and messages: `single`, `cluster`, `sentinel`.
    pub fn as_str(self) -> &'static str {
        match self {
            Topology::Single => "single",
            Topology::Cluster => "cluster",
            Topology::Sentinel => "sentinel",
        }
    }
}

impl RedisTarget {
    /// The target a URL names (the forms are listed on [`RedisTarget`]). Nothing is
    /// sent: the URL is only checked.
    pub fn parse(url: &str) -> RedisResult<RedisTarget> {
        let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
        match scheme.as_deref() {
            Some("redis+cluster") | Some("rediss+cluster") => parse_cluster(url),
            Some("redis+sentinel") | Some("rediss+sentinel") => parse_sentinel(url),
            Some("redis") | Some("rediss") | Some("redis+unix") | Some("unix") => {
                Ok(RedisTarget::single(Client::open(url)?))
            }
            _ => Err(url_error(format!("unknown scheme: expected {URL_FORMS}"))),
        }
    }

    /// One server, through a ready client (a private CA, a client certificate).
    pub fn single(client: Client) -> RedisTarget {
        RedisTarget {
            kind: Kind::Single(Arc::new(client)),
        }
    }

    /// A Redis Cluster reached through `seeds` (any of its nodes; the others are found).
    /// Every seed must carry the same credentials.
    #[cfg(feature = "cluster")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cluster")))]
    pub fn cluster<T: redis::IntoConnectionInfo>(
        seeds: impl IntoIterator<Item = T>,
    ) -> RedisResult<RedisTarget> {
        let nodes = seeds
            .into_iter()
            .map(|s| s.into_connection_info())
            .collect::<RedisResult<Vec<_>>>()?;
        let seeds = ClusterSeeds { nodes };
        // Checked now (credentials alike, no unix sockets), so a bad list fails at build.
        seeds.builder().build()?;
        Ok(RedisTarget {
            kind: Kind::Cluster(Arc::new(seeds)),
        })
    }

    /// The primary that `client` (a Sentinel client for the primary of a service, e.g.
    /// with AUTH for the Sentinels or certificates) names, asked again whenever a
    /// connection is made, so a failover is followed. `shown_as` is what `Display` and
    /// `Debug` show (the client does not tell its addresses): put no credentials in it.
    #[cfg(feature = "sentinel")]
    #[cfg_attr(docsrs, doc(cfg(feature = "sentinel")))]
    pub fn sentinel(client: redis::sentinel::SentinelClient, shown_as: &str) -> RedisTarget {
        RedisTarget {
            kind: Kind::Sentinel(Arc::new(SentinelLink::new(client, shown_as.to_string()))),
        }
    }

    /// Which kind of deployment this is.
    pub fn topology(&self) -> Topology {
        match &self.kind {
            Kind::Single(_) => Topology::Single,
            #[cfg(feature = "cluster")]
            Kind::Cluster(_) => Topology::Cluster,
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(_) => Topology::Sentinel,
        }
    }

    /// Opens a connection: multiplexed (one socket, or one per cluster node), cheap to
    /// clone, usable with any `redis` command (`query_async`). Not bounded in time: wrap
    /// it in a timeout.
    pub async fn connect(&self) -> RedisResult<RedisConnection> {
        let conn = match &self.kind {
            Kind::Single(client) => Conn::Single(client.get_multiplexed_async_connection().await?),
            #[cfg(feature = "cluster")]
            Kind::Cluster(seeds) => {
                Conn::Cluster(seeds.builder().build()?.get_async_connection().await?)
            }
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(link) => Conn::Single(
                link.primary()
                    .await?
                    .get_multiplexed_async_connection()
                    .await?,
            ),
        };
        Ok(RedisConnection { conn })
    }

    /// A client for one server's pub/sub: the server itself, or the primary the Sentinels
    /// name now. `None` for a cluster (its subscriptions go through the cluster client).
    pub(crate) async fn pubsub_client(&self) -> Option<RedisResult<Client>> {
        match &self.kind {
            Kind::Single(client) => Some(Ok(Client::clone(client))),
            #[cfg(feature = "cluster")]
            Kind::Cluster(_) => None,
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(link) => Some(link.primary().await),
        }
    }

    /// The cluster's seeds, for its subscriptions.
    #[cfg(feature = "cluster")]
    pub(crate) fn cluster_seeds(&self) -> Option<&ClusterSeeds> {
        match &self.kind {
            Kind::Cluster(seeds) => Some(seeds),
            _ => None,
        }
    }

    /// Whether a connection that timed out should be dropped: behind Sentinels, the
    /// primary it reaches may have been replaced (a frozen primary never answers again).
    pub(crate) fn drop_on_timeout(&self) -> bool {
        self.topology() == Topology::Sentinel
    }

    /// Behind Sentinels: how many failovers (`+switch-master`) a Sentinel announced since
    /// this target was first asked (a task listens from then on, while the target lives).
    /// A connection made before the last one reaches a primary that may be one no more
    /// (a primary that stays up takes writes until it is made a replica, which are then
    /// lost). Always 0 for other topologies.
    pub(crate) fn failovers(&self) -> u64 {
        match &self.kind {
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(link) => link.failovers(),
            _ => 0,
        }
    }

    /// Completes at the next failover announced behind Sentinels (never otherwise).
    pub(crate) async fn next_failover(&self) {
        match &self.kind {
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(link) => {
                let announced = link.announced.notified();
                link.failovers();
                announced.await;
            }
            _ => std::future::pending().await,
        }
    }
}

impl From<Client> for RedisTarget {
    fn from(client: Client) -> Self {
        RedisTarget::single(client)
    }
}

/// Addresses only, never credentials.
impl fmt::Display for RedisTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Single(client) => {
                let info = client.get_connection_info();
                let scheme = match info.addr() {
                    redis::ConnectionAddr::TcpTls { .. } => "rediss",
                    redis::ConnectionAddr::Unix(_) => "redis+unix",
                    _ => "redis",
                };
                write!(f, "{scheme}://{}", info.addr())
            }
            #[cfg(feature = "cluster")]
            Kind::Cluster(seeds) => {
                let tls = seeds
                    .nodes
                    .iter()
                    .any(|n| matches!(n.addr(), redis::ConnectionAddr::TcpTls { .. }));
                let scheme = if tls {
                    "rediss+cluster"
                } else {
                    "redis+cluster"
                };
                let hosts: Vec<String> = seeds.nodes.iter().map(|n| n.addr().to_string()).collect();
                write!(f, "{scheme}://{}", hosts.join(","))
            }
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(link) => f.write_str(&link.shown),
        }
    }
}

impl fmt::Debug for RedisTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RedisTarget")
            .field(&self.to_string())
            .finish()
    }
}

/// The seed nodes of a cluster, from which its clients are built (one for commands, one
/// with a push channel for each subscription).
#[cfg(feature = "cluster")]
pub(crate) struct ClusterSeeds {
    nodes: Vec<redis::ConnectionInfo>,
}

#[cfg(feature = "cluster")]
impl ClusterSeeds {
    /// A client builder with this crate's settings: few and quick retries inside the client
    /// (every operation is bounded by the breaker's own timeout, and the outage logic
    /// retries with backoff), so a request does not wait seconds on a dead primary.
    pub(crate) fn builder(&self) -> redis::cluster::ClusterClientBuilder {
        redis::cluster::ClusterClientBuilder::new(self.nodes.clone())
            .retries(3)
            .min_retry_wait(10)
            .max_retry_wait(200)
            .connection_timeout(std::time::Duration::from_secs(1))
    }
}

/// Whether the key and the channel of breaker `name` under `prefix` hash to one cluster
/// slot (they share the hash tag `{name}`); not so when the tag would be empty (`name`
/// empty or starting with `}`).
pub(crate) fn key_and_channel_share_a_slot(key: &str, channel: &str) -> bool {
    tag(key) == tag(channel) && tag(key).is_some()
}

/// The hash tag of `key` as Redis Cluster computes it: what lies between the first `{`
/// and the first `}` after it, if not empty.
pub(crate) fn tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let close = key[open + 1..].find('}')?;
    (close > 0).then(|| &key[open + 1..open + 1 + close])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_and_its_channel_share_a_tag_unless_it_is_empty() {
        for (prefix, name) in [("bb:", "payments"), ("a{b", "x"), ("{t}:", "n"), ("", "{")] {
            let key = crate::breaker_key(prefix, name);
            let channel = format!("{key}:events");
            assert!(key_and_channel_share_a_slot(&key, &channel), "{key}");
        }
        for (prefix, name) in [("bb:", ""), ("bb:", "}x")] {
            let key = crate::breaker_key(prefix, name);
            let channel = format!("{key}:events");
            assert!(!key_and_channel_share_a_slot(&key, &channel), "{key}");
        }
    }
}
