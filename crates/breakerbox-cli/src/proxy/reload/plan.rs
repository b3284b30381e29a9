//! What a reload does to each upstream, matched by name between the running config and
//! the new file: kept as it is, changed in place, changed with a new breaker, added or
//! removed. Nothing is applied here: [`Plan::commit`] applies the in-place changes once
//! the whole file is known to be good.

use std::sync::Arc;

use anyhow::Context as _;
use breakerbox::contract::{Breaker, DynBreaker};
use serde_json::{json, Value};
use toml::Table;

use super::super::concurrency::{ConcurrencyConfig, Limit};
use super::super::config::{RedisConfig, UpstreamConfig};
use super::super::forward::{Proxy, Upstream};
use super::super::guard;
use super::super::metrics::Recorder;

/// The keys of an `[[upstream]]` table a reload compares (all but `name`, which matches
/// them).
const COMPARED: &[&str] = &[
    "route",
    "host",
    "url",
    "tls",
    "protocol",
    "keepalive_interval",
    "keepalive_timeout",
    "strip_prefix",
    "breaker",
    "mode",
    "judge",
    "max_in_flight",
    "max_pending",
    "pending_timeout",
    "health",
];

/// A new breaker for `config`: in memory, or shared through `redis`.
pub async fn breaker(
    redis: Option<&RedisConfig>,
    config: &UpstreamConfig,
    recorder: &Arc<Recorder>,
) -> anyhow::Result<DynBreaker> {
    match redis {
        Some(redis) => {
            guard::shared(
                redis,
                &config.name,
                config.breaker.clone(),
                recorder.clone(),
            )
            .await
        }
        None => guard::local(&config.name, config.breaker.clone(), recorder.clone()),
    }
    .with_context(|| format!("breaker {}", config.name))
}

/// A new upstream for `config`, with a new breaker and new connections.
pub async fn start(
    redis: Option<&RedisConfig>,
    config: UpstreamConfig,
    recorder: &Arc<Recorder>,
    conn: u64,
) -> anyhow::Result<Upstream> {
    Ok(Upstream {
        breaker: breaker(redis, &config, recorder).await?,
        shared: redis.is_some(),
        limit: config.concurrency.map(Limit::new),
        config,
        conn,
    })
}

/// The upstreams of the next config, and what is left to apply when it is published.
pub struct Plan {
    /// The next config's upstreams, in file order.
    pub upstreams: Vec<Upstream>,
    /// What the reload does, per upstream (the answer to `POST /reload`).
    pub summary: Value,
    /// In-place changes to shared parts (limits, shadow switches), applied on commit.
    pending: Vec<InPlace>,
}

enum InPlace {
    Resize(Limit, ConcurrencyConfig),
    Shadow(DynBreaker, bool),
    /// An operator's decisions on an in-memory breaker that a new one replaces: a forced
    /// open (with what is left of it), and the shadow switch unless the file changed it.
    Operator {
        from: DynBreaker,
        to: DynBreaker,
        shadow: bool,
    },
}

/// `config`'s breaker settings with the shadow switch left out (it switches in place).
fn without_shadow(config: &breakerbox::Config) -> breakerbox::Config {
    let mut config = config.clone();
    config.shadow = false;
    config
}

/// The `[[upstream]]` table at `index` of a file.
fn table(root: &Table, index: usize) -> Option<&Table> {
    root.get("upstream")?.as_array()?.get(index)?.as_table()
}

/// Matches the next file's upstreams against the running ones (`old`, read from
/// `old_root`) and builds what must be new (breakers for added upstreams and for
/// changed breaker settings). Nothing running changes until [`Plan::commit`].
pub async fn plan(
    old: &Proxy,
    old_root: &Table,
    next: (Vec<UpstreamConfig>, &Table),
    redis: Option<&RedisConfig>,
    recorder: &Arc<Recorder>,
    next_conn: &mut u64,
) -> Result<Plan, Vec<String>> {
    let (configs, new_root) = next;
    let mut upstreams = Vec::with_capacity(configs.len());
    let mut pending = Vec::new();
    let (mut kept, mut changed, mut added) = (Vec::new(), Vec::new(), Vec::new());
    let mut errors = Vec::new();
    for config in configs {
        let Some(was) = old.upstreams.iter().find(|u| u.config.name == config.name) else {
            added.push(json!(config.name));
            let index = config.index;
            *next_conn += 1;
            match start(redis, config, recorder, *next_conn).await {
                Ok(upstream) => upstreams.push(upstream),
                Err(e) => errors.push(format!("upstream[{index}]: {e:#}")),
            }
            continue;
        };
        let (before, after) = (
            table(old_root, was.config.index),
            table(new_root, config.index),
        );
        let keys: Vec<&str> = COMPARED
            .iter()
            .copied()
            .filter(|k| before.and_then(|t| t.get(*k)) != after.and_then(|t| t.get(*k)))
            .collect();
        let new_breaker = without_shadow(&was.config.breaker) != without_shadow(&config.breaker);
        let breaker = if new_breaker {
            match breaker(redis, &config, recorder).await {
                Ok(b) => {
                    // A shared breaker's overrides and switch are in Redis already.
                    if !was.shared {
                        pending.push(InPlace::Operator {
                            from: was.breaker.clone(),
                            to: b.clone(),
                            shadow: was.config.breaker.shadow == config.breaker.shadow,
                        });
                    }
                    b
                }
                Err(e) => {
                    errors.push(format!("upstream[{}]: {e:#}", config.index));
                    continue;
                }
            }
        } else {
            if was.config.breaker.shadow != config.breaker.shadow {
                pending.push(InPlace::Shadow(was.breaker.clone(), config.breaker.shadow));
            }
            was.breaker.clone()
        };
        let limit = match (&was.limit, config.concurrency) {
            (Some(limit), Some(c)) => {
                if limit.config() != c {
                    pending.push(InPlace::Resize(limit.clone(), c));
                }
                Some(limit.clone())
            }
            (None, Some(c)) => Some(Limit::new(c)),
            (_, None) => None,
        };
        // Connections keep the settings they were opened with: new keep-alive settings
        // take new connections.
        let same_place = [
            "url",
            "tls",
            "protocol",
            "keepalive_interval",
            "keepalive_timeout",
        ]
        .iter()
        .all(|k| before.and_then(|t| t.get(*k)) == after.and_then(|t| t.get(*k)))
            && was.config.authority == config.authority;
        let conn = if same_place {
            was.conn
        } else {
            *next_conn += 1;
            *next_conn
        };
        if keys.is_empty() && !new_breaker {
            kept.push(json!(config.name));
        } else {
            changed.push(json!({
                "name": config.name,
                "keys": keys,
                "breaker": if new_breaker { "new" } else { "kept" },
                "connections": if same_place { "kept" } else { "new" },
            }));
        }
        upstreams.push(Upstream {
            breaker,
            shared: was.shared,
            limit,
            config,
            conn,
        });
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let removed: Vec<Value> = old
        .upstreams
        .iter()
        .filter(|u| !upstreams.iter().any(|n| n.config.name == u.config.name))
        .map(|u| json!(u.config.name))
        .collect();
    Ok(Plan {
        upstreams,
        summary: json!({
            "kept": kept,
            "changed": changed,
            "added": added,
            "removed": removed,
        }),
        pending,
    })
}

impl Plan {
    /// Applies the in-place changes to parts the running config shares with the next:
    /// new concurrency limits, and the shadow switch of a kept breaker (rule 20's
    /// `set_shadow`, bounded in time). Returns the switches that failed, as warnings.
    pub async fn commit(&mut self) -> Vec<String> {
        let mut warnings = Vec::new();
        for change in self.pending.drain(..) {
            match change {
                InPlace::Resize(limit, config) => limit.resize(config),
                InPlace::Operator { from, to, shadow } => {
                    if let Err(e) = carry(&from, &to, shadow).await {
                        warnings.push(format!(
                            "{}: the operator's override could not be carried to the new breaker: {e}",
                            from.name()
                        ));
                    }
                }
                InPlace::Shadow(breaker, on) => {
                    let switched = tokio::time::timeout(
                        breakerbox_admin::DEFAULT_TIMEOUT,
                        breaker.set_shadow(on),
                    )
                    .await;
                    let name = breaker.name().to_string();
                    match switched {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => warnings.push(format!(
                            "{name}: the shadow switch could not be set: {e}"
                        )),
                        Err(_) => warnings.push(format!(
                            "{name}: the shadow switch timed out; switch it with POST /breakers/{name}/shadow"
                        )),
                    }
                }
            }
        }
        warnings
    }
}

/// Carries what an operator decided on `from` to `to`, its replacement: a forced open or
/// a disable (timed: for what is left of it, the snapshot's `override_left`), and with
/// `shadow` the shadow switch.
async fn carry(from: &DynBreaker, to: &DynBreaker, shadow: bool) -> Result<(), String> {
    let bound = breakerbox_admin::DEFAULT_TIMEOUT;
    let snapshot = match tokio::time::timeout(bound, from.snapshot()).await {
        Ok(Ok(snapshot)) => snapshot,
        Ok(Err(e)) => return Err(e.to_string()),
        Err(_) => return Err(format!("timed out after {bound:?}")),
    };
    type Operation = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<(), breakerbox::contract::DynError>> + Send>,
    >;
    let forced: Option<Operation> = match (snapshot.phase, snapshot.override_left) {
        (breakerbox::Phase::ForcedOpen, Some(left)) => Some(Box::pin(to.force_open_for(left))),
        (breakerbox::Phase::ForcedOpen, None) => Some(Box::pin(to.force_open())),
        (breakerbox::Phase::Disabled, Some(left)) => Some(Box::pin(to.disable_for(left))),
        (breakerbox::Phase::Disabled, None) => Some(Box::pin(to.disable())),
        _ => None,
    };
    if let Some(forced) = forced {
        match tokio::time::timeout(bound, forced).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err(format!("timed out after {bound:?}")),
        }
    }
    if shadow && snapshot.shadow != to.config().shadow {
        match tokio::time::timeout(bound, to.set_shadow(snapshot.shadow)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err(format!("timed out after {bound:?}")),
        }
    }
    Ok(())
}
