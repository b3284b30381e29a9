//! `breakerbox demo`: a self-contained demo. A flaky HTTP upstream on 127.0.0.1 follows a
//! script (healthy, outage, slow, recovering, healthy); groups of callers send it the same
//! steady traffic, one group through a breaker judged by the HTTP judge and one without;
//! a live view shows every second and a summary compares the groups at the end.
//! `--redis URL --nodes N` adds N nodes sharing one breaker through Redis, next to N
//! nodes with a breaker each. `--bad-node` shows one node with a broken network path
//! among healthy ones, without and with a quorum (rule 21).

mod bad_node;
mod node;
mod script;
mod summary;
mod traffic;
mod upstream;
mod view;

use breakerbox::TokioClock;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context as _;
use breakerbox::{CircuitBreaker, Config, Event, EventKind};
use breakerbox_http::{parse_duration, HttpJudge, HumanDuration};
use breakerbox_redis::RedisBreaker;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::task::JoinSet;

use crate::spec::DependencySpec;
use breakerbox::contract::{Breaker, DynBreaker};
use script::Stage;
use summary::{DemoSummary, GroupSummary};
use traffic::{Callers, Change, Group};
use upstream::Upstream;
use view::View;

/// Arguments of `breakerbox demo`.
#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    /// How long the run lasts; the upstream's script is scaled to it.
    #[arg(long, default_value = "24s", value_parser = duration_arg)]
    pub duration: Duration,
    /// Calls per second each node offers.
    #[arg(long, default_value_t = 40, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub rate: u32,
    /// Nodes per group (with --redis: nodes sharing one breaker, next to as many nodes
    /// with a breaker each).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub nodes: u32,
    /// Share a breaker between the nodes through this Redis: redis://HOST:PORT,
    /// redis+cluster://HOST:PORT,HOST:PORT (a cluster's seeds) or
    /// redis+sentinel://HOST:PORT,HOST:PORT/SERVICE (a primary behind Sentinels).
    #[arg(long, value_name = "URL")]
    pub redis: Option<String>,
    /// Key prefix of the shared breaker in Redis.
    #[arg(long, default_value = "bb:demo:")]
    pub prefix: String,
    /// A dependency config (`[breaker]`, `[judge]`) instead of the demo's.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// How long a caller waits for an answer.
    #[arg(long, default_value = "1s", value_parser = duration_arg)]
    pub timeout: Duration,
    /// Print the summary as JSON (the live view still goes to stdout first).
    #[arg(long)]
    pub json: bool,
    /// Show one node with a broken network path to a healthy upstream, among nodes that
    /// share a breaker through Redis (--redis, else a redis-server the demo starts):
    /// first without a quorum (the fleet trips), then with one (only that node opens).
    /// The quorum is the config's, at least 2; at least 3 nodes. Without --config the
    /// breaker trips when a quarter of the window fails: less than the one node in three
    /// whose calls all fail.
    #[arg(long)]
    pub bad_node: bool,
}

fn duration_arg(text: &str) -> Result<Duration, String> {
    match parse_duration(text) {
        Some(d) if d >= Duration::from_secs(1) => Ok(d),
        Some(_) => Err("at least 1s".to_owned()),
        None => Err(format!("invalid duration \"{text}\" (e.g. 6s, 1m)")),
    }
}

/// The demo's breaker when no config is given: trips on 5 failures in a row or half of
/// the last 20 calls, stays open a twelfth of the run, closes after 3 good probes, then
/// ramps from 10% of the calls to all of them over a tenth of the run (rule 23).
fn default_config(total: Duration) -> anyhow::Result<Config> {
    let recovery = (total / 12).clamp(Duration::from_millis(250), Duration::from_secs(5));
    Ok(Config::builder()
        .consecutive_failures(5)
        .failure_rate(0.5)
        .count_window(20)
        .min_calls(10)
        .recovery_timeout(recovery)
        .max_probes(1)
        .required_successes(3)
        .half_open_timeout(Duration::from_secs(3))
        .ramp(
            0.1,
            (total / 10).clamp(Duration::from_millis(500), Duration::from_secs(10)),
        )
        .build()?)
}

fn default_judge() -> anyhow::Result<HttpJudge> {
    Ok(HttpJudge::builder()
        .slow_threshold(Duration::from_millis(300))
        .build()?)
}

/// Runs `breakerbox demo`.
pub fn run(args: DemoArgs) -> anyhow::Result<()> {
    let (config, judge) = match &args.config {
        Some(path) => {
            let spec = DependencySpec::from_file(path)?;
            let in_file = || format!("in {}", path.display());
            (
                spec.config().with_context(in_file)?,
                spec.http_judge().with_context(in_file)?,
            )
        }
        None if args.bad_node => (bad_node::default_config(args.duration)?, default_judge()?),
        None => (default_config(args.duration)?, default_judge()?),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    if args.bad_node {
        return runtime.block_on(bad_node::run(&args, config, judge));
    }
    runtime.block_on(demo(args, config, judge))
}

fn describe(config: &Config) -> String {
    let mut rules = Vec::new();
    if let Some(n) = config.consecutive_failures {
        rules.push(format!("{n} failures in a row"));
    }
    if let Some(rule) = config.rate {
        if let Some(rate) = rule.failure_rate {
            rules.push(format!(
                "{}% of the window failing",
                rate.ppm() as f64 / 10_000.0
            ));
        }
    }
    let ramp = match config.ramp {
        Some(r) => format!(
            "; then {}% of calls, growing to all over {}",
            r.start.ppm() / 10_000,
            HumanDuration(r.duration)
        ),
        None => String::new(),
    };
    format!(
        "breaker: trips on {}; open {}; {} probe success(es) close it{ramp}",
        rules.join(" or "),
        HumanDuration(config.recovery_timeout),
        config.required_successes
    )
}

fn change_from(node: usize, transition: &breakerbox::model::Transition) -> Change {
    Change {
        at: TokioClock::new().instant(),
        node,
        to: transition.to,
        reason: transition.reason,
        generation: transition.generation,
    }
}

async fn local_group(
    name: &str,
    index: usize,
    nodes: usize,
    config: &Config,
) -> anyhow::Result<Group> {
    let changes = Arc::new(Mutex::new(Vec::new()));
    let mut list = Vec::new();
    for node in 0..nodes {
        let log = changes.clone();
        let breaker = CircuitBreaker::builder()
            .config(config.clone())
            .name(format!("demo-node-{node}"))
            .listener(move |event: &Event<'_>| {
                if let EventKind::Transition(t) = event.kind {
                    log.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(change_from(node, &t));
                }
            })
            .build()?;
        list.push(Some(DynBreaker::new(breaker)));
    }
    Ok(Group::new(name, index, false, list, changes))
}

async fn redis_group(
    args: &DemoArgs,
    url: &str,
    index: usize,
    config: &Config,
) -> anyhow::Result<Group> {
    let changes = Arc::new(Mutex::new(Vec::new()));
    // The URL may hold a password: printed redacted only.
    let shown = crate::redact::url(url);
    let name = format!("demo-{}", std::process::id());
    let mut list = Vec::new();
    for node in 0..args.nodes as usize {
        let log = changes.clone();
        let breaker = RedisBreaker::builder(url, name.clone())
            .config(config.clone())
            .prefix(args.prefix.clone())
            .ttl(Duration::from_secs(300))
            .timeout(Duration::from_millis(500))
            .listener(move |event: &breakerbox::Event<'_>| {
                if let breakerbox::EventKind::Transition(t) = &event.kind {
                    log.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(change_from(node, t));
                }
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
        list.push(Some(DynBreaker::new(breaker)));
    }
    Ok(Group::new(
        format!("shared breaker, {} nodes (redis)", args.nodes),
        index,
        true,
        list,
        changes,
    ))
}

async fn demo(args: DemoArgs, config: Config, judge: HttpJudge) -> anyhow::Result<()> {
    let total = args.duration;
    let nodes = args.nodes as usize;
    // The groups first (Redis may take a moment); the clock starts once they are ready.
    let mut groups: Vec<Group> = Vec::new();
    if let Some(url) = &args.redis {
        groups.push(redis_group(&args, url, 0, &config).await?);
        groups.push(
            local_group(
                &format!("a breaker per node, {nodes} nodes"),
                1,
                nodes,
                &config,
            )
            .await?,
        );
    } else {
        let name = if nodes == 1 {
            "with breaker".to_owned()
        } else {
            format!("with a breaker per node, {nodes} nodes")
        };
        groups.push(local_group(&name, 0, nodes, &config).await?);
    }
    let bare = groups.len();
    groups.push(Group::new(
        "without breaker",
        bare,
        false,
        vec![None; nodes],
        Arc::new(Mutex::new(Vec::new())),
    ));
    let groups: Vec<Arc<Group>> = groups.into_iter().map(Arc::new).collect();
    for g in &groups {
        g.changes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    let start = TokioClock::new().instant();
    let mut upstream = Upstream::start(groups.len(), start, total)
        .await
        .context("cannot start the demo upstream on 127.0.0.1")?;
    let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
    connector.set_nodelay(true);
    let client = Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(5))
        .build(connector);
    let uri: http::Uri = format!("http://{}/", upstream.addr)
        .parse()
        .context("upstream address")?;
    let callers = Callers {
        client,
        uri,
        judge: Arc::new(judge),
        timeout: args.timeout,
    };

    let tty = std::io::stdout().is_terminal();
    let title = vec![
        format!(
            "breakerbox demo: a flaky upstream on {}, {} calls/s per node, {} node(s) per group, {}",
            upstream.addr,
            args.rate,
            nodes,
            HumanDuration(total)
        ),
        format!("upstream script: {}", Stage::describe(total)),
        describe(&config),
    ];
    let mut view = View::new(tty, title, &groups);
    view.start();

    let end = start + total;
    let calls = Arc::new(Mutex::new(JoinSet::new()));
    let mut drivers = JoinSet::new();
    for g in &groups {
        for node in 0..g.nodes.len() {
            let callers = callers.clone();
            let group = g.clone();
            let calls = calls.clone();
            drivers.spawn(async move {
                callers
                    .drive(group, node, args.rate, start, end, calls)
                    .await
            });
        }
    }

    let mut interrupted = false;
    let mut second = 0u64;
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        let next = (start + Duration::from_secs(second + 1)).min(end);
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = &mut ctrl_c => {
                interrupted = true;
            }
        }
        // The row is labelled with the stage in the middle of its second.
        let row_start = Duration::from_secs(second);
        let row_end = (TokioClock::new().instant() - start).max(row_start);
        let stage = Stage::at((row_start + row_end) / 2, total);
        let counts: Vec<_> = groups.iter().map(|g| g.take_second()).collect();
        second += 1;
        view.row(second, stage, &groups, &counts);
        if interrupted || TokioClock::new().instant() >= end {
            break;
        }
    }
    drivers.abort_all();
    let ran = start.elapsed().min(total);

    // Let the calls in flight finish (each is bounded by the callers' timeout).
    let mut in_flight = std::mem::take(&mut *calls.lock().unwrap_or_else(PoisonError::into_inner));
    let grace = tokio::time::sleep(args.timeout + Duration::from_millis(500));
    tokio::pin!(grace);
    loop {
        tokio::select! {
            joined = in_flight.join_next() => if joined.is_none() { break },
            _ = &mut grace => { in_flight.abort_all(); break }
        }
    }
    for g in &groups {
        for node in g.nodes.iter().flatten() {
            node.flush().await;
        }
    }
    upstream.stop();

    let recovery = Stage::recovery_at(total);
    let summary = DemoSummary {
        duration_s: ran.as_secs_f64(),
        interrupted,
        recovered_at_s: recovery.as_secs_f64(),
        upstream_recovered: ran >= recovery,
        rate: args.rate,
        groups: groups
            .iter()
            .map(|g| {
                let reached = upstream
                    .counts
                    .while_failing
                    .get(g.index)
                    .map_or(0, |c| c.load(std::sync::atomic::Ordering::Relaxed));
                summary::summarize(g, reached, start, ran, recovery)
            })
            .collect::<Vec<GroupSummary>>(),
    };
    if args.json {
        crate::emit(&format!("{}\n", serde_json::to_string_pretty(&summary)?))?;
    } else {
        crate::emit(&format!("\n{}\n", summary::render(&summary)))?;
    }
    Ok(())
}
