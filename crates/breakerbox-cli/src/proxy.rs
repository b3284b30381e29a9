//! `breakerbox proxy`: a reverse proxy with a circuit breaker per upstream, an admin
//! listener (status, metrics, dashboard, trip and reset), size limits, graceful
//! shutdown and reloads without losing state (SIGHUP, `POST /reload`). `--check`
//! validates a config file.

mod admin;
mod balance;
mod body;
mod capacity;
mod concurrency;
mod config;
mod download;
mod draining;
mod exchange;
mod exposition;
mod forward;
mod grpc_reply;
mod guard;
mod h1;
mod h2_server;
mod headers;
mod health;
mod in_place;
mod live;
mod metrics;
mod pinning;
mod pool;
mod pool_h2;
mod probe_watch;
mod reload;
mod reply;
mod requests;
mod server;
mod target;
mod timer_anchor;
mod tls;
mod tunnel;
mod upload;
mod upstream_body;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use breakerbox_admin::PeerAddr;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::watch;

pub use config::ProxyConfig;

/// The exit code when shutdown had to cut requests in flight at the end of the grace
/// period (1 is for errors, 2 for bad arguments).
const SHUTDOWN_CUT: u8 = 3;

/// mimalloc for the whole binary: the proxy allocates a little per request on every
/// worker thread, and glibc's malloc was a visible share of its CPU time.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use forward::Proxy;
use live::{Live, Station};
use metrics::Recorder;
use reload::Reloader;

/// Arguments of `breakerbox proxy`.
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("file").required(true).args(["config", "check"])))]
pub struct ProxyArgs {
    /// Run the proxy with this config file (TOML).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Validate this config file, print every error (or "ok: N upstreams") and exit.
    #[arg(long, value_name = "FILE", conflicts_with = "config")]
    pub check: Option<PathBuf>,
}

/// Runs `breakerbox proxy`.
pub fn run(args: ProxyArgs) -> anyhow::Result<()> {
    if let Some(path) = args.check {
        let (config, _) = load(&path)?;
        println!("ok: {} upstreams", config.upstreams.len());
        return Ok(());
    }
    let Some(path) = args.config else {
        anyhow::bail!("give --config FILE or --check FILE");
    };
    let (config, root) = load(&path)?;
    // The main thread runs the admin listener, signals and Redis background work; each
    // worker thread runs its own single-threaded runtime with its own accept socket
    // (SO_REUSEPORT) and its own upstream client, so a request never hops threads, on a
    // CPU of its own under `pin_workers` (`proxy/pinning.rs`).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    runtime.block_on(serve(config, root, path))
}

/// Reads and validates a config file (what a reload does too); prints every error to
/// stderr.
fn load(path: &Path) -> anyhow::Result<(ProxyConfig, toml::Table)> {
    match reload::read(path) {
        Ok(read) => Ok(read),
        Err(errors) => {
            for e in &errors {
                eprintln!("error: {e}");
            }
            anyhow::bail!("{}: {} error(s)", path.display(), errors.len())
        }
    }
}

async fn serve(config: ProxyConfig, root: toml::Table, path: PathBuf) -> anyhow::Result<()> {
    let recorder = Arc::new(Recorder::new(
        config.upstreams.iter().map(|u| u.name.as_str()),
    ));
    let (upstreams, running, config) = reload::start(config, root, &recorder).await?;
    let live = Arc::new(Live::new(Arc::new(Proxy::new(
        upstreams,
        recorder,
        config.limits,
    ))));
    let shared_state = running.shared();
    // Rule 24: the health checkers run on this thread, with the admin listener.
    let health = tokio::spawn(health::supervise(live.clone()));
    let reloader = Arc::new(Reloader::new(path, live.clone(), running));
    // Built before any worker starts: a refused option stops the start-up cleanly.
    let admin = Arc::new(admin::Front::new(
        admin::service(live.clone(), &config.admin)?,
        reloader.clone(),
    ));
    // Before the start is announced: SIGHUP's default action ends the process.
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .context("cannot listen for SIGHUP")?;
    let limits = config.limits;

    let workers = config.workers.unwrap_or_else(default_workers);
    let sockets = bind_workers(config.listen, workers).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            anyhow::anyhow!(
                "cannot listen on {}: the address is in use (is another proxy running?)",
                config.listen
            )
        } else {
            anyhow::Error::new(e).context(format!("cannot listen on {}", config.listen))
        }
    })?;
    let local = sockets[0].local_addr()?;
    let pinned = pinning::placement(config.pin_workers, workers)?;
    let admin_listener = TcpListener::bind(config.admin.listen)
        .await
        .with_context(|| format!("cannot listen on {} (admin)", config.admin.listen))?;

    let max_connections = limits
        .max_connections
        .unwrap_or_else(capacity::default_max_connections);
    let connection_limit = Arc::new(tokio::sync::Semaphore::new(max_connections));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut threads = Vec::with_capacity(workers);
    let balances = balance::Balance::workers(sockets.len());
    // Each worker reports once it is placed and accepts: the start is announced after.
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    for (i, (socket, balance)) in sockets.into_iter().zip(balances).enumerate() {
        let ready = ready_tx.clone();
        let cpu = pinned.as_ref().and_then(|cpus| cpus.get(i).copied());
        let live = live.clone();
        let stop = stop_rx.clone();
        let connection_limit = connection_limit.clone();
        let tls = config.tls.clone();
        let thread = std::thread::Builder::new()
            .name(format!("proxy-worker-{i}"))
            .spawn(move || -> anyhow::Result<usize> {
                if let Some(cpu) = cpu {
                    if let Err(e) = pinning::pin_current_thread(cpu) {
                        eprintln!("breakerbox proxy: worker {i} not pinned to CPU {cpu}: {e}");
                    }
                }
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                runtime.block_on(async move {
                    let listener = TcpListener::from_std(socket)?;
                    let _ = ready.send(());
                    let station = Arc::new(Station::new(live));
                    tokio::spawn(station.clone().follow());
                    tokio::spawn(timer_anchor::hold());
                    Ok(server::serve(
                        listener,
                        station,
                        |s: Arc<Station>, request, peer| s.worker().handle(request, peer),
                        limits.max_header_bytes,
                        limits.idle_timeout,
                        stop,
                        limits.shutdown_grace,
                        Some(connection_limit),
                        Some(balance),
                        tls.map(|tls| tokio_rustls::TlsAcceptor::from(tls.server)),
                    )
                    .await)
                })
            })
            .context("cannot start a worker thread")?;
        threads.push(thread);
    }
    drop(ready_tx);
    for _ in 0..workers {
        if ready_rx.recv().await.is_none() {
            anyhow::bail!("a worker thread failed to start");
        }
    }
    eprintln!(
        "breakerbox proxy: listening on {}, admin on {}, {} upstream(s), {} worker(s){}, at most {} connections{}{}",
        local,
        admin_listener.local_addr()?,
        live.current().upstreams.len(),
        workers,
        match &pinned {
            Some(cpus) => format!(" on CPUs {}", pinning::describe(cpus)),
            None => String::new(),
        },
        max_connections,
        if shared_state {
            ", state in redis"
        } else {
            ""
        },
        if config.tls.is_some() { ", https" } else { "" }
    );

    let admin_task = tokio::spawn(server::serve(
        admin_listener,
        admin,
        |admin: Arc<admin::Front>, mut request, peer| async move {
            request.extensions_mut().insert(PeerAddr(peer));
            Ok(admin.handle(request).await)
        },
        16 * 1024,
        limits.idle_timeout,
        stop_rx,
        limits.shutdown_grace,
        None,
        None,
        None,
    ));

    let reloads = tokio::spawn(async move {
        while hangup.recv().await.is_some() {
            // Refusals are logged and counted by the reloader.
            let _ = reloader.reload("SIGHUP").await;
        }
    });

    shutdown_signal().await?;
    reloads.abort();
    health.abort();
    eprintln!(
        "breakerbox proxy: shutting down (grace {:?})",
        limits.shutdown_grace
    );
    let _ = stop_tx.send(true);
    let mut cut = 0usize;
    let mut failed = false;
    for thread in threads {
        // Joining blocks this thread: run it off the runtime so Redis work keeps going.
        match tokio::task::spawn_blocking(move || thread.join()).await {
            Ok(Ok(Ok(n))) => cut += n,
            _ => failed = true,
        }
    }
    admin_task.abort();
    if failed {
        return Err(crate::Fatal::new(1, "a worker thread failed during shutdown").into());
    }
    if cut > 0 {
        eprintln!("breakerbox proxy: grace period over, {cut} connection(s) cut");
        return Err(crate::Fatal::new(
            SHUTDOWN_CUT,
            format!("stopped after cutting {cut} connection(s) with requests in flight"),
        )
        .into());
    }
    eprintln!("breakerbox proxy: stopped");
    Ok(())
}

/// Two workers per CPU the process may use (its affinity and CPU quota), at most 1,024.
///
/// A worker serves its connections alone, so while it waits for a CPU all of them wait.
/// A sidecar shares its CPUs with the service beside it (and, on the benchmark, with the
/// load generator and the upstream): with one worker per CPU, a worker preempted while
/// its CPU runs other work, or queued behind the other worker, stalls half the
/// connections for a time slice (3-4 ms). With two per CPU, each holds half as many
/// connections and sleeps between bursts instead of being preempted (0.28 voluntary and
/// 0.03 involuntary switches per request, against 0.07 and 0.27): 4-7 % more
/// throughput and a lower p99 in the same runs (BENCHMARKS.md, "Worker threads and
/// CPUs"). The price is a second idle upstream pool per CPU.
fn default_workers() -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get().saturating_mul(2))
        .min(1024)
}

/// `n` listening sockets on `addr` sharing its port through SO_REUSEPORT (the kernel
/// spreads connections over them). With port 0, the first socket picks the port.
///
/// SO_REUSEPORT would also let another process (another proxy, another config) share
/// the port and silently take part of the traffic: the port is first bound without it,
/// which fails while anyone listens there.
fn bind_workers(addr: SocketAddr, n: usize) -> std::io::Result<Vec<std::net::TcpListener>> {
    if addr.port() != 0 {
        let probe = if addr.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        probe.set_reuseaddr(true)?;
        probe.bind(addr)?;
    }
    let mut addr = addr;
    let mut sockets = Vec::with_capacity(n);
    for _ in 0..n.max(1) {
        let socket = if addr.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        socket.set_reuseport(true)?;
        socket.set_nodelay(true)?;
        socket.bind(addr)?;
        let listener = socket.listen(1024)?;
        addr = listener.local_addr()?;
        let std = listener.into_std()?;
        std.set_nonblocking(true)?;
        sockets.push(std);
    }
    Ok(sockets)
}

async fn shutdown_signal() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot listen for SIGTERM")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("cannot listen for SIGINT")?,
        _ = term.recv() => {}
    }
    Ok(())
}
