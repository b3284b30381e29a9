//! Reloading the config file (SIGHUP, `POST /reload`) without losing state. The file is
//! read and validated exactly as `--check` does, and checked against what cannot change
//! while the proxy runs; any error refuses the whole reload (the running config stays,
//! each error names its key). Then every upstream is matched by name: an unchanged one
//! keeps its breaker (state, window, generation), counters, concurrency places and idle
//! connections; a changed one keeps what its change allows (see the workspace README,
//! "Reloading the config"); an added one starts; a removed one takes no new request and
//! finishes those in flight. The new config is published whole ([`Live::publish`]): a
//! request uses the config it started with, from its first byte to its last.

mod fixed;
mod plan;

use std::path::PathBuf;
use std::sync::{Arc, Weak};

use serde_json::{json, Value};
use toml::Table;

use super::config::{self, ProxyConfig, RedisConfig, UpstreamConfig};
use super::forward::{Proxy, Upstream};
use super::live::Live;
use super::metrics::Recorder;
use super::tls::ListenerCert;

pub use fixed::Fixed;

/// What the running config was read from: what a reload compares the new file to.
pub struct Running {
    /// The running file, as TOML.
    root: Table,
    /// Its start-up-only settings.
    fixed: Fixed,
    /// The shared state's settings (start-up-only), for the new breakers.
    redis: Option<RedisConfig>,
    /// The last connection identity given to an upstream.
    last_conn: u64,
    /// The certificate the listener presents (`[tls]`), replaced by every reload.
    listener_cert: Option<Arc<ListenerCert>>,
}

impl Running {
    /// Whether the breakers' state is shared through Redis.
    pub fn shared(&self) -> bool {
        self.redis.is_some()
    }
}

/// Reads `path` and validates it as `--check` does: the config and its TOML, or every
/// error (each naming its key).
pub fn read(path: &std::path::Path) -> Result<(ProxyConfig, Table), Vec<String>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| vec![format!("cannot read {}: {e}", path.display())])?;
    let config = config::parse(&text)?;
    // `parse` read the same text as TOML already.
    let root = text
        .parse::<Table>()
        .map_err(|e| vec![format!("invalid TOML: {e}")])?;
    Ok((config, root))
}

/// The upstreams of the first config, each with a new breaker reporting to `recorder`,
/// and what a reload needs to know of that config.
pub async fn start(
    mut config: ProxyConfig,
    root: Table,
    recorder: &Arc<Recorder>,
) -> anyhow::Result<(Vec<Upstream>, Running, ProxyConfig)> {
    let fixed = Fixed::of(&config, &root);
    let configs: Vec<UpstreamConfig> = std::mem::take(&mut config.upstreams);
    let mut upstreams = Vec::with_capacity(configs.len());
    let mut last_conn = 0;
    for u in configs {
        last_conn += 1;
        upstreams.push(plan::start(config.redis.as_ref(), u, recorder, last_conn).await?);
    }
    let running = Running {
        root,
        fixed,
        redis: config.redis.take(),
        last_conn,
        listener_cert: config.tls.as_ref().map(|tls| tls.cert.clone()),
    };
    Ok((upstreams, running, config))
}

/// Reloads the file the proxy started with into [`Live`]; one reload at a time.
pub struct Reloader {
    path: PathBuf,
    live: Arc<Live>,
    running: tokio::sync::Mutex<Running>,
}

impl Reloader {
    /// A reloader of `path` into `live`, whose running config `running` describes.
    pub fn new(path: PathBuf, live: Arc<Live>, running: Running) -> Reloader {
        Reloader {
            path,
            live,
            running: tokio::sync::Mutex::new(running),
        }
    }

    /// Reloads the file (asked for by `by`, for the log): the summary of what changed,
    /// or every error (the running config stays). Logged and counted either way.
    pub async fn reload(&self, by: &str) -> Result<Value, Vec<String>> {
        let mut running = self.running.lock().await;
        let result = self.apply(&mut running).await;
        self.live.count_reload(result.is_ok());
        match &result {
            Ok(summary) => eprintln!(
                "breakerbox proxy: reloaded {} ({by}): {}",
                self.path.display(),
                summary
            ),
            Err(errors) => {
                eprintln!(
                    "breakerbox proxy: reload of {} ({by}) refused, the running config stays: {} error(s)",
                    self.path.display(),
                    errors.len()
                );
                for e in errors {
                    eprintln!("error: {e}");
                }
            }
        }
        result
    }

    async fn apply(&self, running: &mut Running) -> Result<Value, Vec<String>> {
        let (mut config, root) = read(&self.path)?;
        let fixed = Fixed::of(&config, &root);
        let refused = running.fixed.changes(&fixed);
        if !refused.is_empty() {
            return Err(refused);
        }
        let old = self.live.current();
        let configs = std::mem::take(&mut config.upstreams);
        let recorder = Arc::new(old.recorder.next(configs.iter().map(|u| u.name.as_str())));
        let mut last_conn = running.last_conn;
        let mut plan = plan::plan(
            &old,
            &running.root,
            (configs, &root),
            running.redis.as_ref(),
            &recorder,
            &mut last_conn,
        )
        .await?;
        let warnings = plan.commit().await;
        // The listener's files were read again with the rest: the next handshake presents
        // what they hold now (a renewed certificate needs no restart).
        if let (Some(running_cert), Some(next)) = (&running.listener_cert, &config.tls) {
            running_cert.replace_with(&next.cert);
        }
        let limits = changed_limits(&old.limits(), &config.limits);
        let upstreams = std::mem::take(&mut plan.upstreams);
        let generation =
            self.live
                .publish(Arc::new(Proxy::new(upstreams, recorder, config.limits)));
        running.root = root;
        running.last_conn = last_conn;
        let removed: Vec<String> = plan.summary["removed"]
            .as_array()
            .map(|names| {
                names
                    .iter()
                    .filter_map(|n| n.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        if !removed.is_empty() {
            let config = Arc::downgrade(&old);
            self.live
                .draining
                .add(removed.clone(), generation, config.clone());
            tokio::spawn(drained(self.live.clone(), config, removed));
        }
        drop(old);
        let mut summary = plan.summary;
        if let Value::Object(map) = &mut summary {
            map.insert("ok".into(), json!(true));
            map.insert("generation".into(), json!(generation));
            map.insert("limits".into(), json!(limits));
            map.insert("warnings".into(), json!(warnings));
        }
        Ok(summary)
    }
}

/// How often a reload looks whether the config it replaced has ended.
const DRAIN_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// Logs when the requests that started under a replaced config have all ended (its
/// response bodies relayed, its workers moved on), so its `removed` upstreams are gone:
/// breakers, counters and connections freed. Until then `/status` lists them under
/// `draining`.
async fn drained(live: Arc<Live>, old: Weak<Proxy>, removed: Vec<String>) {
    while live.draining.still_held(&old) {
        tokio::time::sleep(DRAIN_POLL).await;
    }
    eprintln!(
        "breakerbox proxy: drained {} (the last request in flight ended)",
        removed.join(", ")
    );
}

/// The `[limits]` keys a reload changes (all of them apply to requests that start from
/// now on; the start-up-only ones were refused before).
fn changed_limits(old: &config::Limits, new: &config::Limits) -> Vec<&'static str> {
    let mut keys = Vec::new();
    if old.max_body_bytes != new.max_body_bytes {
        keys.push("max_body_bytes");
    }
    if old.request_timeout != new.request_timeout {
        keys.push("request_timeout");
    }
    if old.client_body_timeout != new.client_body_timeout {
        keys.push("client_body_timeout");
    }
    keys
}
