//! `breakerbox`: a self-contained demo, a sidecar proxy, operator commands on shared state,
//! and a replay tool. A thin layer over the library crates.

mod demo;
mod ops;
mod printable;
mod proxy;
mod redact;
mod replay;
mod spec;

use clap::{Parser, Subcommand};

/// Circuit breakers for services in any language.
#[derive(Parser, Debug)]
#[command(name = "breakerbox", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a self-contained demo: a flaky upstream, traffic through a breaker, a live view.
    Demo(demo::DemoArgs),
    /// Run a sidecar reverse proxy with a breaker per upstream.
    Proxy(proxy::ProxyArgs),
    /// Replay a recorded trace through a config and report how it would have behaved.
    Replay(replay::ReplayArgs),
    /// Show the breakers shared through Redis (phase, generation, rates, overrides).
    Status(ops::StatusArgs),
    /// Force a shared breaker open, until reset or for a while (--for 10m).
    Trip(ops::TripArgs),
    /// Reset a shared breaker to a fresh closed phase (lifts any override).
    Reset(ops::ResetArgs),
    /// Disable a shared breaker (admit everything, record nothing), until reset or --for.
    Disable(ops::DisableArgs),
    /// Put a shared breaker in shadow mode for every node (every rule runs, nothing is
    /// rejected, would-be rejections are counted), or take it out with --off.
    Shadow(ops::ShadowArgs),
}

/// An error that ends the program with a chosen exit code (e.g. 2 for a malformed trace
/// line under `replay --strict`); other errors exit with 1.
#[derive(Debug)]
pub struct Fatal {
    code: u8,
    message: String,
}

impl Fatal {
    /// An error printed as `message` that exits with `code`.
    pub fn new(code: u8, message: impl Into<String>) -> Fatal {
        Fatal {
            code,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Fatal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Fatal {}

/// Writes `text` to stdout; a closed pipe (`breakerbox status | head`) is not an error.
pub fn emit(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => demo::run(args),
        Command::Proxy(args) => proxy::run(args),
        Command::Replay(args) => replay::run(args),
        Command::Status(args) => ops::status(args),
        Command::Trip(args) => ops::trip(args),
        Command::Reset(args) => ops::reset(args),
        Command::Disable(args) => ops::disable(args),
        Command::Shadow(args) => ops::shadow(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("breakerbox: {error:#}");
            match error.downcast_ref::<Fatal>() {
                Some(fatal) => std::process::ExitCode::from(fatal.code),
                None => std::process::ExitCode::FAILURE,
            }
        }
    }
}
