//! The middleware.

use std::sync::Arc;

use breakerbox::contract::{Breaker, BreakerPermit};
use breakerbox::{
    CircuitBreaker, CircuitOpen, Clock, Config, ConfigError, Registry, TokioDeadline,
};
use breakerbox_http::{AfterHead, HttpJudge, TransportError};
use http::Extensions;
use reqwest_middleware::{Middleware, Next};

use crate::body::peek;
use crate::transport::transport_error;

/// How many host breakers [`CircuitBreakerMiddleware::new`] keeps at most.
pub const DEFAULT_CAPACITY: usize = 1024;

/// Picks the breaker for a request (see [`crate::host_key`], the default).
pub type KeyFn = Arc<dyn Fn(&reqwest::Request) -> String + Send + Sync>;

/// A circuit breaker per host (or per key) for a `reqwest_middleware` client.
///
/// For each request: ask the key's breaker for a permit (rejecting with
/// [`breakerbox::CircuitOpen`], without I/O, when it is open), send, and drive one
/// [`breakerbox_http::Exchange`], as tower and the proxy do: judge the head, read the body
/// up to the judge's cap only when a rule needs it, record, and hand the caller the
/// unchanged response with the [`breakerbox_http::Judgement`] in its extensions.
///
/// Latency is the time to the response head from admission, read from the breaker's
/// clock; reading the body for business codes does not count. If reading the body for the
/// judge fails, `send()` returns that error and the call is a failure
/// (`transport: body read failed`, or `timeout: body read`).
///
/// A call takes at most its permit's deadline (rule 22: the breaker's `call_timeout`,
/// `probe_timeout` for a half-open probe), from admission over the head and any body read
/// for the judge: at the deadline the request's future is dropped, the exchange is judged
/// a transport timeout (reason `timeout`, or `timeout: body read`), and `send()` returns
/// `Error::Middleware` holding a [`breakerbox::DeadlineElapsed`]. A hung half-open probe
/// so frees its slot at `probe_timeout`. Needs a tokio runtime with time (as reqwest does).
///
/// When the registry is full (every breaker open, half-open or in use), a request to a new
/// key goes through unprotected rather than failing: the registry refuses to forget what
/// it knows about failing hosts, and refusing healthy ones would be worse.
pub struct CircuitBreakerMiddleware<B: Breaker = CircuitBreaker> {
    registry: Arc<Registry<String, B>>,
    judge: Arc<HttpJudge>,
    key: KeyFn,
}

impl<B: Breaker> Clone for CircuitBreakerMiddleware<B> {
    fn clone(&self) -> Self {
        CircuitBreakerMiddleware {
            registry: self.registry.clone(),
            judge: self.judge.clone(),
            key: self.key.clone(),
        }
    }
}

impl<B: Breaker> std::fmt::Debug for CircuitBreakerMiddleware<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CircuitBreakerMiddleware")
            .field("breakers", &self.registry.len())
            .field("judge", &self.judge)
            .finish_non_exhaustive()
    }
}

impl CircuitBreakerMiddleware<CircuitBreaker> {
    /// One breaker per `host:port`, each built from `config`, at most
    /// [`DEFAULT_CAPACITY`] of them, judged by `judge`.
    pub fn new(config: Config, judge: HttpJudge) -> Result<Self, ConfigError> {
        let registry = Registry::new(config, DEFAULT_CAPACITY)?;
        Ok(CircuitBreakerMiddleware::with_registry(
            Arc::new(registry),
            judge,
        ))
    }
}

impl<B: Breaker> CircuitBreakerMiddleware<B> {
    /// Uses breakers from `registry`, of any engine: in-memory ones (your clock,
    /// listeners and capacity) or ones shared by every process through Redis
    /// (`breakerbox_redis::RedisNode::registry`). Keep a clone of the `Arc` to inspect or
    /// control the breakers.
    pub fn with_registry(registry: Arc<Registry<String, B>>, judge: HttpJudge) -> Self {
        CircuitBreakerMiddleware {
            registry,
            judge: Arc::new(judge),
            key: Arc::new(crate::host_key),
        }
    }

    /// Chooses breakers with `key` instead of `host:port`: a constant for one breaker, the
    /// host and the first path segment for one per route, and so on.
    pub fn key_fn(
        mut self,
        key: impl Fn(&reqwest::Request) -> String + Send + Sync + 'static,
    ) -> Self {
        self.key = Arc::new(key);
        self
    }

    /// The breakers.
    pub fn registry(&self) -> &Arc<Registry<String, B>> {
        &self.registry
    }

    /// The judge.
    pub fn judge(&self) -> &HttpJudge {
        &self.judge
    }
}

fn rejected(open: CircuitOpen) -> reqwest_middleware::Error {
    reqwest_middleware::Error::Middleware(anyhow::Error::new(open))
}

fn timed_out(elapsed: breakerbox::DeadlineElapsed) -> reqwest_middleware::Error {
    reqwest_middleware::Error::Middleware(anyhow::Error::new(elapsed))
}

#[async_trait::async_trait]
impl<B: Breaker> Middleware for CircuitBreakerMiddleware<B> {
    async fn handle(
        &self,
        request: reqwest::Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        let key = (self.key)(&request);
        let Ok(breaker) = self.registry.get(&key) else {
            return next.run(request, extensions).await;
        };
        let permit = breaker.acquire_now_or_later().await.map_err(rejected)?;
        let probe = permit.is_probe();
        let clock = breaker.clock();
        let started = clock.now();
        let mut deadline = TokioDeadline::for_permit(&permit);
        let result = deadline.run(next.run(request, extensions)).await;
        let latency = clock.now().saturating_sub(started).as_duration();
        let mut exchange = self.judge.exchange(probe);
        let (result, judgement) = match result {
            Ok(Ok(response)) => {
                match exchange.on_head(response.status(), response.headers(), latency) {
                    AfterHead::Judged(judgement) => (Ok(response), Some(judgement)),
                    // A gRPC status in the trailers: reqwest hands the body to its caller
                    // and shows this middleware no trailers, so the call is not judged (the
                    // permit is released). gRPC clients use the tower layer, which waits.
                    AfterHead::AwaitTrailers => (Ok(response), None),
                    AfterHead::ReadBody { cap } => match deadline.run(peek(response, cap)).await {
                        Ok(Ok(peeked)) => {
                            let judgement = exchange.on_body(peeked.body.as_deref());
                            (Ok(peeked.response), Some(judgement))
                        }
                        Ok(Err(error)) => {
                            let error = reqwest_middleware::Error::Reqwest(error);
                            let judgement = exchange.on_body_error(transport_error(&error));
                            (Err(error), Some(judgement))
                        }
                        // Rule 22: the body read for the judge hung past the deadline.
                        Err(elapsed) => {
                            let judgement = exchange.on_body_error(TransportError::Timeout);
                            (Err(timed_out(elapsed)), Some(judgement))
                        }
                    },
                }
            }
            // An inner breaker said no: nothing was sent, nothing to judge.
            Ok(Err(error)) if crate::circuit_open(&error).is_some() => (Err(error), None),
            Ok(Err(error)) => {
                let judgement = exchange.on_transport_error(transport_error(&error), latency);
                (Err(error), Some(judgement))
            }
            // Rule 22: no head by the deadline; the request's future was dropped.
            Err(elapsed) => {
                let judgement = exchange.on_transport_error(TransportError::Timeout, latency);
                (Err(timed_out(elapsed)), Some(judgement))
            }
        };
        // One record per exchange; without a judgement the permit is released.
        match &judgement {
            Some(judgement) => {
                permit
                    .record_with_retry_hint(
                        judgement.verdict,
                        exchange.latency(),
                        judgement.retry_after,
                    )
                    .await
            }
            None => drop(permit),
        }
        let mut response = result?;
        if let Some(judgement) = judgement {
            response.extensions_mut().insert(judgement);
        }
        Ok(response)
    }
}
