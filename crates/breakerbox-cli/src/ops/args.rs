//! The operator commands' arguments.

use std::time::Duration;

use breakerbox_http::parse_duration;

/// Where the shared breakers live.
#[derive(clap::Args, Debug, Clone)]
pub struct Target {
    /// The Redis holding the shared state (e.g. redis://127.0.0.1:6379/).
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
    pub name: Option<String>,
    #[command(flatten)]
    pub target: Target,
}

/// Arguments of `breakerbox trip`.
#[derive(clap::Args, Debug)]
pub struct TripArgs {
    /// The breaker to force open.
    pub name: String,
    /// Lift the override after this (e.g. 10m); until `reset` when absent.
    #[arg(long = "for", value_name = "DURATION", value_parser = duration_arg)]
    pub duration: Option<Duration>,
    #[command(flatten)]
    pub target: Target,
}

/// Arguments of `breakerbox reset`.
#[derive(clap::Args, Debug)]
pub struct ResetArgs {
    /// The breaker to reset to a fresh closed phase.
    pub name: String,
    #[command(flatten)]
    pub target: Target,
}

/// Arguments of `breakerbox disable`.
#[derive(clap::Args, Debug)]
pub struct DisableArgs {
    /// The breaker to disable (every call admitted, nothing recorded).
    pub name: String,
    /// Lift the override after this (e.g. 10m); until `reset` when absent.
    #[arg(long = "for", value_name = "DURATION", value_parser = duration_arg)]
    pub duration: Option<Duration>,
    #[command(flatten)]
    pub target: Target,
}

fn duration_arg(text: &str) -> Result<Duration, String> {
    parse_duration(text).ok_or_else(|| format!("invalid duration \"{text}\" (e.g. 30s, 10m, 1h)"))
}
