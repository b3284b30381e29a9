#![warn(unreachable_pub, missing_debug_implementations)]
//! # breakerbox-http
//!
//! Judging HTTP outcomes for [breakerbox] circuit breakers: whether a response
//! (or its absence) says the dependency is healthy, failing, or neither.
//!
//! - **Transport**: connect failures, resets, timeouts, no response: always a failure
//!   ([`TransportError`]).
//! - **Status rules** per code (`429`), range (`500-599`) or class (`5xx`), each a
//!   failure, a success or ignored; the most specific rule wins. Defaults: 5xx, 408 and
//!   429 fail; other 4xx and 1xx are ignored (the caller's fault, not the dependency's), but
//!   101 (an upgrade's handshake, a WebSocket's) succeeds;
//!   2xx and 3xx succeed. `client_errors = "failure"` makes every 4xx a failure.
//! - **Business codes** in a JSON body, found with JSON pointers, against failure and
//!   success sets; the body is read up to a cap (64 KiB by default) and only when a rule
//!   needs it ([`HttpJudge::wants_body`]); a missing, bigger or non-JSON body is judged
//!   without it.
//! - **Latency**: a success slower than a threshold fails, with an optional stricter
//!   threshold for half-open probes.
//! - **Retry-After** on 429 and 503, when asked for.
//! - **gRPC** (opt-in, [`HttpJudgeConfig::grpc`]): a gRPC response is judged by its
//!   `grpc-status`, from the headers of a trailers-only response or from the trailers
//!   ([`GrpcJudge`]; defaults: UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED,
//!   INTERNAL, UNKNOWN and DATA_LOSS fail; OK succeeds; client-caused codes are ignored;
//!   each configurable by name or number). A missing or malformed status at the end of the
//!   stream fails (`grpc-status missing`, `grpc-status invalid`); a non-200 status is
//!   judged by the HTTP rules.
//!
//! Every verdict comes with a short reason (`status 503`, `business code E001`,
//! `slow 1.2s > 800ms`, `timeout`) in a [`Judgement`]. The judge is configured from code
//! ([`HttpJudge::builder`]) or from TOML, YAML or JSON ([`HttpJudgeConfig`]); a bad
//! config names the key and the value. No I/O, no async runtime: adapters
//! (`breakerbox-tower`, `breakerbox-reqwest`) read the response and ask the judge.
//!
//! ```
//! use breakerbox_http::{HttpJudge, HttpJudgeConfig, TransportError};
//! use breakerbox::Verdict;
//! use http::{HeaderMap, StatusCode};
//! use std::time::Duration;
//!
//! let config: HttpJudgeConfig = serde_json::from_str(r#"{ "client_errors": "failure" }"#)?;
//! let judge = HttpJudge::from_config(config)?;
//! let j = judge.judge_status(StatusCode::BAD_REQUEST, &HeaderMap::new(), Duration::ZERO, false);
//! assert_eq!(j.verdict, Verdict::Failure);
//! let j = judge.judge_transport(TransportError::Timeout, Duration::from_secs(5));
//! assert_eq!((j.verdict, j.reason.as_ref()), (Verdict::Failure, "timeout"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Judging an exchange
//!
//! Adapters drive an [`Exchange`] ([`HttpJudge::exchange`]): the head first, the body
//! only when a rule needs it, a body error or a transport error as a failure with its
//! reason. It fixes the two choices every adapter used to make on its own: latency is
//! the time to the response head from admission, and a body that fails after its head
//! is a failure (`transport: body read failed`). Transport errors are classified by one
//! function ([`TransportError::classify`]).
//!
//! ## Features
//!
//! | Feature | Default | What it does |
//! |---------|---------|--------------|
//! | `hyper` | off | [`TransportError::classify`] also recognises `hyper::Error` (an incomplete message or closed connection is [`TransportError::NoResponse`], a timeout [`TransportError::Timeout`]). Pulls hyper without its features (tokio's sync primitives, no runtime). |
//!
//! Without features the crate pulls no async runtime, no I/O and no TLS.

mod business;
mod config;
mod error;
mod exchange;
mod grpc;
mod judge;
mod judgement;
mod status;
mod transport;

/// Durations as written in config files; the core's one implementation
/// ([`breakerbox::config::parse_duration`]), re-exported.
pub use breakerbox::config::{parse_duration, HumanDuration};
pub use config::{BusinessConfig, HttpJudgeConfig};
pub use error::HttpJudgeError;
pub use exchange::{AfterHead, Exchange};
pub use grpc::{
    caller_deadline, default_verdict as grpc_default_verdict, is_grpc_content_type,
    is_grpc_response, GrpcCode, GrpcConfig, GrpcJudge, GrpcStatus,
    INVALID_REASON as GRPC_INVALID_REASON, MISSING_REASON as GRPC_MISSING_REASON,
};
pub use judge::{HttpJudge, HttpJudgeBuilder, DEFAULT_BODY_CAP};
pub use judgement::Judgement;
pub use status::StatusSelector;
pub use transport::TransportError;
