#![warn(unreachable_pub, missing_debug_implementations)]
//! # breakerbox-tower
//!
//! A [tower] middleware that puts a [breakerbox] circuit breaker in front of any
//! `Service`: axum and hyper clients, tonic channels, your own services.
//!
//! - [`CircuitBreakerLayer::new`]: one breaker for every request;
//!   [`CircuitBreakerLayer::keyed`]: one breaker per key (host, route) from a
//!   [`breakerbox::Registry`].
//! - Generic form: the inner service's `Result` is judged by a [`breakerbox::Judge`]
//!   (default [`breakerbox::DefaultJudge`]: `Ok` succeeds, `Err` fails;
//!   [`CircuitBreakerLayer::judge`] changes it).
//! - HTTP form ([`CircuitBreakerLayer::http`]): responses are judged by a
//!   [`breakerbox_http::HttpJudge`]: status rules, latency (with a stricter threshold for
//!   half-open probes), and business error codes in the body, read up to a cap and handed
//!   on unchanged ([`ReplayBody`]). Each call drives one [`breakerbox_http::Exchange`],
//!   as reqwest and the proxy do: latency is the time to the response head, a body that
//!   fails while read for judging is a failure, and the
//!   [`breakerbox_http::Judgement`] goes in the response's extensions.
//! - gRPC (tonic channels): with a judge that has gRPC rules
//!   (`HttpJudge::builder().grpc(true)`), a call is judged by its `grpc-status`, from a
//!   trailers-only response's head or from the trailers when the response body ends
//!   (the body carries the permit until then; dropped before its end, it releases it
//!   unjudged).
//!
//! ## Behaviour
//!
//! - **Open**: `poll_ready` answers `Ready(Ok(()))` without polling the inner service (an
//!   error from `poll_ready` is final for tower), and `call` fails at once with a boxed
//!   [`CircuitOpen`] carrying `retry_after`; the inner service is not touched.
//! - **Closed, half-open**: `poll_ready` is the inner service's. `call` takes a permit
//!   from the breaker; the permit travels with the response future and the outcome is
//!   recorded when it completes. A future dropped before that releases its permit, which
//!   frees a half-open probe slot.
//! - **Errors** are [`BoxError`]s, as in tower: the inner service's errors boxed, or the
//!   middleware's own ([`CircuitOpen`], [`RegistryFull`]) to recognise with
//!   `downcast_ref`. See [`error`].
//! - **Time**: latency is measured through the breaker's [`breakerbox::Clock`], so a
//!   [`breakerbox::ManualClock`] drives tests deterministically. The crate has no runtime
//!   dependency (unless its `tokio` feature is on).
//! - **Deadlines** (rule 22): a call takes at most its permit's deadline
//!   (`BreakerPermit::deadline`: the breaker's `call_timeout`, `probe_timeout` for a
//!   half-open probe). With the `tokio` feature the response future drops the inner future
//!   at the deadline, records a failure (in the HTTP form, the exchange's
//!   `on_transport_error(TransportError::Timeout)`: reason `timeout`, or
//!   `timeout: body read` while the body is read for judging) and answers a boxed
//!   [`breakerbox::DeadlineElapsed`]; a hung probe so frees its slot at `probe_timeout`.
//!   Without a deadline configured, nothing is timed.
//! - **Cost**: the permit a response future carries owns a reference to the breaker: one
//!   reference-count increment and decrement per call, which on some machines costs more
//!   than the rest of the layer. A breaker that lives for the whole program (a `static`, or
//!   one leaked at start-up) can be given as `&'static CircuitBreaker`: its permits are
//!   borrowed and the layer pays no reference count (`benches/overhead.rs`,
//!   `layer/closed_static` against `layer/closed`). Latency is read from the clock only
//!   when the judge or the breaker's slow-call rule needs it.
//!
//! ## Example
//!
//! ```
//! use breakerbox::{CircuitBreaker, CircuitOpen, Verdict};
//! use breakerbox_http::HttpJudge;
//! use breakerbox_tower::CircuitBreakerLayer;
//! use std::time::Duration;
//! use tower::{service_fn, Service, ServiceBuilder, ServiceExt};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let breaker = CircuitBreaker::builder()
//!     .consecutive_failures(1)
//!     .recovery_timeout(Duration::from_secs(10))
//!     .build()?;
//! let judge = HttpJudge::builder().client_errors(Verdict::Failure).build()?;
//! let upstream = service_fn(|_request: http::Request<String>| async {
//!     let response = http::Response::builder().status(404).body(String::from("no such user"))?;
//!     Ok::<_, http::Error>(response)
//! });
//! let mut client = ServiceBuilder::new()
//!     .layer(CircuitBreakerLayer::new(breaker).http(judge))
//!     .service(upstream);
//!
//! let response = client.ready().await?.call(http::Request::new(String::new())).await?;
//! assert_eq!(response.status(), 404); // handed on, and counted as a failure
//! let error = client.ready().await?.call(http::Request::new(String::new())).await.unwrap_err();
//! assert!(error.downcast_ref::<CircuitOpen>().is_some());
//! # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
//! # }).unwrap();
//! ```
//!
//! [tower]: https://docs.rs/tower
//!
//! ## Features
//!
//! | Feature | Default | What it does |
//! |---------|---------|--------------|
//! | `hyper` | off | A `hyper::Error` from the inner service is classified by its kind (an incomplete message is `transport: no response`, not `transport: error`); forwards `breakerbox-http/hyper`. |
//! | `tokio` | off | Calls are cancelled at their permit's deadline (rule 22: the breaker's `call_timeout`, `probe_timeout` for a half-open probe): the inner future is dropped, the call is recorded as a failure with reason `timeout`, and the caller gets a boxed [`breakerbox::DeadlineElapsed`]. Needs a tokio runtime with time. Without it, a deadline is only judged: a result later than it is a timeout failure. |

mod admission;
mod deadline;
pub mod error;
mod future;
mod gate;
mod http_form;
pub mod judging;
mod layer;
pub mod select;
mod service;

pub use breakerbox::{CircuitOpen, RegistryFull};
pub use error::BoxError;
pub use future::ResponseFuture;
pub use gate::GatedFuture;
pub use http_form::{HttpResponseFuture, ReplayBody};
pub use layer::CircuitBreakerLayer;
pub use service::CircuitBreakerService;
