//! The URL forms of a [`RedisTarget`]: `redis://`, `redis+cluster://` (a cluster's seed
//! nodes) and `redis+sentinel://` (Sentinels and a service).

use redis::{ErrorKind, RedisError, RedisResult};

use super::RedisTarget;

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
pub(super) const URL_FORMS: &str = "redis://HOST:PORT, redis+cluster://HOST:PORT,HOST:PORT \
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

#[cfg(not(feature = "cluster"))]
pub(super) fn parse_cluster(_url: &str) -> RedisResult<RedisTarget> {
    Err(url_error(
        "redis+cluster:// needs the `cluster` feature of breakerbox-redis",
    ))
}

#[cfg(feature = "cluster")]
pub(super) fn parse_cluster(url: &str) -> RedisResult<RedisTarget> {
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
pub(super) fn parse_sentinel(_url: &str) -> RedisResult<RedisTarget> {
    Err(url_error(
        "redis+sentinel:// needs the `sentinel` feature of breakerbox-redis",
    ))
}

#[cfg(feature = "sentinel")]
pub(super) fn parse_sentinel(url: &str) -> RedisResult<RedisTarget> {
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

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(any(feature = "cluster", feature = "sentinel"))]
    use crate::Topology;

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
}
