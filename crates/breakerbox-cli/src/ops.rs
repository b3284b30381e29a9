//! `breakerbox status | trip | reset | disable | shadow`: operate breakers shared through
//! Redis.
//!
//! Breakers are found by `SCAN` over `{prefix}{*}` (the hash of breaker `NAME` is
//! `{prefix}{NAME}`); each is read with the engine's read script and changed with its
//! manual script, so every node sees the change at once (the scripts publish it).

mod args;
mod render;
mod shared;

use anyhow::Context as _;
use breakerbox_redis::ManualOp;

use crate::printable::printable;
use crate::redact;
pub use args::{DisableArgs, ResetArgs, ShadowArgs, StatusArgs, Target, TripArgs};
use shared::Shared;

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Runs `breakerbox status [NAME]`.
pub fn status(args: StatusArgs) -> anyhow::Result<()> {
    runtime()?.block_on(async {
        let shared = Shared::connect(&args.target).await?;
        let names = match &args.name {
            Some(name) => {
                if !shared.exists(name).await? {
                    anyhow::bail!(
                        "no breaker named {name:?} under prefix {:?} on {}",
                        args.target.prefix,
                        redact::url(&args.target.redis)
                    );
                }
                (vec![name.clone()], Vec::new())
            }
            None => shared.list().await?,
        };
        let (names, odd) = names;
        let mut rows = Vec::with_capacity(names.len() + odd.len());
        for name in names {
            rows.push(shared.read(&name).await);
        }
        rows.extend(odd);
        let out = if args.target.json {
            render::json(&rows)?
        } else {
            render::table(&rows)
        };
        crate::emit(&out)?;
        match (&args.name, rows.first().and_then(|r| r.error.as_ref())) {
            (Some(name), Some(error)) => Err(anyhow::anyhow!("{name}: {}", printable(error))),
            _ => Ok(()),
        }
    })
}

fn manual(target: &Target, name: &str, op: ManualOp, create: bool) -> anyhow::Result<()> {
    runtime()?.block_on(async {
        let shared = Shared::connect(target).await?;
        if !create && !shared.exists(name).await? {
            anyhow::bail!(
                "no breaker named {name:?} under prefix {:?} on {} (check the name, or give \
                 --create to create it)",
                target.prefix,
                redact::url(&target.redis)
            );
        }
        let row = shared.manual(name, op).await;
        let failed = row.error.clone();
        let out = if target.json {
            render::json(std::slice::from_ref(&row))?
        } else {
            render::table(std::slice::from_ref(&row))
        };
        crate::emit(&out)?;
        match failed {
            Some(error) => Err(anyhow::anyhow!("{name}: {}", printable(&error))),
            None => Ok(()),
        }
    })
}

/// Runs `breakerbox trip NAME [--for DURATION]`: forces the breaker open.
pub fn trip(args: TripArgs) -> anyhow::Result<()> {
    manual(
        &args.target,
        &args.name,
        ManualOp::ForceOpen(args.duration),
        args.create,
    )
}

/// Runs `breakerbox reset NAME`: back to a fresh closed phase.
pub fn reset(args: ResetArgs) -> anyhow::Result<()> {
    manual(&args.target, &args.name, ManualOp::Reset, args.create)
}

/// Runs `breakerbox shadow NAME [--off]`: switches shadow mode (rule 20) for the fleet.
pub fn shadow(args: ShadowArgs) -> anyhow::Result<()> {
    manual(
        &args.target,
        &args.name,
        ManualOp::Shadow(!args.off),
        args.create,
    )
}

/// Runs `breakerbox disable NAME [--for DURATION]`: admit every call, record nothing.
pub fn disable(args: DisableArgs) -> anyhow::Result<()> {
    manual(
        &args.target,
        &args.name,
        ManualOp::Disable(args.duration),
        args.create,
    )
}
