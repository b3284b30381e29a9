//! The phases a breaker moves through.

use std::fmt;

/// Where a breaker stands.
///
/// `Closed`, `Open` and `HalfOpen` are driven by outcomes and time; `ForcedOpen` and
/// `Disabled` only by an operator (`force_open`, `disable`, `reset`).
///
/// New phases may be added in a minor release, so a `match` outside this crate needs a
/// wildcard arm; [`Phase::ALL`] lists the phases of the version you build against.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
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

    /// Every phase, in the order of [`Phase::index`].
    pub const ALL: [Phase; 5] = [
        Phase::Closed,
        Phase::Open,
        Phase::HalfOpen,
        Phase::ForcedOpen,
        Phase::Disabled,
    ];

    /// A stable small number for this phase (its position in [`Phase::ALL`]), for arrays
    /// indexed by phase and for packing a phase into a few bits.
    ///
    /// ```
    /// use breakerbox::Phase;
    /// for phase in Phase::ALL {
    ///     assert_eq!(Phase::from_index(phase.index()), Some(phase));
    /// }
    /// assert_eq!(Phase::from_index(5), None);
    /// ```
    pub const fn index(self) -> usize {
        match self {
            Phase::Closed => 0,
            Phase::Open => 1,
            Phase::HalfOpen => 2,
            Phase::ForcedOpen => 3,
            Phase::Disabled => 4,
        }
    }

    /// The phase at `index` in [`Phase::ALL`], if any.
    pub const fn from_index(index: usize) -> Option<Phase> {
        if index < Phase::ALL.len() {
            Some(Phase::ALL[index])
        } else {
            None
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
