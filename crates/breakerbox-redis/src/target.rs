//! Where the shared state lives: one Redis server, a Redis Cluster (feature `cluster`), or
//! the primary a set of Sentinels names (feature `sentinel`); and the connections made to
//! it. The URL forms are listed on [`RedisTarget`].

use std::fmt;
use std::sync::Arc;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{Client, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult, Value};

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

/// A URL error of this crate's own (redis-rs's have their own texts). The detail never
/// holds a credential.
pub(crate) fn url_error(detail: impl Into<String>) -> RedisError {
    RedisError::from((
        ErrorKind::InvalidClientConfig,
        "invalid redis URL",
        detail.into(),
    ))
}

/// The URL forms, for error messages.
pub(crate) const URL_FORMS: &str = "redis://HOST:PORT, redis+cluster://HOST:PORT,HOST:PORT \
     or redis+sentinel://HOST:PORT,HOST:PORT/SERVICE";

/// A URL split into its parts: scheme, credentials (`user:password`), the comma-separated
/// hosts, and what follows the authority (path, query, fragment).
#[cfg_attr(not(any(feature = "cluster", feature = "sentinel")), allow(dead_code))]
struct Parts<'a> {
    scheme: &'a str,
    userinfo: Option<&'a str>,
    hosts: Vec<&'a str>,
    tail: &'a str,
}

#[cfg_attr(not(any(feature = "cluster", feature = "sentinel")), allow(dead_code))]
fn split(url: &str) -> RedisResult<Parts<'_>> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| url_error(format!("no scheme: expected {URL_FORMS}")))?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => (Some(userinfo), hosts),
        None => (None, authority),
    };
    let hosts: Vec<&str> = hosts.split(',').map(str::trim).collect();
    if hosts.iter().any(|h| h.is_empty()) {
        return Err(url_error("an empty host in the host list"));
    }
    Ok(Parts {
        scheme,
        userinfo,
        hosts,
        tail,
    })
}

#[cfg_attr(not(any(feature = "cluster", feature = "sentinel")), allow(dead_code))]
impl Parts<'_> {
    /// A plain `redis://` (or `rediss://`) URL for one of the hosts, with the credentials,
    /// `default_port` when the host has none, and `tail`.
    fn node_url(&self, base: &str, host: &str, default_port: u16, tail: &str) -> String {
        let host = with_port(host, default_port);
        match self.userinfo {
            Some(userinfo) => format!("{base}://{userinfo}@{host}{tail}"),
            None => format!("{base}://{host}{tail}"),
        }
    }
}

/// `host` with `:port` appended when it has no port (`[::1]` and `[::1]:7000` are IPv6).
#[cfg_attr(not(any(feature = "cluster", feature = "sentinel")), allow(dead_code))]
fn with_port(host: &str, port: u16) -> String {
    let has_port = match host.rfind(']') {
        Some(close) => host[close..].contains(':'),
        None => host.contains(':'),
    };
    if has_port {
        host.to_string()
    } else {
        format!("{host}:{port}")
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

#[cfg(not(feature = "cluster"))]
fn parse_cluster(_url: &str) -> RedisResult<RedisTarget> {
    Err(url_error(
        "redis+cluster:// needs the `cluster` feature of breakerbox-redis",
    ))
}

#[cfg(feature = "cluster")]
fn parse_cluster(url: &str) -> RedisResult<RedisTarget> {
    let parts = split(url)?;
    let base = if parts.scheme.eq_ignore_ascii_case("rediss+cluster") {
        "rediss"
    } else {
        "redis"
    };
    match parts.tail.split(['?', '#']).next() {
        None | Some("") | Some("/") | Some("/0") => {}
        Some(_) => {
            return Err(url_error(
                "a cluster URL has no database or path (a cluster has database 0 only)",
            ))
        }
    }
    let nodes: Vec<String> = parts
        .hosts
        .iter()
        .map(|host| parts.node_url(base, host, 6379, parts.tail))
        .collect();
    RedisTarget::cluster(nodes.iter().map(String::as_str))
}

#[cfg(not(feature = "sentinel"))]
fn parse_sentinel(_url: &str) -> RedisResult<RedisTarget> {
    Err(url_error(
        "redis+sentinel:// needs the `sentinel` feature of breakerbox-redis",
    ))
}

#[cfg(feature = "sentinel")]
fn parse_sentinel(url: &str) -> RedisResult<RedisTarget> {
    use redis::sentinel::{SentinelClientBuilder, SentinelServerType};
    use redis::IntoConnectionInfo;

    let parts = split(url)?;
    let tls = parts.scheme.eq_ignore_ascii_case("rediss+sentinel");
    let base = if tls { "rediss" } else { "redis" };
    let (path, query) = match parts.tail.split_once(['?', '#']) {
        Some((path, _)) => (path, &parts.tail[path.len()..]),
        None => (parts.tail, ""),
    };
    let mut segments = path.trim_start_matches('/').split('/');
    let service = segments.next().unwrap_or_default();
    if service.is_empty() {
        return Err(url_error(
            "a sentinel URL names its service: redis+sentinel://HOST:PORT,HOST:PORT/SERVICE",
        ));
    }
    let db = segments.next().unwrap_or_default();
    if segments.next().is_some() {
        return Err(url_error(
            "a sentinel URL's path is /SERVICE or /SERVICE/DB",
        ));
    }
    let sentinels = parts
        .hosts
        .iter()
        .map(|host| {
            let url = format!("{base}://{}/", with_port(host, 26379));
            url.as_str()
                .into_connection_info()
                .map(|info| info.addr().clone())
        })
        .collect::<RedisResult<Vec<_>>>()?;
    // The data nodes' credentials, database and options, read the way redis-rs reads a URL.
    let first = parts.hosts.first().copied().unwrap_or("localhost");
    let node_tail = if db.is_empty() {
        format!("/{query}")
    } else {
        format!("/{db}{query}")
    };
    let node = parts
        .node_url(base, first, 6379, &node_tail)
        .as_str()
        .into_connection_info()?;
    let settings = node.redis_settings();
    let mut builder =
        SentinelClientBuilder::new(sentinels.clone(), service, SentinelServerType::Master)?
            .set_client_to_redis_db(settings.db())
            .set_client_to_redis_protocol(settings.protocol());
    if let Some(username) = settings.username() {
        builder = builder.set_client_to_redis_username(username);
    }
    if let Some(password) = settings.password() {
        builder = builder.set_client_to_redis_password(password);
    }
    if tls {
        let mode = match node.addr() {
            redis::ConnectionAddr::TcpTls { insecure: true, .. } => redis::TlsMode::Insecure,
            _ => redis::TlsMode::Secure,
        };
        builder = builder
            .set_client_to_redis_tls_mode(mode)
            .set_client_to_sentinel_tls_mode(mode);
    }
    let client = builder.build()?;
    let hosts: Vec<String> = sentinels.iter().map(ToString::to_string).collect();
    let scheme = if tls {
        "rediss+sentinel"
    } else {
        "redis+sentinel"
    };
    let db = if db.is_empty() {
        String::new()
    } else {
        format!("/{db}")
    };
    let shown = format!("{scheme}://{}/{service}{db}", hosts.join(","));
    Ok(RedisTarget::sentinel(client, &shown))
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

/// A Sentinel client, asked for the primary whenever a connection is made, and what a
/// Sentinel announced of failovers.
#[cfg(feature = "sentinel")]
struct SentinelLink {
    client: tokio::sync::Mutex<redis::sentinel::SentinelClient>,
    /// The target as shown (addresses and service, no credentials).
    shown: String,
    /// Failovers announced (`+switch-master`, any service of these Sentinels).
    switches: std::sync::atomic::AtomicU64,
    /// Woken at each announced failover.
    announced: tokio::sync::Notify,
    /// Whether the task listening for them runs.
    watching: std::sync::atomic::AtomicBool,
}

#[cfg(feature = "sentinel")]
impl SentinelLink {
    fn new(client: redis::sentinel::SentinelClient, shown: String) -> SentinelLink {
        SentinelLink {
            client: tokio::sync::Mutex::new(client),
            shown,
            switches: std::sync::atomic::AtomicU64::new(0),
            announced: tokio::sync::Notify::new(),
            watching: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// A client for the current primary (redis-rs checks its role before answering).
    async fn primary(&self) -> RedisResult<Client> {
        self.client.lock().await.async_get_client().await
    }

    /// The failovers announced so far; starts listening (on the current tokio runtime)
    /// the first time.
    fn failovers(self: &Arc<Self>) -> u64 {
        use std::sync::atomic::Ordering;
        if !self.watching.swap(true, Ordering::AcqRel) {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    runtime.spawn(watch_failovers(Arc::downgrade(self)));
                }
                Err(_) => self.watching.store(false, Ordering::Release),
            }
        }
        self.switches.load(Ordering::Acquire)
    }

    /// Subscribed to `+switch-master` on the first Sentinel that answers.
    async fn switch_announcements(&self) -> RedisResult<redis::aio::PubSub> {
        let sentinel = self.client.lock().await.async_get_sentinel_client().await?;
        let mut pubsub = sentinel.get_async_pubsub().await?;
        pubsub.subscribe("+switch-master").await?;
        Ok(pubsub)
    }
}

/// While `link` lives: listens to a Sentinel's `+switch-master` announcements and counts
/// them (connections made before one are dropped by their users). Reconnects with
/// backoff.
#[cfg(feature = "sentinel")]
async fn watch_failovers(link: std::sync::Weak<SentinelLink>) {
    use futures_util::StreamExt;
    use std::sync::atomic::Ordering;
    use std::time::Duration;
    let mut delay = Duration::from_millis(50);
    loop {
        let Some(sentinels) = link.upgrade() else {
            return;
        };
        let subscribed =
            tokio::time::timeout(Duration::from_secs(1), sentinels.switch_announcements()).await;
        drop(sentinels);
        if let Ok(Ok(pubsub)) = subscribed {
            delay = Duration::from_millis(50);
            let mut stream = pubsub.into_on_message();
            loop {
                tokio::select! {
                    message = stream.next() => match (message, link.upgrade()) {
                        (Some(_), Some(sentinels)) => {
                            tracing::info!(
                                target: "breakerbox_redis",
                                redis = sentinels.shown.as_str(),
                                "the sentinels switched the primary; reconnecting"
                            );
                            sentinels.switches.fetch_add(1, Ordering::AcqRel);
                            sentinels.announced.notify_waiters();
                        }
                        (Some(_), None) => return,
                        (None, _) => break,
                    },
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {
                        if link.strong_count() == 0 {
                            return;
                        }
                    }
                }
            }
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(2));
    }
}

/// A connection to a [`RedisTarget`]: multiplexed over one socket (one per node for a
/// cluster), cheap to clone, and a [`redis::aio::ConnectionLike`], so every `redis`
/// command runs on it. On a cluster, keyed commands go to the key's slot and `MOVED` and
/// `ASK` are followed.
#[derive(Clone)]
pub struct RedisConnection {
    conn: Conn,
}

#[derive(Clone)]
enum Conn {
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
    fn hosts_get_their_default_port() {
        assert_eq!(with_port("h", 6379), "h:6379");
        assert_eq!(with_port("h:7000", 6379), "h:7000");
        assert_eq!(with_port("[::1]", 26379), "[::1]:26379");
        assert_eq!(with_port("[::1]:7000", 26379), "[::1]:7000");
    }

    #[test]
    fn urls_show_no_credentials() {
        let t = RedisTarget::parse("redis://user:s3cret@127.0.0.1:6380/2").unwrap();
        assert_eq!(t.to_string(), "redis://127.0.0.1:6380");
        assert!(!format!("{t:?}").contains("s3cret"));
    }

    #[test]
    fn bad_urls_are_refused_with_a_reason() {
        for url in [
            "",
            "127.0.0.1:6379",
            "http://h",
            "redis+cluster://",
            "redis+cluster://a,,b",
        ] {
            let e = RedisTarget::parse(url).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidClientConfig, "{url}: {e}");
        }
    }

    #[cfg(feature = "cluster")]
    #[test]
    fn cluster_urls_list_their_seeds() {
        let t = RedisTarget::parse("redis+cluster://u:pw@10.0.0.1:7000,10.0.0.2").unwrap();
        assert_eq!(t.topology(), Topology::Cluster);
        assert_eq!(t.to_string(), "redis+cluster://10.0.0.1:7000,10.0.0.2:6379");
        assert!(RedisTarget::parse("redis+cluster://h:7000/3").is_err());
    }

    #[cfg(feature = "sentinel")]
    #[test]
    fn sentinel_urls_name_a_service() {
        let t = RedisTarget::parse("redis+sentinel://:pw@s1,s2:5000/main/2").unwrap();
        assert_eq!(t.topology(), Topology::Sentinel);
        assert_eq!(t.to_string(), "redis+sentinel://s1:26379,s2:5000/main/2");
        assert!(RedisTarget::parse("redis+sentinel://s1:26379").is_err());
        assert!(RedisTarget::parse("redis+sentinel://s1:26379/").is_err());
        assert!(RedisTarget::parse("redis+sentinel://s1/a/1/x").is_err());
    }

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
