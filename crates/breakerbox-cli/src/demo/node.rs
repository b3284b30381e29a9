//! One node's breaker in the demo: none, or any engine (in memory, or shared through
//! Redis) behind the core's [`DynBreaker`].

use breakerbox::contract::{Breaker, BreakerPermit, DynBreaker, DynPermit};
use breakerbox::{CircuitOpen, Phase};

/// The breaker a node calls through: `None` for the group without one.
pub type NodeBreaker = Option<DynBreaker>;

/// Asks `breaker` for a permit: `Ok(None)` without a breaker, the rejection when it
/// rejects.
pub async fn acquire(breaker: &NodeBreaker) -> Result<Option<DynPermit>, CircuitOpen> {
    match breaker {
        None => Ok(None),
        Some(b) => b.acquire_now_or_later().await.map(Some),
    }
}

/// The phase the node sees (`None` without a breaker).
pub fn phase(breaker: &NodeBreaker) -> Option<Phase> {
    breaker.as_ref().map(Breaker::phase)
}

/// Whether a permit is a half-open probe.
pub fn is_probe(permit: &Option<DynPermit>) -> bool {
    permit.as_ref().is_some_and(BreakerPermit::is_probe)
}
