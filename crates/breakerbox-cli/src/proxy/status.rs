//! `/status`: every breaker's state and counters, and the recent transitions, as JSON.

use breakerbox::contract::Breaker;
use serde_json::{json, Map, Value};

use super::forward::Proxy;

fn ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The status document.
pub async fn status(proxy: &Proxy) -> Value {
    let recorder = &proxy.recorder;
    let mut breakers = Map::new();
    for u in &proxy.upstreams {
        let c = &u.config;
        let mut entry = json!({
            "upstream": format!("http://{}{}", c.authority, c.base_path),
            "route": c.route,
            "host": c.host,
            "shared": u.shared,
        });
        match super::guard::snapshot(&u.breaker).await {
            Ok(s) => {
                entry["phase"] = json!(s.phase.as_str());
                entry["generation"] = json!(s.generation);
                entry["window"] = json!({
                    "calls": s.window.calls,
                    "failures": s.window.failures,
                    "slow": s.window.slow,
                });
                entry["failure_rate"] = json!(s.failure_rate);
                entry["slow_call_rate"] = json!(s.slow_call_rate);
                entry["consecutive_failures"] = json!(s.consecutive_failures);
                entry["retry_after_ms"] = json!(s.retry_after.map(ms));
                entry["probes_in_flight"] = json!(s.probes_in_flight);
                entry["probe_successes"] = json!(s.probe_successes);
                entry["trips"] = json!(s.trips);
            }
            Err(error) => {
                entry["phase"] = json!(u.breaker.phase().as_str());
                entry["error"] = json!(error);
            }
        }
        if let Some(stats) = recorder.stats(&c.name) {
            entry["calls"] = json!({
                "success": stats.calls(breakerbox::Verdict::Success),
                "failure": stats.calls(breakerbox::Verdict::Failure),
                "ignore": stats.calls(breakerbox::Verdict::Ignore),
            });
            entry["last_judgement"] = match stats.last_judgement() {
                Some(j) => json!({
                    "verdict": j.verdict.as_str(),
                    "reason": j.reason,
                    "retry_after_ms": j.retry_after.map(ms),
                }),
                None => Value::Null,
            };
            entry["rejections"] = json!(stats.rejections());
            entry["stale_results"] = json!(stats.stale());
        }
        breakers.insert(c.name.clone(), entry);
    }
    let now = recorder.now();
    let transitions: Vec<Value> = recorder
        .recent()
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
        .collect();
    json!({
        "uptime_ms": ms(recorder.uptime()),
        "breakers": breakers,
        "transitions": transitions,
    })
}
