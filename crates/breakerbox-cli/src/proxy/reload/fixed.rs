//! The settings a reload cannot change: they are bound into the running process at start
//! (sockets, threads, the admin service, the Redis connection). A reload that changes
//! one is refused whole, naming the key; the proxy must be restarted for it.

use std::net::SocketAddr;
use std::time::Duration;

use toml::{Table, Value};

use super::super::config::ProxyConfig;

/// The start-up-only settings of a config, as compared between two files.
#[derive(Debug)]
pub struct Fixed {
    listen: SocketAddr,
    workers: Option<usize>,
    pin_workers: bool,
    admin_listen: SocketAddr,
    admin_token: Option<String>,
    admin_hosts: Vec<String>,
    max_header_bytes: usize,
    idle_timeout: Duration,
    shutdown_grace: Duration,
    max_connections: Option<usize>,
    redis: Option<(String, Option<String>)>,
    redis_options: Option<Value>,
    tls: Option<Value>,
}

impl Fixed {
    /// The start-up-only settings of `config`, read from `root` (its file) where the
    /// config keeps only what it built from them.
    pub fn of(config: &ProxyConfig, root: &Table) -> Fixed {
        Fixed {
            listen: config.listen,
            workers: config.workers,
            pin_workers: config.pin_workers,
            admin_listen: config.admin.listen,
            admin_token: config.admin.token.clone(),
            admin_hosts: config.admin.hosts.clone(),
            max_header_bytes: config.limits.max_header_bytes,
            idle_timeout: config.limits.idle_timeout,
            shutdown_grace: config.limits.shutdown_grace,
            max_connections: config.limits.max_connections,
            redis: config
                .redis
                .as_ref()
                .map(|r| (r.url.clone(), r.prefix.clone())),
            redis_options: root.get("redis_options").cloned(),
            tls: root.get("tls").cloned(),
        }
    }

    /// Every key whose value `next` changes, each as an error naming it.
    pub fn changes(&self, next: &Fixed) -> Vec<String> {
        let mut errors = Vec::new();
        let mut same = |key: &str, same: bool, what: String| {
            if !same {
                errors.push(format!(
                    "{key}: cannot change on reload ({what}); restart the proxy to apply it"
                ));
            }
        };
        same(
            "listen",
            self.listen == next.listen,
            format!(
                "the proxy listens on {}; the file asks for {}",
                self.listen, next.listen
            ),
        );
        same(
            "workers",
            self.workers == next.workers,
            "worker threads start with the proxy".into(),
        );
        same(
            "pin_workers",
            self.pin_workers == next.pin_workers,
            format!(
                "worker threads are placed at start (running with `pin_workers = {}`; the file asks for {})",
                self.pin_workers, next.pin_workers
            ),
        );
        same(
            "admin.listen",
            self.admin_listen == next.admin_listen,
            format!(
                "the admin listener listens on {}; the file asks for {}",
                self.admin_listen, next.admin_listen
            ),
        );
        same(
            "admin.token",
            self.admin_token == next.admin_token,
            "the admin service's access rules are set at start".into(),
        );
        same(
            "admin.hosts",
            self.admin_hosts == next.admin_hosts,
            "the admin service's access rules are set at start".into(),
        );
        same(
            "limits.max_header_bytes",
            self.max_header_bytes == next.max_header_bytes,
            "the listeners' parsers are set up at start".into(),
        );
        same(
            "limits.idle_timeout",
            self.idle_timeout == next.idle_timeout,
            "the listeners' connections are set up at start".into(),
        );
        same(
            "limits.shutdown_grace",
            self.shutdown_grace == next.shutdown_grace,
            "the listeners' shutdown is set up at start".into(),
        );
        same(
            "limits.max_connections",
            self.max_connections == next.max_connections,
            "the connection limit is set up at start".into(),
        );
        let redis = |r: &Option<(String, Option<String>)>| r.as_ref().map(|(url, _)| url.clone());
        same(
            "redis",
            redis(&self.redis) == redis(&next.redis),
            "shared breakers are connected at start".into(),
        );
        let prefix = |r: &Option<(String, Option<String>)>| r.as_ref().and_then(|(_, p)| p.clone());
        same(
            "redis_prefix",
            prefix(&self.redis) == prefix(&next.redis),
            "shared breakers are connected at start".into(),
        );
        same(
            "redis_options",
            self.redis_options == next.redis_options,
            "shared breakers are connected at start".into(),
        );
        // A new certificate (renewed files, or other paths) is swapped in; HTTPS itself
        // cannot come or go, the listener is not rebound.
        same(
            "tls",
            self.tls.is_some() == next.tls.is_some(),
            "the listener speaks HTTPS or not from its start".into(),
        );
        errors
    }
}
