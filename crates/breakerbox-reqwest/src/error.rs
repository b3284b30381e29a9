//! Recognising the middleware's rejection.

use breakerbox::CircuitOpen;

/// The breaker's rejection inside a `reqwest_middleware` error, if that is what it is.
///
/// The middleware rejects with `Error::Middleware(anyhow::Error::new(CircuitOpen))`, so
/// `error.downcast_ref::<CircuitOpen>()` on the inner `anyhow::Error` works too; this is
/// the short way.
///
/// ```
/// use breakerbox::{CircuitOpen, Phase};
/// use std::time::Duration;
///
/// let open = CircuitOpen::new(Phase::Open, Some(Duration::from_secs(3)));
/// let error = reqwest_middleware::Error::Middleware(anyhow::Error::new(open));
/// assert_eq!(breakerbox_reqwest::circuit_open(&error), Some(&open));
/// ```
pub fn circuit_open(error: &reqwest_middleware::Error) -> Option<&CircuitOpen> {
    match error {
        reqwest_middleware::Error::Middleware(inner) => inner.downcast_ref::<CircuitOpen>(),
        reqwest_middleware::Error::Reqwest(_) => None,
    }
}
