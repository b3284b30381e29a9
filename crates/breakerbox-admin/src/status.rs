//! `/status`: every breaker's snapshot and config, the recent transitions, as JSON.

use std::time::Duration;

use breakerbox::contract::{Breaker, DynBreaker};
use breakerbox::Snapshot;
use futures_util::stream::{self, StreamExt};
use serde_json::{json, Map, Value};

use crate::source::Listed;
use crate::transitions::TransitionLog;

/// How many snapshots are taken at once (each may be a round trip to a shared store).
const CONCURRENT_SNAPSHOTS: usize = 16;

/// `d` in whole milliseconds.
pub(crate) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The status document of `listed`.
pub(crate) async fn document(
    listed: Vec<Listed>,
    log: Option<&TransitionLog>,
    uptime: Duration,
    timeout: Duration,
) -> Value {
    let entries: Vec<(String, Value)> = stream::iter(listed)
        .map(|listed| async move {
            let snapshot = snapshot(listed.breaker(), timeout).await;
            (listed.name().to_string(), entry(&listed, snapshot))
        })
        .buffered(CONCURRENT_SNAPSHOTS)
        .collect()
        .await;
    let breakers: Map<String, Value> = entries.into_iter().collect();
    let transitions: Vec<Value> = match log {
        Some(log) => {
            let now = log.now();
            log.recent()
                .into_iter()
                .map(|r| {
                    json!({
                        "breaker": r.breaker,
                        "from": r.transition.from.as_str(),
                        "to": r.transition.to.as_str(),
                        "reason": r.transition.reason.as_str(),
                        "generation": r.transition.generation,
                        "age_ms": ms(now.saturating_sub(r.at).as_duration()),
                    })
                })
                .collect()
        }
        None => Vec::new(),
    };
    json!({
        "uptime_ms": ms(uptime),
        "breakers": breakers,
        "transitions": transitions,
    })
}

/// The breaker's snapshot, bounded in time; the error's text (with its sources) if not.
pub(crate) async fn snapshot(breaker: &DynBreaker, timeout: Duration) -> Result<Snapshot, String> {
    match tokio::time::timeout(timeout, breaker.snapshot()).await {
        Ok(Ok(snapshot)) => Ok(snapshot),
        Ok(Err(error)) => Err(chain(&error)),
        Err(_) => Err(format!("timed out after {timeout:?}")),
    }
}

/// One breaker's entry: its snapshot (or, when that failed, the phase this process knows
/// and the error), its config with the keys of a config file, then its details.
fn entry(listed: &Listed, snapshot: Result<Snapshot, String>) -> Value {
    let breaker = listed.breaker();
    let mut entry = Map::new();
    entry.insert("name".into(), json!(listed.name()));
    match snapshot {
        Ok(s) => {
            entry.insert("phase".into(), json!(s.phase.as_str()));
            entry.insert("generation".into(), json!(s.generation));
            entry.insert(
                "window".into(),
                json!({
                    "calls": s.window.calls,
                    "failures": s.window.failures,
                    "slow": s.window.slow,
                }),
            );
            entry.insert("failure_rate".into(), json!(s.failure_rate));
            entry.insert("slow_call_rate".into(), json!(s.slow_call_rate));
            entry.insert("consecutive_failures".into(), json!(s.consecutive_failures));
            entry.insert("retry_after_ms".into(), json!(s.retry_after.map(ms)));
            entry.insert("probes_in_flight".into(), json!(s.probes_in_flight));
            entry.insert("probe_successes".into(), json!(s.probe_successes));
            entry.insert("trips".into(), json!(s.trips));
            entry.insert("stale_results".into(), json!(s.stale_results));
            entry.insert("shadow".into(), json!(s.shadow));
            entry.insert("shadow_rejections".into(), json!(s.shadow_rejections));
            entry.insert("local_open_ms".into(), json!(s.local_open.map(ms)));
            entry.insert("override_left_ms".into(), json!(s.override_left.map(ms)));
            entry.insert("ramp".into(), json!(s.ramp.map(|r| r.as_f64())));
        }
        Err(error) => {
            entry.insert("phase".into(), json!(breaker.phase().as_str()));
            entry.insert("error".into(), json!(error));
        }
    }
    entry.insert(
        "config".into(),
        serde_json::to_value(breaker.config()).unwrap_or(Value::Null),
    );
    for (key, value) in listed.details() {
        entry.insert(key.clone(), value.clone());
    }
    Value::Object(entry)
}

/// `error` and every source under it, one after the other.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(source) = next {
        text.push_str(": ");
        text.push_str(&source.to_string());
        next = source.source();
    }
    text
}
