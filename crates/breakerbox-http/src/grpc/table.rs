//! The verdict of every gRPC code: the defaults, and rules resolved over them.

use std::collections::BTreeMap;

use breakerbox::Verdict;

use super::GrpcCode;

/// The default verdict of `code`, with the reason for each choice:
///
/// | code | verdict | why |
/// |---|---|---|
/// | `OK` (0) | success | the call succeeded |
/// | `CANCELLED` (1) | ignore | the caller gave up; nothing about the server |
/// | `UNKNOWN` (2) | failure | an error the server did not map: an uncaught exception in most servers |
/// | `INVALID_ARGUMENT` (3) | ignore | the caller's request is wrong |
/// | `DEADLINE_EXCEEDED` (4) | failure | the server did not answer in time (but see [`crate::caller_deadline`]: past the caller's own deadline it is the caller's) |
/// | `NOT_FOUND` (5) | ignore | the caller asked for what is not there |
/// | `ALREADY_EXISTS` (6) | ignore | the caller's conflict |
/// | `PERMISSION_DENIED` (7) | ignore | the caller's credentials do not allow it |
/// | `RESOURCE_EXHAUSTED` (8) | failure | the server is out of capacity or quota |
/// | `FAILED_PRECONDITION` (9) | ignore | the caller asked in the wrong state |
/// | `ABORTED` (10) | ignore | a concurrency conflict the caller retries; the server is working |
/// | `OUT_OF_RANGE` (11) | ignore | the caller went past the end |
/// | `UNIMPLEMENTED` (12) | ignore | a method the server lacks: a caller/deploy mismatch that opening the breaker would not heal, like an HTTP 404 |
/// | `INTERNAL` (13) | failure | the server broke an invariant of its own |
/// | `UNAVAILABLE` (14) | failure | the server is down or shedding load: what a breaker is for |
/// | `DATA_LOSS` (15) | failure | the server lost or corrupted data |
/// | `UNAUTHENTICATED` (16) | ignore | the caller's credentials are missing or wrong |
pub const fn default_verdict(code: GrpcCode) -> Verdict {
    match code {
        GrpcCode::Ok => Verdict::Success,
        GrpcCode::Unknown
        | GrpcCode::DeadlineExceeded
        | GrpcCode::ResourceExhausted
        | GrpcCode::Internal
        | GrpcCode::Unavailable
        | GrpcCode::DataLoss => Verdict::Failure,
        GrpcCode::Cancelled
        | GrpcCode::InvalidArgument
        | GrpcCode::NotFound
        | GrpcCode::AlreadyExists
        | GrpcCode::PermissionDenied
        | GrpcCode::FailedPrecondition
        | GrpcCode::Aborted
        | GrpcCode::OutOfRange
        | GrpcCode::Unimplemented
        | GrpcCode::Unauthenticated => Verdict::Ignore,
    }
}

/// The verdict of each of the 17 codes: a configured rule, else the default.
#[derive(Copy, Clone, PartialEq, Eq)]
pub(crate) struct GrpcTable {
    verdicts: [Verdict; 17],
}

impl GrpcTable {
    /// `rules` over the defaults.
    pub(crate) fn new(rules: &BTreeMap<GrpcCode, Verdict>) -> GrpcTable {
        let verdicts = GrpcCode::ALL.map(|code| {
            rules
                .get(&code)
                .copied()
                .unwrap_or_else(|| default_verdict(code))
        });
        GrpcTable { verdicts }
    }

    /// The verdict of `code`.
    #[inline]
    pub(crate) fn verdict(&self, code: GrpcCode) -> Verdict {
        self.verdicts[usize::from(code.number())]
    }
}

impl std::fmt::Debug for GrpcTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Only the codes that differ from their default, to keep it short.
        let mut list = f.debug_map();
        for code in GrpcCode::ALL {
            if self.verdict(code) != default_verdict(code) {
                list.entry(&code.name(), &self.verdict(code));
            }
        }
        list.finish()
    }
}
