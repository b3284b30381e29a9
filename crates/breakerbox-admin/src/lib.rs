#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(unreachable_pub, missing_debug_implementations)]
//! # breakerbox-admin
//!
//! An admin service to embed in your own server: for any set of [breakerbox] circuit
//! breakers (single ones of either engine, a [`breakerbox::Registry`], anything that
//! implements [`BreakerSource`]) it serves their status as JSON, Prometheus metrics, a
//! live dashboard page, and the manual operations (trip, reset, disable), guarded as the
//! `breakerbox proxy` admin listener is (that listener is this service).
//!
//! It is a tower [`Service`](tower_service::Service) ([`AdminService`]) for hyper, axum
//! ([`router`], feature `axum`), tonic's HTTP side or any tower stack. Breakers are listed
//! at each request, so a registry that grows is seen as it is.
//!
//! ## Routes
//!
//! Under the optional prefix (e.g. `/admin`):
//!
//! | route | what |
//! |---|---|
//! | `GET /`, `/dashboard` | the dashboard: one card per breaker, refreshed every second from `status`, with trip, disable and reset buttons, the recent transitions, and a table for each key added with `status_section`; no external assets |
//! | `GET /status` | JSON: `breakers` (by name: `phase`, `generation`, `window`, rates, `consecutive_failures`, `retry_after_ms`, probes, `trips`, `stale_results`, `shadow` and `shadow_rejections` (rule 20), `local_open_ms` (rule 21: the time left of this node's local open phase, or null), `override_left_ms` (the time left of a timed forced open or disable, else null), `ramp` (rule 23: the fraction admitted while ramping up after a recovery, else null), `config` with the keys of a config file, then the source's details), `transitions` (from a [`TransitionLog`]), `uptime_ms` |
//! | `GET /metrics` | `text/plain; version=0.0.4`: your renderer's text ([`AdminServiceBuilder::metrics`]), or the gauge `breakerbox_state` of every breaker |
//! | `POST /breakers/{name}/trip` | force open, until reset or `for` a duration |
//! | `POST /breakers/{name}/disable` | admit everything and record nothing, until reset or `for` a duration |
//! | `POST /breakers/{name}/reset` | a fresh closed phase, every override lifted (shadow mode is kept) |
//! | `POST /breakers/{name}/shadow` | shadow mode on (rule 20): every rule runs, nothing is rejected, would-be rejections are counted; a shared breaker's whole fleet |
//! | `POST /breakers/{name}/unshadow` | shadow mode off: the breaker rejects again |
//!
//! `{name}` is percent-encoded (`api.example.com%3A443`). `for` comes as a query
//! parameter (`?for=10m`) or in a JSON body (`{"for": "10m"}`): a duration above zero, at
//! most 100 years. Answers: an unknown breaker is 404 with a JSON error; a bad parameter
//! 400 naming it (`{"error": "bad_request", "parameter": "for", ...}`); a wrong method 405
//! with `Allow`; an engine that fails or does not answer within the timeout (default 2 s)
//! 502 with the engine's error. An action's body is read only after the guard passed, up
//! to 4 KiB and for 10 s at most.
//!
//! ## Access
//!
//! - Every request must name the service in `Host`: an IP literal, `localhost`, or a name
//!   given with [`AdminServiceBuilder::allow_host`]. A page served under another name
//!   cannot read the service through DNS rebinding.
//! - An action must not come from another origin (`Origin`, when sent, must match
//!   `Host`), and must be a request a browser would not send cross-origin without asking
//!   first: with a token ([`AdminServiceBuilder::token`]), `Authorization: Bearer TOKEN`
//!   (401 with `WWW-Authenticate` when missing, 403 when wrong; any case of `bearer`);
//!   without one, `Content-Type: application/json` from a loopback peer. The peer is read
//!   from the request's [`PeerAddr`] extension (or axum's `ConnectInfo<SocketAddr>`); a
//!   server that does not insert it needs a token for actions.
//! - The dashboard may not be framed and runs only its own script.
//!
//! Shadow mode (observe without rejecting) is not an operation of the engines yet, so
//! there is no shadow action.
//!
//! ## Example
//!
//! ```
//! use breakerbox::CircuitBreaker;
//! use breakerbox_admin::{AdminService, PeerAddr};
//! use http_body_util::BodyExt;
//! use tower::ServiceExt;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let payments = CircuitBreaker::builder().name("payments").build()?;
//! let admin = AdminService::builder().breaker(payments.clone()).build()?;
//!
//! // A script on this machine trips the breaker...
//! let mut trip = http::Request::post("/breakers/payments/trip?for=10m")
//!     .header("host", "127.0.0.1:9090")
//!     .header("content-type", "application/json")
//!     .body(String::new())?;
//! trip.extensions_mut().insert(PeerAddr("127.0.0.1:50000".parse()?));
//! let response = admin.clone().oneshot(trip).await?;
//! assert_eq!(response.status(), 200);
//! assert_eq!(payments.phase(), breakerbox::Phase::ForcedOpen);
//!
//! // ...and the status shows it.
//! let status = http::Request::get("/status").header("host", "localhost").body(String::new())?;
//! let body = admin.oneshot(status).await?.into_body().collect().await?.to_bytes();
//! let status: serde_json::Value = serde_json::from_slice(&body)?;
//! assert_eq!(status["breakers"]["payments"]["phase"], "forced_open");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! To serve it on its own port with hyper, wrap it in
//! `hyper_util::service::TowerToHyperService` after inserting [`PeerAddr`] (see the
//! crate's tests), or run the `breakerbox proxy`, whose admin listener does exactly that.
//!
//! ## Features
//!
//! | Feature | Default | What it does |
//! |---------|---------|--------------|
//! | `axum` | off | [`router`]: the service as an `axum::Router`, nested under its prefix; axum's `ConnectInfo<SocketAddr>` is read as the peer. |
//!
//! [breakerbox]: https://docs.rs/breakerbox

mod access;
mod builder;
mod exposition;
mod reply;
mod route;
#[cfg(feature = "axum")]
mod router;
mod service;
mod source;
mod status;
mod transitions;

pub use builder::{AdminServiceBuilder, DEFAULT_TIMEOUT};
#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
pub use router::router;
pub use service::{AdminService, PeerAddr, ResponseFuture};
pub use source::{BreakerSource, Listed};
pub use transitions::{RecordedTransition, TransitionLog, DEFAULT_TRANSITIONS};

/// The body of every response: the whole answer, in memory.
pub type AdminBody = http_body_util::Full<bytes::Bytes>;
