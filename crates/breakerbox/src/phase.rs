//! The phases a breaker moves through.

use std::fmt;

/// Where a breaker stands.
///
/// `Closed`, `Open` and `HalfOpen` are driven by outcomes and time; `ForcedOpen` and
/// `Disabled` only by an operator (`force_open`, `disable`, `reset`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Calls flow; outcomes are recorded and may trip the breaker.
    Closed,
    /// Calls are rejected until the recovery timeout is over.
    Open,
    /// A limited number of probe calls test whether the dependency has recovered.
    HalfOpen,
    /// Rejected by an operator until reset (or until the override expires).
    ForcedOpen,
    /// Every call is admitted and nothing is recorded, until reset (or expiry).
    Disabled,
}

impl Phase {
    /// A stable lower-case name (`closed`, `open`, `half_open`, `forced_open`, `disabled`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Phase::Closed => "closed",
            Phase::Open => "open",
            Phase::HalfOpen => "half_open",
            Phase::ForcedOpen => "forced_open",
            Phase::Disabled => "disabled",
        }
    }

    /// Parses [`Phase::as_str`]'s names.
    pub fn from_name(name: &str) -> Option<Phase> {
        Some(match name {
            "closed" => Phase::Closed,
            "open" => Phase::Open,
            "half_open" => Phase::HalfOpen,
            "forced_open" => Phase::ForcedOpen,
            "disabled" => Phase::Disabled,
            _ => return None,
        })
    }

    /// Whether calls are admitted at all in this phase (half-open admits probes only).
    pub const fn admits(self) -> bool {
        matches!(self, Phase::Closed | Phase::HalfOpen | Phase::Disabled)
    }

    pub(crate) const fn code(self) -> u64 {
        match self {
            Phase::Closed => 0,
            Phase::Open => 1,
            Phase::HalfOpen => 2,
            Phase::ForcedOpen => 3,
            Phase::Disabled => 4,
        }
    }

    pub(crate) const fn from_code(code: u64) -> Phase {
        match code {
            0 => Phase::Closed,
            1 => Phase::Open,
            2 => Phase::HalfOpen,
            3 => Phase::ForcedOpen,
            _ => Phase::Disabled,
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
