//! The judgement of one call.

/// How one call counts for the breaker.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// The dependency did its job.
    Success,
    /// The dependency failed (error, timeout, server error, too slow...).
    Failure,
    /// Neither: the call says nothing about the dependency's health (e.g. a 404 caused by
    /// the caller). In closed it is not a call at all; in half-open it only frees the slot.
    Ignore,
}

impl Verdict {
    /// A stable lower-case name (`success`, `failure`, `ignore`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Verdict::Success => "success",
            Verdict::Failure => "failure",
            Verdict::Ignore => "ignore",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
