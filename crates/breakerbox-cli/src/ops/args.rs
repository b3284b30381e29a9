//! The operator commands' arguments.

use std::time::Duration;

use breakerbox_http::parse_duration;

use crate::printable::printable;

/// Where the shared breakers live.
#[derive(clap::Args, Debug, Clone)]
pub struct Target {
    /// The Redis holding the shared state: redis://HOST:PORT[/DB] (rediss:// for TLS),
    /// a cluster as redis+cluster://HOST:PORT,HOST:PORT,... (its seed nodes), or the
    /// primary of SERVICE behind Sentinels as
    /// redis+sentinel://HOST:PORT,HOST:PORT,.../SERVICE[/DB]; credentials as
    /// USER:PASSWORD@ before the host(s) (never printed).
    #[arg(long, value_name = "URL")]
    pub redis: String,
    /// The key prefix the breakers were built with: breaker NAME is at `{prefix}{NAME}`.
    #[arg(long, default_value = "bb:")]
    pub prefix: String,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `breakerbox status`.
#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    /// One breaker; every breaker under the prefix when absent.
    #[arg(value_parser = breaker_name)]
    pub name: Option<String>,
    #[command(flatten)]
    pub target: Target,
}

/// Arguments of `breakerbox trip`.
#[derive(clap::Args, Debug)]
pub struct TripArgs {
    /// The breaker to force open.
    #[arg(value_parser = breaker_name)]
    pub name: String,
    /// Lift the override after this (e.g. 10m); until `reset` when absent.
    #[arg(long = "for", value_name = "DURATION", value_parser = duration_arg)]
    pub duration: Option<Duration>,
    /// Create the breaker if no breaker has that name yet (else a typo is an error).
    #[arg(long)]
    pub create: bool,
    #[command(flatten)]
    pub target: Target,
}

/// Arguments of `breakerbox reset`.
#[derive(clap::Args, Debug)]
pub struct ResetArgs {
    /// The breaker to reset to a fresh closed phase.
    #[arg(value_parser = breaker_name)]
    pub name: String,
    /// Create the breaker if no breaker has that name yet (else a typo is an error).
    #[arg(long)]
    pub create: bool,
    #[command(flatten)]
    pub target: Target,
}

/// Arguments of `breakerbox disable`.
#[derive(clap::Args, Debug)]
pub struct DisableArgs {
    /// The breaker to disable (every call admitted, nothing recorded).
    #[arg(value_parser = breaker_name)]
    pub name: String,
    /// Lift the override after this (e.g. 10m); until `reset` when absent.
    #[arg(long = "for", value_name = "DURATION", value_parser = duration_arg)]
    pub duration: Option<Duration>,
    /// Create the breaker if no breaker has that name yet (else a typo is an error).
    #[arg(long)]
    pub create: bool,
    #[command(flatten)]
    pub target: Target,
}

/// Arguments of `breakerbox shadow`.
#[derive(clap::Args, Debug)]
pub struct ShadowArgs {
    /// The breaker to put in shadow mode (every rule runs, nothing is rejected, would-be
    /// rejections are counted), for every node.
    #[arg(value_parser = breaker_name)]
    pub name: String,
    /// Leave shadow mode instead: the breaker rejects again.
    #[arg(long)]
    pub off: bool,
    /// Create the breaker if no breaker has that name yet (else a typo is an error).
    #[arg(long)]
    pub create: bool,
    #[command(flatten)]
    pub target: Target,
}

/// A duration above zero (`--for 0s` would mean "until reset" by accident).
fn duration_arg(text: &str) -> Result<Duration, String> {
    match parse_duration(text) {
        Some(d) if !d.is_zero() => Ok(d),
        Some(_) => Err(format!(
            "invalid duration \"{text}\": must be above zero (leave --for out to last until reset)"
        )),
        None => Err(format!(
            "invalid duration \"{}\" (e.g. 30s, 10m, 1h)",
            printable(text)
        )),
    }
}

/// A breaker name that round-trips through its key `{prefix}{NAME}`: not empty, no
/// braces (they delimit the hash tag), no control characters.
fn breaker_name(text: &str) -> Result<String, String> {
    if text.is_empty() || text.contains(['{', '}']) || text.chars().any(char::is_control) {
        return Err(format!(
            "invalid breaker name \"{}\": must be non-empty, without '{{', '}}' or control characters",
            printable(text)
        ));
    }
    Ok(text.to_owned())
}
