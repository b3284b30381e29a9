//! How a [`CircuitBreakerService`](crate::CircuitBreakerService) judges a call: by the
//! inner service's `Result` through a [`Judge`](breakerbox::Judge) ([`Outcome`]), or as an
//! HTTP exchange ([`Http`], see [`CircuitBreakerLayer::http`](crate::CircuitBreakerLayer::http)).

/// Judges the inner service's `Result<Response, Error>` with a
/// [`breakerbox::Judge`]; the default, [`breakerbox::DefaultJudge`], counts `Ok` as a
/// success and `Err` as a failure. The judge is cloned into every response future: wrap a
/// large one in an `Arc`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Outcome<J>(pub J);

pub use crate::http_form::Http;
