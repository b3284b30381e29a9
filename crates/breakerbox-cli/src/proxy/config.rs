//! The proxy's config file: listeners, limits, shared state and upstreams. Every error
//! names its key (`upstream[1].breaker.failure_rate: ...`) and all of them are collected,
//! so `--check` reports a whole file at once.

use std::net::SocketAddr;
use std::time::Duration;

use breakerbox::config::ConfigFile;
use breakerbox::Config;
use breakerbox_http::{HttpJudge, HttpJudgeConfig};
use serde::Deserialize;
use toml::{Table, Value};

use std::sync::Arc;

use super::concurrency::ConcurrencyConfig;
use super::tls::UpstreamTls;
use crate::spec::{breaker_config_at, DependencySpec};

mod concurrency;
mod fields;
mod health;
mod keepalive;
mod protocol;
mod redis;
mod tls;
mod url;

pub use health::HealthConfig;
pub use keepalive::Keepalive;
pub use protocol::Protocol;
use redis::redis_options;

use fields::{
    address, boolean, duration, join, positive, string, sub_table, type_name, valid_name, Errors,
};
use url::target;

/// A validated proxy config.
#[derive(Debug)]
pub struct ProxyConfig {
    /// Where the proxy listens.
    pub listen: SocketAddr,
    /// The admin listener.
    pub admin: AdminConfig,
    /// Request limits and timeouts.
    pub limits: Limits,
    /// Shared breaker state, when configured.
    pub redis: Option<RedisConfig>,
    /// Worker threads (each with its own event loop and accept socket); `None` for two
    /// per CPU.
    pub workers: Option<usize>,
    /// Whether each worker runs on a CPU of its own.
    pub pin_workers: bool,
    /// The upstreams, in file order.
    pub upstreams: Vec<UpstreamConfig>,
    /// `[tls]`: the listener speaks HTTPS with this certificate, when set.
    pub tls: Option<crate::proxy::tls::ListenerTls>,
}

/// `[admin]`.
#[derive(Debug)]
pub struct AdminConfig {
    /// Where the admin listener listens (loopback by default).
    pub listen: SocketAddr,
    /// When set, every admin action needs `Authorization: Bearer TOKEN`.
    pub token: Option<String>,
    /// Host names (lower case) the admin listener answers under, besides IP literals and
    /// `localhost`.
    pub hosts: Vec<String>,
}

/// `[limits]`.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The request line and headers may take at most this many bytes (431 beyond).
    pub max_header_bytes: usize,
    /// A request body may hold at most this many bytes (413 beyond).
    pub max_body_bytes: u64,
    /// The upstream's share of an exchange (response head and body, not counting time
    /// spent waiting on the client) must fit in this (504, or a cut body, beyond).
    pub request_timeout: Duration,
    /// A client that sends no byte of its request body for this long gets 408; its
    /// request is not judged.
    pub client_body_timeout: Duration,
    /// A client connection with no request in flight for this long is closed: an
    /// HTTP/1.1 connection waiting for its next request head (or one slow to send it), an
    /// HTTP/2 connection with no stream open (GOAWAY first).
    pub idle_timeout: Duration,
    /// On SIGINT/SIGTERM, requests in flight get this long to finish.
    pub shutdown_grace: Duration,
    /// Client connections served at once, over all workers (more wait to be accepted);
    /// `None` for a default sized for the machine.
    pub max_connections: Option<usize>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_header_bytes: 16 * 1024,
            max_body_bytes: 10 * 1024 * 1024,
            request_timeout: Duration::from_secs(30),
            client_body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(10),
            max_connections: None,
        }
    }
}

/// Shared breaker state in Redis.
#[derive(Debug)]
pub struct RedisConfig {
    /// `redis://...`, `redis+cluster://...` or `redis+sentinel://...`.
    pub url: String,
    /// The key prefix (the library's default when absent).
    pub prefix: Option<String>,
    /// `[redis_options]`: the shared breakers' options (timeouts, mode, fallback, ...;
    /// the library's defaults when absent).
    pub options: Option<breakerbox_redis::RedisOptions>,
}

/// `[[upstream]]`.
#[derive(Debug)]
pub struct UpstreamConfig {
    /// The breaker's name.
    pub name: String,
    /// Its position in the file (`upstream[index]`).
    pub index: usize,
    /// The path prefix routed here, if any.
    pub route: Option<String>,
    /// The `Host` routed here (without port), if any.
    pub host: Option<String>,
    /// `host:port` of the upstream.
    pub authority: http::uri::Authority,
    /// The upstream URL's path, prepended to forwarded paths (empty for `/`).
    pub base_path: String,
    /// Whether the route prefix is removed before forwarding.
    pub strip_prefix: bool,
    /// The breaker.
    pub breaker: Config,
    /// The judge.
    pub judge: HttpJudge,
    /// Its concurrency limits, when `max_in_flight` is set.
    pub concurrency: Option<ConcurrencyConfig>,
    /// TLS to the upstream, for an `https://` URL.
    pub tls: Option<Arc<UpstreamTls>>,
    /// The HTTP version spoken to it (`protocol`).
    pub protocol: Protocol,
    /// HTTP/2 keep-alive PINGs of its connections (`Some` for an HTTP/2 upstream).
    pub keepalive: Option<Keepalive>,
    /// Its active health check (rule 24), when `health` is set.
    pub health: Option<HealthConfig>,
}

impl UpstreamConfig {
    /// The upstream's URL as the status shows it (never with credentials: none are
    /// allowed).
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}{}", self.authority, self.base_path)
    }
}

const TOP_KEYS: &[&str] = &[
    "listen",
    "workers",
    "pin_workers",
    "redis",
    "redis_prefix",
    "redis_options",
    "admin",
    "limits",
    "upstream",
    "tls",
];

/// The largest `max_header_bytes` accepted: the parser buffers this much per connection.
const MAX_HEADER_BYTES: u64 = 1024 * 1024;
/// The largest `max_connections` accepted (far beyond any file-descriptor limit).
const MAX_CONNECTIONS: u64 = 1_000_000;
const ADMIN_KEYS: &[&str] = &["listen", "token", "hosts"];
const LIMIT_KEYS: &[&str] = &[
    "max_header_bytes",
    "max_body_bytes",
    "request_timeout",
    "client_body_timeout",
    "idle_timeout",
    "shutdown_grace",
    "max_connections",
];
const UPSTREAM_KEYS: &[&str] = &[
    "name",
    "route",
    "host",
    "url",
    "strip_prefix",
    "breaker",
    "judge",
    "mode",
    "max_in_flight",
    "max_pending",
    "pending_timeout",
    "tls",
    "protocol",
    "keepalive_interval",
    "keepalive_timeout",
    "health",
];

/// Reads and validates a config; `Err` holds every error found, each naming its key.
pub fn parse(text: &str) -> Result<ProxyConfig, Vec<String>> {
    let root: Table = match text.parse() {
        Ok(root) => root,
        Err(error) => return Err(vec![format!("invalid TOML: {error}")]),
    };
    let mut errors = Errors::default();
    errors.unknown_keys(&root, TOP_KEYS, "");

    let listen = if root.contains_key("listen") {
        address(&root, "listen", "", &mut errors)
    } else {
        errors.push("listen", "missing (e.g. listen = \"127.0.0.1:8080\")");
        None
    };

    let workers = positive(&root, "workers", "", 1, &mut errors).map(|n| n as usize);
    if workers.is_some_and(|n| n > 1024) {
        errors.push("workers", "invalid value: expected at most 1024");
    }
    let pin_workers = boolean(&root, "pin_workers", "", &mut errors).unwrap_or(false);

    let mut admin = AdminConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 9090)),
        token: None,
        hosts: Vec::new(),
    };
    if let Some(table) = sub_table(&root, "admin", "", &mut errors) {
        errors.unknown_keys(table, ADMIN_KEYS, "admin");
        if let Some(addr) = address(table, "listen", "admin", &mut errors) {
            admin.listen = addr;
        }
        if let Some(token) = string(table, "token", "admin", &mut errors) {
            // What an `Authorization` header can carry, as the admin service requires.
            if token.is_empty() || !token.chars().all(|c| c.is_ascii_graphic()) {
                errors.push(
                    "admin.token",
                    "must be non-empty visible ASCII and contain no whitespace",
                );
            } else {
                admin.token = Some(token.to_string());
            }
        }
        match table.get("hosts") {
            None => {}
            Some(Value::Array(list)) => {
                for (i, item) in list.iter().enumerate() {
                    match item.as_str() {
                        // The admin service's rule: a name without a port.
                        Some(h)
                            if !h.is_empty()
                                && h.chars().all(|c| {
                                    c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')
                                }) =>
                        {
                            admin.hosts.push(h.to_ascii_lowercase())
                        }
                        _ => errors.push(
                            &format!("admin.hosts[{i}]"),
                            "expected a host name without a port, like \"admin.internal\"",
                        ),
                    }
                }
            }
            Some(other) => errors.push(
                "admin.hosts",
                format_args!(
                    "expected an array of host names, found {}",
                    type_name(other)
                ),
            ),
        }
    }

    let mut limits = Limits::default();
    if let Some(table) = sub_table(&root, "limits", "", &mut errors) {
        errors.unknown_keys(table, LIMIT_KEYS, "limits");
        if let Some(n) = positive(table, "max_header_bytes", "limits", 1024, &mut errors) {
            if n > MAX_HEADER_BYTES {
                errors.push(
                    "limits.max_header_bytes",
                    format_args!("invalid value {n}: expected at most {MAX_HEADER_BYTES}"),
                );
            } else {
                limits.max_header_bytes = n as usize;
            }
        }
        if let Some(n) = positive(table, "max_body_bytes", "limits", 0, &mut errors) {
            limits.max_body_bytes = n;
        }
        if let Some(d) = duration(table, "request_timeout", "limits", &mut errors) {
            limits.request_timeout = d;
        }
        if let Some(d) = duration(table, "client_body_timeout", "limits", &mut errors) {
            limits.client_body_timeout = d;
        }
        if let Some(d) = duration(table, "idle_timeout", "limits", &mut errors) {
            limits.idle_timeout = d;
        }
        if let Some(d) = duration(table, "shutdown_grace", "limits", &mut errors) {
            limits.shutdown_grace = d;
        }
        if let Some(n) = positive(table, "max_connections", "limits", 1, &mut errors) {
            if n > MAX_CONNECTIONS {
                errors.push(
                    "limits.max_connections",
                    format_args!("invalid value {n}: expected at most {MAX_CONNECTIONS}"),
                );
            } else {
                limits.max_connections = usize::try_from(n).ok();
            }
        }
    }

    let redis = string(&root, "redis", "", &mut errors).and_then(|url| {
        // Checked (not connected) by the engine itself, so every form it takes is taken
        // here; its messages name what is wrong, never the URL (which may hold a password).
        match breakerbox_redis::RedisTarget::parse(url) {
            Ok(_) => Some(RedisConfig {
                url: url.to_string(),
                prefix: string(&root, "redis_prefix", "", &mut errors).map(str::to_string),
                options: redis_options(&root, &mut errors),
            }),
            Err(e) => {
                errors.push(
                    "redis",
                    format_args!(
                        "invalid value {:?}: {e} (expected redis://HOST:PORT, \
                         redis+cluster://HOST:PORT,HOST:PORT or \
                         redis+sentinel://HOST:PORT,HOST:PORT/SERVICE)",
                        crate::redact::url(url)
                    ),
                );
                None
            }
        }
    });
    if root.contains_key("redis_prefix") && !root.contains_key("redis") {
        errors.push(
            "redis_prefix",
            "set without `redis` (the prefix names keys in Redis)",
        );
    }
    if root.contains_key("redis_options") && !root.contains_key("redis") {
        errors.push(
            "redis_options",
            "set without `redis` (the options are those of shared breakers)",
        );
    }
    let prefix_twice = root
        .get("redis_options")
        .and_then(Value::as_table)
        .is_some_and(|t| t.contains_key("prefix"));
    if prefix_twice && root.contains_key("redis_prefix") {
        errors.push(
            "redis_options.prefix",
            "set as well as `redis_prefix`: give the prefix in one place",
        );
    }

    let mut upstreams = Vec::new();
    match root.get("upstream") {
        None => errors.push("upstream", "missing: add at least one [[upstream]] table"),
        Some(Value::Array(list)) if list.is_empty() => {
            errors.push("upstream", "empty: add at least one [[upstream]] table")
        }
        Some(Value::Array(list)) => {
            for (i, item) in list.iter().enumerate() {
                let path = format!("upstream[{i}]");
                match item {
                    Value::Table(table) => {
                        if let Some(u) = upstream(table, i, &path, &mut errors) {
                            upstreams.push(u);
                        }
                    }
                    other => errors.push(
                        &path,
                        format_args!("expected a table, found {}", type_name(other)),
                    ),
                }
            }
        }
        Some(other) => errors.push(
            "upstream",
            format_args!(
                "expected an array of tables ([[upstream]]), found {}",
                type_name(other)
            ),
        ),
    }
    for (i, u) in upstreams.iter().enumerate() {
        if let Some(j) = upstreams[..i].iter().position(|o| o.name == u.name) {
            errors.push(
                &format!("upstream[{}].name", u.index),
                format_args!(
                    "duplicate name {:?} (also upstream[{}])",
                    u.name, upstreams[j].index
                ),
            );
        }
        let same_match = |o: &UpstreamConfig| o.host == u.host && o.route == u.route;
        if let Some(j) = upstreams[..i].iter().position(same_match) {
            let other = upstreams[j].index;
            match (&u.route, &u.host) {
                (Some(route), _) => errors.push(
                    &format!("upstream[{}].route", u.index),
                    format_args!("duplicate route {route:?} (also upstream[{other}])"),
                ),
                (None, Some(host)) => errors.push(
                    &format!("upstream[{}].host", u.index),
                    format_args!(
                        "duplicate host {host:?} (also upstream[{other}]; hosts are compared without case)"
                    ),
                ),
                (None, None) => {}
            }
        }
    }

    let tls = tls::listener_tls(&root, &mut errors);
    match (errors.0.is_empty(), listen) {
        (true, Some(listen)) => Ok(ProxyConfig {
            listen,
            admin,
            limits,
            redis,
            workers,
            pin_workers,
            upstreams,
            tls,
        }),
        _ => Err(errors.0),
    }
}

fn upstream(
    table: &Table,
    index: usize,
    path: &str,
    errors: &mut Errors,
) -> Option<UpstreamConfig> {
    let before = errors.0.len();
    errors.unknown_keys(table, UPSTREAM_KEYS, path);
    let name = match string(table, "name", path, errors) {
        Some(n) if valid_name(n) => Some(n.to_string()),
        Some(n) => {
            errors.push(
                &join(path, "name"),
                format_args!("invalid value {n:?}: expected letters, digits, '-', '_' or '.'"),
            );
            None
        }
        None => {
            if !table.contains_key("name") {
                errors.push(&join(path, "name"), "missing");
            }
            None
        }
    };
    let route = string(table, "route", path, errors).and_then(|r| {
        if r.starts_with('/') {
            Some(r.to_string())
        } else {
            errors.push(
                &join(path, "route"),
                format_args!("invalid value {r:?}: expected a path prefix starting with '/'"),
            );
            None
        }
    });
    let host = string(table, "host", path, errors).and_then(|h| {
        if h.is_empty() {
            errors.push(&join(path, "host"), "must not be empty");
            None
        } else if h.contains([':', '/', '@']) || h.chars().any(char::is_whitespace) {
            errors.push(
                &join(path, "host"),
                format_args!("invalid value {h:?}: expected a host name without a port"),
            );
            None
        } else {
            Some(h.to_ascii_lowercase())
        }
    });
    if !table.contains_key("route") && !table.contains_key("host") {
        errors.push(
            path,
            "needs a `route` (path prefix) or a `host` (Host header) to match",
        );
    }
    let strip_prefix = boolean(table, "strip_prefix", path, errors).unwrap_or(false);
    let target = match string(table, "url", path, errors) {
        Some(url) => target(url, &join(path, "url"), errors),
        None => {
            if !table.contains_key("url") {
                errors.push(
                    &join(path, "url"),
                    "missing (e.g. url = \"http://127.0.0.1:3000\")",
                );
            }
            None
        }
    };

    // Rule 20: `mode = "shadow"` starts the breaker in shadow mode (`enforce`, the
    // default, rejects as usual).
    let shadow = match table.get("mode") {
        None => None,
        Some(Value::String(m)) if m == "shadow" => Some(true),
        Some(Value::String(m)) if m == "enforce" => Some(false),
        Some(other) => {
            errors.push(
                &join(path, "mode"),
                format_args!("invalid value {other}: expected \"enforce\" or \"shadow\""),
            );
            None
        }
    };
    let concurrency = concurrency::concurrency(table, path, errors);
    let protocol = protocol::protocol(table, path, errors);
    let keepalive = keepalive::keepalive(table, protocol, path, errors);
    let health = health::health(table, path, errors);
    let tls = target.as_ref().and_then(|(authority, _, https)| {
        tls::upstream_tls(table, *https, authority.host(), protocol, path, errors)
    });
    let mut spec = DependencySpec::default();
    if let Some(value) = table.get("breaker") {
        match ConfigFile::deserialize(value.clone()) {
            Ok(b) => spec.breaker = b,
            Err(e) => errors.push(&join(path, "breaker"), e.message().trim()),
        }
    }
    if let Some(value) = table.get("judge") {
        match HttpJudgeConfig::deserialize(value.clone()) {
            Ok(j) => spec.judge = j,
            Err(e) => errors.push(&join(path, "judge"), e.message().trim()),
        }
    }
    if let (Some(mode), Some(key)) = (shadow, spec.breaker.shadow) {
        if mode != key {
            errors.push(
                &join(path, "mode"),
                "contradicts breaker.shadow (give one of them)",
            );
        }
    }
    let breaker = match breaker_config_at(&spec.breaker, &join(path, "breaker")) {
        Ok(mut c) => {
            if let Some(on) = shadow {
                c.shadow = on;
            }
            Some(c)
        }
        Err(e) => {
            errors.0.push(format!("{e:#}"));
            None
        }
    };
    let judge = match spec.http_judge_at(&join(path, "judge")) {
        Ok(j) => Some(j),
        Err(e) => {
            errors.0.push(format!("{e:#}"));
            None
        }
    };
    if errors.0.len() != before {
        return None;
    }
    let (authority, base_path, _) = target?;
    Some(UpstreamConfig {
        name: name?,
        index,
        route,
        host,
        authority,
        base_path,
        strip_prefix,
        breaker: breaker?,
        judge: judge?,
        concurrency,
        tls,
        protocol,
        keepalive,
        health,
    })
}
