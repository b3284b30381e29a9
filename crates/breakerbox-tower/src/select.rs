//! Which breaker guards a request: one for every request, or one per key.

use std::borrow::Cow;
use std::fmt::{self, Display};
use std::hash::Hash;
use std::sync::Arc;

use breakerbox::contract::Breaker;
use breakerbox::{Registry, RegistryFull};

/// Finds the breaker that guards a request.
///
/// Two are provided: [`Single`] (one breaker for every request, what
/// [`CircuitBreakerLayer::new`](crate::CircuitBreakerLayer::new) uses) and [`Keyed`] (one
/// breaker per key from a [`Registry`], what
/// [`CircuitBreakerLayer::keyed`](crate::CircuitBreakerLayer::keyed) uses).
pub trait Select<Req> {
    /// The breakers' engine: the in-memory [`CircuitBreaker`](breakerbox::CircuitBreaker),
    /// a `breakerbox_redis::RedisBreaker`, or any [`Breaker`].
    type Breaker: Breaker;

    /// The breaker that guards every request, if there is one. Readiness consults it: while
    /// it rejects, `poll_ready` answers ready without polling the inner service. A keyed
    /// selector answers `None`, since the key is only known from the request.
    fn gate(&self) -> Option<&Self::Breaker>;

    /// The breaker for `request`.
    fn select(&self, request: &Req) -> Result<Cow<'_, Self::Breaker>, RegistryFull>;
}

/// One breaker for every request.
#[derive(Clone, Debug)]
pub struct Single<B> {
    breaker: B,
}

impl<B: Breaker> Single<B> {
    /// Guards every request with `breaker`.
    pub fn new(breaker: B) -> Self {
        Single { breaker }
    }

    /// The breaker.
    pub fn breaker(&self) -> &B {
        &self.breaker
    }
}

impl<Req, B: Breaker> Select<Req> for Single<B> {
    type Breaker = B;

    #[inline]
    fn gate(&self) -> Option<&B> {
        Some(&self.breaker)
    }

    #[inline]
    fn select(&self, _request: &Req) -> Result<Cow<'_, B>, RegistryFull> {
        Ok(Cow::Borrowed(&self.breaker))
    }
}

/// One breaker per key, taken from a [`Registry`]; `key_fn` computes a request's key (its
/// host, its route, its tenant).
pub struct Keyed<K, B: Breaker, F> {
    registry: Arc<Registry<K, B>>,
    key_fn: Arc<F>,
}

impl<K, B: Breaker, F> Keyed<K, B, F> {
    /// Breakers from `registry`, one per key computed by `key_fn`.
    pub fn new(registry: Arc<Registry<K, B>>, key_fn: F) -> Self {
        Keyed {
            registry,
            key_fn: Arc::new(key_fn),
        }
    }

    /// The registry.
    pub fn registry(&self) -> &Arc<Registry<K, B>> {
        &self.registry
    }
}

impl<K, B: Breaker, F> Clone for Keyed<K, B, F> {
    fn clone(&self) -> Self {
        Keyed {
            registry: self.registry.clone(),
            key_fn: self.key_fn.clone(),
        }
    }
}

impl<K, B: Breaker, F> fmt::Debug for Keyed<K, B, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyed").finish_non_exhaustive()
    }
}

impl<Req, K, B, F> Select<Req> for Keyed<K, B, F>
where
    K: Hash + Eq + Clone + Display,
    B: Breaker,
    F: Fn(&Req) -> K,
{
    type Breaker = B;

    #[inline]
    fn gate(&self) -> Option<&B> {
        None
    }

    fn select(&self, request: &Req) -> Result<Cow<'_, B>, RegistryFull> {
        let key = (self.key_fn)(request);
        self.registry.get(&key).map(Cow::Owned)
    }
}
