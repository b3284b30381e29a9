//! Active health checks (rule 24): for an upstream with `health`, while its breaker is
//! open or half-open, a checker on the main thread probes the health path instead of
//! letting real requests probe a dependency that may not take a retry well. A check takes
//! a probe permit through the breaker's contract (so the same rules count it, in memory
//! or in Redis), is judged by the upstream's judge, and records its verdict on the
//! permit; real requests are answered 503 `health probing` until the breaker closes.
//!
//! One checker per upstream name, started and stopped by [`supervise`] as reloads add and
//! remove `health`. It reads its upstream from the running config before every check, so
//! a reload that changes `health` retunes it, and the breaker a reload keeps is the one
//! it checks.

mod check;
mod stats;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use breakerbox::contract::{Breaker, BreakerPermit, DynBreaker};
use breakerbox::Phase;
use http::{Response, StatusCode};
use tokio::task::JoinHandle;

use super::body::ProxyBody;
use super::config::HealthConfig;
use super::config::Protocol;
use super::forward::Upstream;
use super::live::Live;
use super::metrics::Recorder;
use super::pool::Pool;
use super::pool_h2::H2Upstream;
use super::reply;
use check::Connection;

pub use stats::{HealthStats, LastCheck, RESULTS};

/// The reason real requests are rejected with while the health check probes.
pub const PROBING: &str = "health probing";

/// The shortest wait between two looks at the breaker (a `retry_after` of zero).
const MIN_WAIT: Duration = Duration::from_millis(5);

/// Whether real requests to `upstream` are held back now: it has a health check, its
/// breaker is half-open, and it enforces (in shadow mode nothing is rejected).
pub fn probing(upstream: &Upstream) -> bool {
    upstream.config.health.is_some()
        && !upstream.breaker.config().shadow
        && upstream.breaker.phase() == Phase::HalfOpen
}

/// Whether a permit `upstream`'s breaker gave a real request is a probe that only the
/// health check may use (then it is released unrecorded and the request rejected).
pub fn reserved(upstream: &Upstream, permit: &impl BreakerPermit) -> bool {
    upstream.config.health.is_some() && !upstream.breaker.config().shadow && permit.is_probe()
}

/// The 503 a real request gets while the health check probes, counted as a rejection
/// (never as an upstream failure); `Retry-After` is the check interval.
pub fn rejection(upstream: &Upstream, recorder: &Recorder) -> Response<ProxyBody> {
    let name = upstream.config.name.as_str();
    if let Some(stats) = recorder.stats(name) {
        stats.health.rejected();
    }
    let interval = upstream
        .config
        .health
        .as_ref()
        .map_or(Duration::from_secs(1), |h| h.interval);
    let mut response = reply::json(
        StatusCode::SERVICE_UNAVAILABLE,
        &serde_json::json!({
            "error": "circuit_open",
            "upstream": name,
            "retry_after_ms": u64::try_from(interval.as_millis()).unwrap_or(u64::MAX),
            "reason": PROBING,
        }),
    );
    let secs = interval.as_secs() + u64::from(interval.subsec_nanos() > 0);
    response
        .headers_mut()
        .insert(http::header::RETRY_AFTER, secs.max(1).into());
    response
}

/// Runs a checker for every upstream with `health` in the running config: a reload that
/// adds one starts its checker, one that removes it (or its upstream) stops it (a check
/// in flight then gives its probe permit back unrecorded). Runs until the process ends.
/// Only this task starts and stops checkers, so a quick remove-and-add cannot leave an
/// upstream unchecked.
pub async fn supervise(live: Arc<Live>) {
    let mut published = live.subscribe();
    let mut checkers: HashMap<String, JoinHandle<()>> = HashMap::new();
    loop {
        let proxy = live.current();
        let checked = |name: &str| {
            proxy
                .upstreams
                .iter()
                .any(|u| u.config.name == name && u.config.health.is_some())
        };
        checkers.retain(|name, task| {
            let keep = checked(name);
            if !keep {
                task.abort();
            }
            keep
        });
        for u in proxy.upstreams.iter().filter(|u| u.config.health.is_some()) {
            if !checkers.contains_key(&u.config.name) {
                let task = tokio::spawn(checker(live.clone(), u.config.name.clone()));
                checkers.insert(u.config.name.clone(), task);
            }
        }
        drop(proxy);
        if published.changed().await.is_err() {
            return;
        }
    }
}

/// What one round of a checker needs of its upstream, copied out of the running config
/// (a checker holds no config: a removed upstream drains as without it).
struct Target {
    health: HealthConfig,
    breaker: DynBreaker,
    judge: breakerbox_http::HttpJudge,
    authority: http::uri::Authority,
    conn: u64,
    tls: Option<Arc<super::tls::UpstreamTls>>,
    protocol: Protocol,
    keepalive: Option<super::config::Keepalive>,
    recorder: Arc<Recorder>,
}

impl Target {
    /// `name` in the running config, while it has a health check.
    fn current(live: &Live, name: &str) -> Option<Target> {
        let proxy = live.current();
        let u = proxy.upstreams.iter().find(|u| u.config.name == name)?;
        Some(Target {
            health: u.config.health.clone()?,
            breaker: u.breaker.clone(),
            judge: u.config.judge.clone(),
            authority: u.config.authority.clone(),
            conn: u.conn,
            tls: u.config.tls.clone(),
            protocol: u.config.protocol,
            keepalive: u.config.keepalive,
            recorder: proxy.recorder.clone(),
        })
    }
}

/// Checks upstream `name` until the supervisor stops it.
async fn checker(live: Arc<Live>, name: String) {
    let mut published = live.subscribe();
    // The checker's own connections (the worker threads' pools are theirs), renewed when
    // a reload gives the upstream another address or TLS settings.
    let mut cached: Option<(u64, Connection)> = None;
    loop {
        let Some(target) = Target::current(&live, &name) else {
            // Gone from the config just published: the supervisor stops this checker.
            if published.changed().await.is_err() {
                return;
            }
            continue;
        };
        let same = |(conn, connection): &(u64, Connection)| {
            *conn == target.conn && connection.protocol() == target.protocol
        };
        if !cached.as_ref().is_some_and(same) {
            let connection = match target.protocol {
                Protocol::Http1 => {
                    Connection::Http1(Arc::new(Pool::new(vec![(target.conn, target.tls.clone())])))
                }
                Protocol::Http2 => Connection::Http2(H2Upstream::standalone(
                    target.conn,
                    target.tls.clone(),
                    target.keepalive,
                )),
            };
            cached = Some((target.conn, connection));
        }
        let Some((_, pool)) = &cached else { return };
        let wait = round(&name, &target, pool).await;
        drop(target);
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            // A reload: look at the new config at once.
            changed = published.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}

/// One look at the breaker, and a check when it is due; answers how long to wait before
/// the next look.
async fn round(name: &str, target: &Target, pool: &Connection) -> Duration {
    let interval = target.health.interval;
    let breaker = &target.breaker;
    // Closed (or disabled): real requests are the calls; nothing is checked.
    if matches!(breaker.phase(), Phase::Closed | Phase::Disabled) || breaker.config().shadow {
        return interval;
    }
    let stats = || target.recorder.stats(name).map(|s| &s.health);
    let permit = match breaker.acquire().await {
        Ok(permit) => permit,
        Err(open) => {
            // Open: the cool-down governs; wait for its end (bounded by the interval, as
            // another node or an operator may change the phase). Half-open with every
            // slot taken: the next check comes after an interval.
            if open.phase() == Phase::HalfOpen {
                if let Some(s) = stats() {
                    s.skipped();
                }
            }
            return open
                .retry_after()
                .map_or(interval, |left| left.min(interval))
                .max(MIN_WAIT);
        }
    };
    if !permit.is_probe() {
        // Closed after all (another node's probes closed it): real requests flow.
        drop(permit);
        return interval;
    }
    let timeout = permit
        .deadline()
        .map_or(target.health.timeout, |d| d.min(target.health.timeout));
    let checked = check::check(
        pool,
        &target.authority,
        &target.health,
        &target.judge,
        breaker,
        timeout,
    )
    .await;
    let judgement = checked.judgement;
    permit
        .record_with_retry_hint(judgement.verdict, checked.latency, judgement.retry_after)
        .await;
    let phase = breaker.phase().as_str();
    eprintln!(
        "breakerbox proxy: health check of {name}: {} ({}), breaker now {phase}",
        judgement.verdict.as_str(),
        judgement.reason,
    );
    if let Some(s) = stats() {
        s.checked(LastCheck {
            judgement,
            status: checked.status,
            latency_ms: u64::try_from(checked.latency.as_millis()).unwrap_or(u64::MAX),
            phase,
        });
    }
    interval
}

/// The `health` of `/status`: the check's settings, its counts and its last result
/// (`null` without a health check).
pub fn status(config: &super::config::UpstreamConfig, stats: &HealthStats) -> serde_json::Value {
    let Some(health) = &config.health else {
        return serde_json::Value::Null;
    };
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let checks: serde_json::Map<String, serde_json::Value> = RESULTS
        .iter()
        .zip(stats.checks())
        .map(|(r, n)| (r.to_string(), n.into()))
        .collect();
    serde_json::json!({
        "path": health.path.as_str(),
        "method": health.method.as_str(),
        "interval_ms": ms(health.interval),
        "timeout_ms": ms(health.timeout),
        "checks": checks,
        "rejections": stats.rejections(),
        "last": stats.last().map(|last| serde_json::json!({
            "verdict": last.judgement.verdict.as_str(),
            "reason": last.judgement.reason,
            "status": last.status,
            "latency_ms": last.latency_ms,
            "phase": last.phase,
        })),
    })
}
