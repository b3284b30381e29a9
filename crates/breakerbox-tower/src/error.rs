//! The errors a [`CircuitBreakerService`](crate::CircuitBreakerService) answers with.
//!
//! Following tower's convention, the service's error type is the boxed [`BoxError`]: the
//! inner service's own errors pass through unchanged (boxed), and the middleware adds two
//! of its own, which callers recognise with `downcast_ref`:
//!
//! - [`CircuitOpen`]: the breaker rejected the call without calling the inner service; it
//!   says which phase the breaker is in and, when known, how long until a retry can be
//!   admitted ([`CircuitOpen::retry_after`]).
//! - [`RegistryFull`]: in the keyed form, the request's key has no breaker and none could
//!   be evicted to make room for one; the call was not attempted.
//!
//! ```
//! use breakerbox::{CircuitOpen, Phase};
//! use breakerbox_tower::BoxError;
//! use std::time::Duration;
//!
//! let error: BoxError = Box::new(CircuitOpen::new(Phase::Open, Some(Duration::from_secs(5))));
//! match error.downcast_ref::<CircuitOpen>() {
//!     Some(open) => assert_eq!(open.retry_after(), Some(Duration::from_secs(5))),
//!     None => unreachable!("an inner error"),
//! }
//! ```

pub use breakerbox::{CircuitOpen, RegistryFull};

/// A boxed error, the same type as `tower::BoxError`.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a call was refused before reaching the inner service. Both cases are `Copy`, so a
/// refused future can answer (and answer again, if polled after completion) without
/// allocating until the error is boxed.
#[derive(Copy, Clone, Debug)]
pub(crate) enum Refusal {
    Open(CircuitOpen),
    Full(RegistryFull),
}

impl Refusal {
    pub(crate) fn boxed(self) -> BoxError {
        match self {
            Refusal::Open(open) => Box::new(open),
            Refusal::Full(full) => Box::new(full),
        }
    }
}

impl From<CircuitOpen> for Refusal {
    fn from(open: CircuitOpen) -> Self {
        Refusal::Open(open)
    }
}

impl From<RegistryFull> for Refusal {
    fn from(full: RegistryFull) -> Self {
        Refusal::Full(full)
    }
}

/// A response future was polled again after it completed.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Completed;

impl std::fmt::Display for Completed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("circuit breaker response future polled after completion")
    }
}

impl std::error::Error for Completed {}
