//! Which breaker guards a request: one for every request, or one per key.

use std::borrow::Cow;
use std::fmt::{self, Display};
use std::hash::Hash;
use std::sync::Arc;

use breakerbox::{CircuitBreaker, Clock, Registry, RegistryFull};

/// Finds the breaker that guards a request.
///
/// Two are provided: [`Single`] (one breaker for every request, what
/// [`CircuitBreakerLayer::new`](crate::CircuitBreakerLayer::new) uses) and [`Keyed`] (one
/// breaker per key from a [`Registry`], what
/// [`CircuitBreakerLayer::keyed`](crate::CircuitBreakerLayer::keyed) uses).
pub trait Select<Req> {
    /// The clock of the breakers.
    type Clock: Clock + Clone;

    /// The breaker that guards every request, if there is one. Readiness consults it: while
    /// it rejects, `poll_ready` answers ready without polling the inner service. A keyed
    /// selector answers `None`, since the key is only known from the request.
    fn gate(&self) -> Option<&CircuitBreaker<Self::Clock>>;

    /// The breaker for `request`.
    fn select(&self, request: &Req) -> Result<Cow<'_, CircuitBreaker<Self::Clock>>, RegistryFull>;
}

/// One breaker for every request.
pub struct Single<C: Clock> {
    breaker: CircuitBreaker<C>,
}

impl<C: Clock> Single<C> {
    /// Guards every request with `breaker`.
    pub fn new(breaker: CircuitBreaker<C>) -> Self {
        Single { breaker }
    }

    /// The breaker.
    pub fn breaker(&self) -> &CircuitBreaker<C> {
        &self.breaker
    }
}

impl<C: Clock> Clone for Single<C> {
    fn clone(&self) -> Self {
        Single {
            breaker: self.breaker.clone(),
        }
    }
}

impl<C: Clock> fmt::Debug for Single<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Single").field(&self.breaker).finish()
    }
}

impl<Req, C: Clock + Clone> Select<Req> for Single<C> {
    type Clock = C;

    #[inline]
    fn gate(&self) -> Option<&CircuitBreaker<C>> {
        Some(&self.breaker)
    }

    #[inline]
    fn select(&self, _request: &Req) -> Result<Cow<'_, CircuitBreaker<C>>, RegistryFull> {
        Ok(Cow::Borrowed(&self.breaker))
    }
}

/// One breaker per key, taken from a [`Registry`]; `key_fn` computes a request's key (its
/// host, its route, its tenant).
pub struct Keyed<K, C: Clock + Clone, F> {
    registry: Arc<Registry<K, C>>,
    key_fn: Arc<F>,
}

impl<K, C: Clock + Clone, F> Keyed<K, C, F> {
    /// Breakers from `registry`, one per key computed by `key_fn`.
    pub fn new(registry: Arc<Registry<K, C>>, key_fn: F) -> Self {
        Keyed {
            registry,
            key_fn: Arc::new(key_fn),
        }
    }

    /// The registry.
    pub fn registry(&self) -> &Arc<Registry<K, C>> {
        &self.registry
    }
}

impl<K, C: Clock + Clone, F> Clone for Keyed<K, C, F> {
    fn clone(&self) -> Self {
        Keyed {
            registry: self.registry.clone(),
            key_fn: self.key_fn.clone(),
        }
    }
}

impl<K, C: Clock + Clone, F> fmt::Debug for Keyed<K, C, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyed").finish_non_exhaustive()
    }
}

impl<Req, K, C, F> Select<Req> for Keyed<K, C, F>
where
    K: Hash + Eq + Clone + Display,
    C: Clock + Clone,
    F: Fn(&Req) -> K,
{
    type Clock = C;

    #[inline]
    fn gate(&self) -> Option<&CircuitBreaker<C>> {
        None
    }

    fn select(&self, request: &Req) -> Result<Cow<'_, CircuitBreaker<C>>, RegistryFull> {
        let key = (self.key_fn)(request);
        self.registry.get(&key).map(Cow::Owned)
    }
}
