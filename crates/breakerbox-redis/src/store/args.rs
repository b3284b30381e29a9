//! What the scripts take as arguments besides time: outcomes, batch entries and manual
//! operations.

use std::time::Duration;

use breakerbox::model::PermitKind;
use breakerbox::{Nanos, Verdict};

use super::{StoreError, MAX_OVERRIDE_DURATION};

/// One outcome to record: the permit's generation, kind and lease token, the verdict,
/// the latency and the dependency's retry hint.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct OutcomeArg {
    /// The permit's generation.
    pub generation: u64,
    /// The permit's kind.
    pub kind: PermitKind,
    /// The verdict.
    pub verdict: Verdict,
    /// The call's latency (kept in whole microseconds).
    pub latency: Duration,
    /// How long the dependency asked to be left alone (an HTTP `Retry-After`): if this
    /// outcome opens the breaker, the open phase lasts at least this long (capped).
    pub retry_hint: Option<Duration>,
    /// A probe's lease token (from the acquire's reply); 0 for other kinds.
    pub token: u64,
    /// How long before the script call the call completed (zero: it just did). A
    /// success that completed before the shared failure streak began does not end it
    /// (rule 19): an outcome that waited in a batch is judged where it happened in time.
    pub age: Duration,
}

impl OutcomeArg {
    /// An outcome without a retry hint or lease token (a closed-phase call).
    pub fn new(generation: u64, kind: PermitKind, verdict: Verdict, latency: Duration) -> Self {
        OutcomeArg {
            generation,
            kind,
            verdict,
            latency,
            retry_hint: None,
            token: 0,
            age: Duration::ZERO,
        }
    }
}

/// One entry of a batch sent to `record.lua`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BatchItem {
    /// An outcome.
    Outcome(OutcomeArg),
    /// A permit dropped without an outcome: its generation, kind and lease token.
    Release(u64, PermitKind, u64),
}

impl BatchItem {
    /// The item with an outcome's age set to `age` (a release has none).
    pub(crate) fn aged(self, age: Nanos) -> BatchItem {
        match self {
            BatchItem::Outcome(o) => BatchItem::Outcome(OutcomeArg {
                age: age.as_duration(),
                ..o
            }),
            release => release,
        }
    }

    /// The permit's generation.
    pub fn generation(&self) -> u64 {
        match self {
            BatchItem::Outcome(o) => o.generation,
            BatchItem::Release(generation, ..) => *generation,
        }
    }
}

/// A manual operation.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ManualOp {
    /// Open until reset, or for the duration.
    ForceOpen(Option<Duration>),
    /// Admit everything and record nothing, until reset or for the duration.
    Disable(Option<Duration>),
    /// Back to a fresh closed phase.
    Reset,
    /// Push an open phase tripped elsewhere: a closed breaker re-opens with this reason
    /// (`TransitionReason::as_str`); any other phase is left alone.
    Trip(&'static str),
    /// Give back an open phase Redis lost (restarted empty, or failed over to a replica
    /// that was behind) with the time it had left: a closed breaker opens for that long
    /// (reason `restored`); any other phase is left alone.
    RestoreOpen(Duration),
    /// Switch shadow mode on (`true`) or off for the whole fleet (rule 20): no transition;
    /// other nodes hear of it on the channel.
    Shadow(bool),
}

impl ManualOp {
    /// The operation's name in `lua/manual.lua` (and in events).
    pub fn name(self) -> &'static str {
        match self {
            ManualOp::ForceOpen(_) => "force_open",
            ManualOp::Disable(_) => "disable",
            ManualOp::Reset => "reset",
            ManualOp::Trip(_) => "trip",
            ManualOp::RestoreOpen(_) => "restore_open",
            ManualOp::Shadow(_) => "shadow",
        }
    }

    /// Refuses what the scripts cannot store exactly: an override longer than
    /// [`MAX_OVERRIDE_DURATION`] (give none for "until reset").
    pub fn validate(self) -> Result<(), StoreError> {
        if let ManualOp::ForceOpen(Some(d)) | ManualOp::Disable(Some(d)) = self {
            if d > MAX_OVERRIDE_DURATION {
                return Err(StoreError::Invalid(format!(
                    "an override of {d:?} is longer than the supported {} years; \
                     give no duration for one that lasts until reset",
                    MAX_OVERRIDE_DURATION.as_secs() / (365 * 24 * 3600)
                )));
            }
        }
        Ok(())
    }
}
