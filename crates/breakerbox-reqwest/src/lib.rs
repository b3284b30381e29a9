#![warn(unreachable_pub, missing_debug_implementations)]
//! # breakerbox-reqwest
//!
//! A [`reqwest_middleware::Middleware`] that puts a [breakerbox] circuit
//! breaker in front of every host your client calls.
//!
//! - **One breaker per host** (`host:port`) by default, from one template
//!   [`breakerbox::Config`], held in a bounded [`breakerbox::Registry`]; the key function
//!   is configurable ([`CircuitBreakerMiddleware::key_fn`]) for per-route or single
//!   breakers.
//! - **Judged by [`breakerbox_http::HttpJudge`]**: status rules, business codes in the
//!   body, latency (with a stricter threshold for half-open probes), transport errors
//!   (connect, reset, timeout) as failures. The body is read only when a business-code
//!   rule needs it, at most the judge's cap, and the caller still receives the full,
//!   unchanged response. The [`breakerbox_http::Judgement`] is attached to the response's
//!   extensions.
//! - **Fails fast without I/O**: when the breaker is open, `send()` returns
//!   [`reqwest_middleware::Error::Middleware`] holding a [`breakerbox::CircuitOpen`]
//!   (see [`circuit_open`]) and nothing is sent.
//! - **Cancel-safe**: the permit lives in the request future; dropping the future (a
//!   timeout around `send()`, a cancelled task) frees its half-open probe slot.
//!
//! ```no_run
//! use breakerbox::Config;
//! use breakerbox_http::HttpJudge;
//! use breakerbox_reqwest::{circuit_open, CircuitBreakerMiddleware};
//! use std::time::Duration;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = Config::builder()
//!     .consecutive_failures(5)
//!     .recovery_timeout(Duration::from_secs(10))
//!     .max_probes(1)
//!     .required_successes(2)
//!     .build()?;
//! let judge = HttpJudge::builder().slow_threshold(Duration::from_millis(800)).build()?;
//! let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
//!     .with(CircuitBreakerMiddleware::new(config, judge)?)
//!     .build();
//!
//! match client.get("http://127.0.0.1:8080/health").send().await {
//!     Ok(response) => println!("{}", response.status()),
//!     Err(error) => match circuit_open(&error) {
//!         Some(open) => println!("not sent, retry in {:?}", open.retry_after()),
//!         None => println!("failed: {error}"),
//!     },
//! }
//! # Ok(())
//! # }
//! ```
//!
//! `Retry-After`: with `honor_retry_after` the judge reads it on a 429 or 503, and the
//! breaker opened by that outcome stays open at least that long (capped at
//! `max_open_duration`).
//!
//! ## Features
//!
//! This crate has no optional features.

mod body;
mod error;
mod key;
mod middleware;
mod transport;

pub use error::circuit_open;
pub use key::host_key;
pub use middleware::{CircuitBreakerMiddleware, KeyFn, DEFAULT_CAPACITY};
pub use transport::transport_error;
