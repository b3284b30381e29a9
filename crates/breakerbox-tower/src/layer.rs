//! The layer that wraps services in [`CircuitBreakerService`].

use std::fmt;
use std::sync::Arc;

use breakerbox::contract::Breaker;
use breakerbox::{DefaultJudge, Registry};
use breakerbox_http::HttpJudge;
use tower_layer::Layer;

use crate::judging::{Http, Outcome};
use crate::select::{Keyed, Single};
use crate::service::CircuitBreakerService;

/// Wraps a service in a [`CircuitBreakerService`]: one breaker for every request
/// ([`CircuitBreakerLayer::new`]) or one per key ([`CircuitBreakerLayer::keyed`]), judging
/// the inner service's `Result` ([`CircuitBreakerLayer::judge`]) or HTTP exchanges
/// ([`CircuitBreakerLayer::http`]).
///
/// ```
/// use breakerbox::{CircuitBreaker, CircuitOpen, ManualClock};
/// use breakerbox_tower::CircuitBreakerLayer;
/// use std::time::Duration;
/// use tower::{service_fn, Service, ServiceBuilder, ServiceExt};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let breaker = CircuitBreaker::builder()
///     .consecutive_failures(2)
///     .recovery_timeout(Duration::from_secs(30))
///     .clock(ManualClock::new())
///     .build()?;
/// let mut service = ServiceBuilder::new()
///     .layer(CircuitBreakerLayer::new(breaker.clone()))
///     .service(service_fn(|_: ()| async { Err::<(), _>(std::io::Error::other("down")) }));
///
/// for _ in 0..2 {
///     let error = service.ready().await?.call(()).await.unwrap_err();
///     assert!(error.is::<std::io::Error>()); // the dependency's own error, boxed
/// }
/// let error = service.ready().await?.call(()).await.unwrap_err();
/// let open = error.downcast_ref::<CircuitOpen>().expect("rejected by the breaker");
/// assert_eq!(open.retry_after(), Some(Duration::from_secs(30)));
/// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
/// # }).unwrap();
/// ```
pub struct CircuitBreakerLayer<Sel, M = Outcome<DefaultJudge>> {
    select: Sel,
    mode: M,
}

impl<B: Breaker> CircuitBreakerLayer<Single<B>> {
    /// One breaker for every request, of any engine (an in-memory
    /// [`CircuitBreaker`](breakerbox::CircuitBreaker), a `breakerbox_redis::RedisBreaker`
    /// shared by every process); `Ok` is a success and `Err` a failure until
    /// [`CircuitBreakerLayer::judge`] or [`CircuitBreakerLayer::http`] says otherwise.
    pub fn new(breaker: B) -> Self {
        CircuitBreakerLayer {
            select: Single::new(breaker),
            mode: Outcome(DefaultJudge),
        }
    }
}

impl<K, B: Breaker, F> CircuitBreakerLayer<Keyed<K, B, F>> {
    /// One breaker per key from `registry`; `key_fn` computes a request's key (its host,
    /// its route). The key is only known from the request, so `poll_ready` always polls the
    /// inner service; rejection happens in `call`. A key that has no breaker while the
    /// registry is full (and none can be evicted) fails the call with a boxed
    /// [`RegistryFull`](breakerbox::RegistryFull), without calling the inner service.
    ///
    /// ```
    /// use breakerbox::{Config, Registry};
    /// use breakerbox_tower::CircuitBreakerLayer;
    /// use std::sync::Arc;
    ///
    /// let template = Config::builder().consecutive_failures(5).build()?;
    /// let registry: Arc<Registry<String>> = Arc::new(Registry::new(template, 1024)?);
    /// let layer = CircuitBreakerLayer::keyed(registry, |request: &http::Request<String>| {
    ///     request.uri().host().unwrap_or("").to_owned()
    /// });
    /// # let _ = layer;
    /// # Ok::<(), breakerbox::ConfigError>(())
    /// ```
    pub fn keyed(registry: Arc<Registry<K, B>>, key_fn: F) -> Self {
        CircuitBreakerLayer {
            select: Keyed::new(registry, key_fn),
            mode: Outcome(DefaultJudge),
        }
    }
}

impl<Sel, M> CircuitBreakerLayer<Sel, M> {
    /// Judges calls with `judge`, from the inner service's `Result` and the latency
    /// (measured through the breaker's clock when the judge asks for it). The judge is
    /// cloned into every response future: wrap a large one in an `Arc`.
    pub fn judge<J>(self, judge: J) -> CircuitBreakerLayer<Sel, Outcome<J>> {
        CircuitBreakerLayer {
            select: self.select,
            mode: Outcome(judge),
        }
    }

    /// Judges HTTP exchanges with `judge` (for services of `http::Request<_>` to
    /// `http::Response<_>`): status rules and latency at the response head, and, when the
    /// judge has business-code rules for the status, the body too. See [`Http`].
    pub fn http(self, judge: impl Into<Arc<HttpJudge>>) -> CircuitBreakerLayer<Sel, Http> {
        CircuitBreakerLayer {
            select: self.select,
            mode: Http::new(judge),
        }
    }

    /// How breakers are selected.
    pub fn selector(&self) -> &Sel {
        &self.select
    }
}

impl<S, Sel: Clone, M: Clone> Layer<S> for CircuitBreakerLayer<Sel, M> {
    type Service = CircuitBreakerService<S, Sel, M>;

    fn layer(&self, inner: S) -> Self::Service {
        CircuitBreakerService::from_parts(inner, self.select.clone(), self.mode.clone())
    }
}

impl<Sel: Clone, M: Clone> Clone for CircuitBreakerLayer<Sel, M> {
    fn clone(&self) -> Self {
        CircuitBreakerLayer {
            select: self.select.clone(),
            mode: self.mode.clone(),
        }
    }
}

impl<Sel: fmt::Debug, M: fmt::Debug> fmt::Debug for CircuitBreakerLayer<Sel, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreakerLayer")
            .field("select", &self.select)
            .field("mode", &self.mode)
            .finish()
    }
}
