//! `breakerbox demo --bad-node`: why a shared breaker wants a quorum (rule 21). A healthy
//! upstream on 127.0.0.1 and several nodes sharing one breaker through Redis; one node's
//! network path is broken (its calls go to a loopback port nobody listens on, so every
//! call fails with "connection refused"). The same traffic runs twice: without a quorum
//! (the bad node's failures trip the whole fleet) and with one (the bad node only opens
//! locally; the fleet keeps serving). Uses `--redis URL` if given, else starts a
//! `redis-server` of its own on a free loopback port.

use breakerbox::TokioClock;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context as _;
use breakerbox::contract::{Breaker, DynBreaker};
use breakerbox::model::TransitionReason;
use breakerbox::{Config, EventKind, Phase};
use breakerbox_http::{HttpJudge, HumanDuration};
use breakerbox_redis::RedisBreaker;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde::Serialize;
use tokio::task::JoinSet;

use super::traffic::{Callers, Counts, Group};
use super::upstream::Upstream;
use super::DemoArgs;

/// The breaker of `--bad-node` when no config is given: trips when a quarter of the last
/// 40 calls failed (one node in three failing is more), or on 5 failures in a row; stays
/// open a twelfth of the run; 3 good probes close it.
pub fn default_config(total: Duration) -> anyhow::Result<Config> {
    let recovery = (total / 12).clamp(Duration::from_millis(250), Duration::from_secs(5));
    Ok(Config::builder()
        .consecutive_failures(5)
        .failure_rate(0.25)
        .count_window(40)
        .min_calls(20)
        .recovery_timeout(recovery)
        .max_probes(1)
        .required_successes(3)
        .half_open_timeout(Duration::from_secs(3))
        .build()?)
}

/// How one run went.
#[derive(Debug, Serialize)]
pub struct Round {
    /// The breaker's quorum (1: none).
    pub quorum: u32,
    /// Calls the healthy nodes offered, and how many of them were served (judged ok).
    pub healthy_offered: u64,
    /// Healthy nodes' calls judged successful.
    pub healthy_ok: u64,
    /// Healthy nodes' calls the breaker rejected.
    pub healthy_rejected: u64,
    /// The bad node's calls that went out (and failed).
    pub bad_sent: u64,
    /// The bad node's calls rejected (locally, or by the shared breaker).
    pub bad_rejected: u64,
    /// Times the shared breaker tripped (closed to open).
    pub fleet_trips: u64,
    /// Local open phases of the bad node (rule 21).
    pub local_opens: u64,
}

impl Round {
    fn healthy_served(&self) -> f64 {
        if self.healthy_offered == 0 {
            return 0.0;
        }
        self.healthy_ok as f64 / self.healthy_offered as f64
    }
}

/// The comparison `--json` prints.
#[derive(Debug, Serialize)]
pub struct BadNodeSummary {
    /// Nodes sharing the breaker (node 1 is the bad one).
    pub nodes: usize,
    /// Seconds each run lasted.
    pub round_s: f64,
    /// Without the quorum, then with it.
    pub rounds: Vec<Round>,
}

/// A redis-server this demo started (stopped on drop).
struct OwnRedis {
    child: Child,
    url: String,
}

impl OwnRedis {
    fn start() -> anyhow::Result<OwnRedis> {
        let port = TcpListener::bind(("127.0.0.1", 0))
            .and_then(|l| l.local_addr())
            .context("no free loopback port for redis-server")?
            .port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start redis-server (install it, or give --redis URL)")?;
        let own = OwnRedis {
            child,
            url: format!("redis://127.0.0.1:{port}"),
        };
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        for _ in 0..250 {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
                return Ok(own);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        anyhow::bail!("redis-server did not start listening on {addr}")
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback address nobody listens on: a broken path (connection refused).
fn broken_address() -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind(("127.0.0.1", 0)).context("no free loopback port")?;
    let addr = listener.local_addr()?;
    drop(listener);
    Ok(addr)
}

/// Runs `breakerbox demo --bad-node`.
pub async fn run(args: &DemoArgs, config: Config, judge: HttpJudge) -> anyhow::Result<()> {
    let own;
    let url = match &args.redis {
        Some(url) => url.clone(),
        None => {
            own = OwnRedis::start()?;
            own.url.clone()
        }
    };
    let nodes = (args.nodes as usize).max(3);
    let quorum = config.quorum.max(2);
    let round_len = (args.duration / 2).max(Duration::from_secs(1));
    let mut upstream = Upstream::start_healthy(2)
        .await
        .context("cannot start the demo upstream on 127.0.0.1")?;
    let client = Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(5))
        .build_http();
    let healthy = Callers {
        client: client.clone(),
        uri: format!("http://{}/", upstream.addr).parse()?,
        judge: Arc::new(judge),
        timeout: args.timeout,
    };
    let broken = Callers {
        uri: format!("http://{}/", broken_address()?).parse()?,
        ..healthy.clone()
    };
    crate::emit(&format!(
        "breakerbox demo --bad-node: {nodes} nodes share one breaker through redis ({}), \
         {} calls/s each; the upstream on {} is healthy, but node 1's path to it is broken \
         (connection refused)\n{}\n",
        crate::redact::url(&url),
        args.rate,
        upstream.addr,
        super::describe(&config),
    ))?;
    let mut rounds = Vec::new();
    for k in [1, quorum] {
        let mut c = config.clone();
        c.quorum = k;
        let label = if k == 1 {
            "without a quorum".to_owned()
        } else {
            format!("with a quorum of {k} nodes")
        };
        crate::emit(&format!(
            "running {} {label} ...\n",
            HumanDuration(round_len)
        ))?;
        let round = round(args, &url, c, nodes, round_len, (&healthy, &broken)).await?;
        rounds.push(round);
    }
    upstream.stop();
    let summary = BadNodeSummary {
        nodes,
        round_s: round_len.as_secs_f64(),
        rounds,
    };
    if args.json {
        crate::emit(&format!("{}\n", serde_json::to_string_pretty(&summary)?))?;
    } else {
        crate::emit(&format!("\n{}\n", render(&summary)))?;
    }
    Ok(())
}

/// One run of `round_len` with `config`: node 0 calls through the broken path.
async fn round(
    args: &DemoArgs,
    url: &str,
    config: Config,
    nodes: usize,
    round_len: Duration,
    (healthy, broken): (&Callers, &Callers),
) -> anyhow::Result<Round> {
    let trips = Arc::new(AtomicU64::new(0));
    let local_opens = Arc::new(AtomicU64::new(0));
    let name = format!("demo-bad-node-{}-q{}", std::process::id(), config.quorum);
    let shown = crate::redact::url(url);
    let mut breakers = Vec::new();
    for node in 0..nodes {
        let (trips, local_opens) = (trips.clone(), local_opens.clone());
        let breaker = RedisBreaker::builder(url, name.clone())
            .config(config.clone())
            .node_id(node as u64 + 1)
            .prefix(args.prefix.clone())
            .ttl(Duration::from_secs(300))
            .timeout(Duration::from_millis(500))
            .listener(move |event: &breakerbox::Event<'_>| match &event.kind {
                // Only the node whose script call made a transition reports it: once each.
                EventKind::Transition(t)
                    if t.from == Phase::Closed
                        && matches!(t.reason, TransitionReason::Tripped(_)) =>
                {
                    trips.fetch_add(1, Ordering::Relaxed);
                }
                EventKind::LocalOpened { .. } => {
                    local_opens.fetch_add(1, Ordering::Relaxed);
                }
                _ => {}
            })
            .build()
            .await
            .with_context(|| format!("cannot set up the shared breaker on {shown}"))?;
        if breaker.is_degraded() {
            anyhow::bail!("cannot reach redis at {shown}");
        }
        if node == 0 {
            breaker
                .reset()
                .await
                .with_context(|| format!("cannot reset the demo breaker on {shown}"))?;
        }
        breakers.push(Some(DynBreaker::new(breaker)));
    }
    let rest = breakers.split_off(1);
    let changes = Arc::new(Mutex::new(Vec::new()));
    let bad = Arc::new(Group::new("bad node", 0, true, breakers, changes.clone()));
    let good = Arc::new(Group::new("healthy nodes", 1, true, rest, changes));
    let start = TokioClock::new().instant();
    let end = start + round_len;
    let calls = Arc::new(Mutex::new(JoinSet::new()));
    let mut drivers = JoinSet::new();
    for (group, callers) in [(&bad, broken), (&good, healthy)] {
        for node in 0..group.nodes.len() {
            let (group, callers, calls) = (group.clone(), callers.clone(), calls.clone());
            let rate = args.rate;
            drivers.spawn(async move { callers.drive(group, node, rate, start, end, calls).await });
        }
    }
    tokio::time::sleep_until(end).await;
    drivers.abort_all();
    let mut in_flight = std::mem::take(&mut *calls.lock().unwrap_or_else(PoisonError::into_inner));
    let grace = tokio::time::sleep(args.timeout + Duration::from_millis(500));
    tokio::pin!(grace);
    loop {
        tokio::select! {
            joined = in_flight.join_next() => if joined.is_none() { break },
            _ = &mut grace => { in_flight.abort_all(); break }
        }
    }
    for node in bad.nodes.iter().chain(good.nodes.iter()).flatten() {
        node.flush().await;
    }
    let (b, g): (Counts, Counts) = (bad.total(), good.total());
    Ok(Round {
        quorum: config.quorum,
        healthy_offered: g.offered,
        healthy_ok: g.ok,
        healthy_rejected: g.rejected,
        bad_sent: b.sent,
        bad_rejected: b.rejected,
        fleet_trips: trips.load(Ordering::Relaxed),
        local_opens: local_opens.load(Ordering::Relaxed),
    })
}

/// A row of the comparison: its label and how a run fills its cell.
type Row = (&'static str, fn(&Round) -> String);

fn render(summary: &BadNodeSummary) -> String {
    let mut out = format!(
        "{:<34}{:>20}{:>20}\n",
        "",
        "without quorum",
        summary
            .rounds
            .get(1)
            .map_or("with quorum".to_owned(), |r| format!(
                "with quorum {}",
                r.quorum
            ))
    );
    let rows: [Row; 5] = [
        ("healthy nodes' calls served", |r| {
            format!("{:.1}%", 100.0 * r.healthy_served())
        }),
        ("healthy nodes' calls rejected", |r| {
            r.healthy_rejected.to_string()
        }),
        ("shared breaker trips", |r| r.fleet_trips.to_string()),
        ("bad node: local opens", |r| r.local_opens.to_string()),
        ("bad node: calls rejected / sent", |r| {
            format!("{} / {}", r.bad_rejected, r.bad_sent)
        }),
    ];
    for (label, cell) in rows {
        out.push_str(&format!("{label:<34}"));
        for r in &summary.rounds {
            out.push_str(&format!("{:>20}", cell(r)));
        }
        out.push('\n');
    }
    if let [without, with] = summary.rounds.as_slice() {
        out.push_str(&format!(
            "\nWithout a quorum one node with a broken path tripped the whole fleet {} time(s) \
             and the healthy nodes served {:.1}% of their calls; with a quorum of {} the bad \
             node protected itself ({} local open(s)), the fleet tripped {} time(s) and the \
             healthy nodes served {:.1}%.",
            without.fleet_trips,
            100.0 * without.healthy_served(),
            with.quorum,
            with.local_opens,
            with.fleet_trips,
            100.0 * with.healthy_served(),
        ));
    }
    out
}
