//! Breakers per key (host, endpoint, tenant), created on demand, for any engine.

use std::collections::HashMap;
use std::fmt::Display;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use crate::contract::Breaker;
use crate::{CircuitBreaker, Clock, Config, ConfigError, Listener, MonotonicClock, Snapshot};

/// The registry holds `capacity` breakers and none could be evicted: every one is open,
/// half-open, forced, disabled or in use.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RegistryFull {
    /// The registry's capacity.
    pub capacity: usize,
}

impl std::fmt::Display for RegistryFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "circuit breaker registry is full ({} breakers, none idle and closed)",
            self.capacity
        )
    }
}

impl std::error::Error for RegistryFull {}

struct Entry<B> {
    breaker: B,
    last_used: AtomicU64,
}

/// Makes the breaker of a new key: its name (the key) and the registry's listeners in.
type Factory<B> = dyn Fn(&str, &[Arc<dyn Listener>]) -> Result<B, ConfigError> + Send + Sync;

/// Breakers per key, created on demand, bounded in number, for any engine: in-memory
/// breakers from one template config ([`Registry::new`], [`Registry::with_clock`]), or any
/// [`Breaker`] from a factory ([`Registry::with_factory`]; `breakerbox-redis` makes one
/// whose breakers share the state with every process, over one connection).
///
/// When full, a new key evicts the least recently used breaker that is idle
/// ([`Breaker::is_idle`]: closed, nothing pending, no handle or permit held outside the
/// registry). Open, half-open and manually overridden breakers are never evicted, so
/// unique keys cannot wipe out what the registry has learnt about failing dependencies;
/// if nothing can go, `get` answers [`RegistryFull`].
///
/// ```
/// use breakerbox::{Config, Registry};
///
/// let registry = Registry::new(Config::builder().consecutive_failures(2).build()?, 1000)?;
/// let api = registry.get(&"api.example.com".to_string())?;
/// let again = registry.get(&"api.example.com".to_string())?;
/// api.force_open();
/// assert_eq!(again.phase(), breakerbox::Phase::ForcedOpen);
/// assert_eq!(api.name(), "api.example.com");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Registry<K, B: Breaker = CircuitBreaker<MonotonicClock>> {
    template: Option<Config>,
    clock: B::Clock,
    capacity: usize,
    listeners: Vec<Arc<dyn Listener>>,
    factory: Arc<Factory<B>>,
    map: RwLock<HashMap<K, Entry<B>>>,
}

impl<K, B: Breaker> std::fmt::Debug for Registry<K, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("capacity", &self.capacity)
            .field("len", &self.map.read().map_or(0, |m| m.len()))
            .finish_non_exhaustive()
    }
}

impl<K: Hash + Eq + Clone + Display> Registry<K, CircuitBreaker<MonotonicClock>> {
    /// A registry of at most `capacity` in-memory breakers built from `template`.
    pub fn new(template: Config, capacity: usize) -> Result<Self, ConfigError> {
        Registry::with_clock(template, capacity, MonotonicClock)
    }
}

impl<K: Hash + Eq + Clone + Display, C: Clock + Clone> Registry<K, CircuitBreaker<C>> {
    /// A registry of in-memory breakers built from `template` that use `clock`.
    pub fn with_clock(template: Config, capacity: usize, clock: C) -> Result<Self, ConfigError> {
        template.validate()?;
        let config = template.clone();
        let breaker_clock = clock.clone();
        let mut registry = Registry::with_factory(capacity, clock, move |name, listeners| {
            let mut builder = CircuitBreaker::builder()
                .config(config.clone())
                .name(name)
                .clock(breaker_clock.clone());
            for listener in listeners {
                builder = builder.shared_listener(listener.clone());
            }
            builder.build()
        });
        registry.template = Some(template);
        Ok(registry)
    }
}

impl<K: Hash + Eq + Clone + Display, B: Breaker> Registry<K, B> {
    /// A registry of at most `capacity` breakers that `factory` makes from a key's name
    /// and the registry's listeners; `clock` orders keys by last use.
    pub fn with_factory(
        capacity: usize,
        clock: B::Clock,
        factory: impl Fn(&str, &[Arc<dyn Listener>]) -> Result<B, ConfigError> + Send + Sync + 'static,
    ) -> Self {
        Registry {
            template: None,
            clock,
            capacity: capacity.max(1),
            listeners: Vec::new(),
            factory: Arc::new(factory),
            map: RwLock::new(HashMap::new()),
        }
    }

    /// Adds a listener to every breaker created from now on.
    pub fn with_listener(mut self, listener: Arc<dyn Listener>) -> Self {
        self.listeners.push(listener);
        self
    }

    /// The template config, for a registry made from one.
    pub fn template(&self) -> Option<&Config> {
        self.template.as_ref()
    }

    /// The registry's capacity.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The breaker for `key`, created if needed.
    pub fn get(&self, key: &K) -> Result<B, RegistryFull> {
        let now = self.clock.now_coarse().as_u64();
        {
            let map = self.map.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(entry) = map.get(key) {
                if entry.last_used.load(Ordering::Relaxed) != now {
                    entry.last_used.store(now, Ordering::Relaxed);
                }
                return Ok(entry.breaker.clone());
            }
        }
        let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = map.get(key) {
            return Ok(entry.breaker.clone());
        }
        if map.len() >= self.capacity {
            let victim = map
                .iter()
                .filter(|(_, e)| e.breaker.is_idle())
                .min_by_key(|(_, e)| e.last_used.load(Ordering::Relaxed))
                .map(|(k, _)| k.clone());
            match victim {
                Some(victim) => {
                    map.remove(&victim);
                }
                None => {
                    return Err(RegistryFull {
                        capacity: self.capacity,
                    })
                }
            }
        }
        // A template is validated by the constructor, so this cannot fail; were it to,
        // the key gets no breaker rather than a panic.
        let breaker =
            (self.factory)(&key.to_string(), &self.listeners).map_err(|_| RegistryFull {
                capacity: self.capacity,
            })?;
        map.insert(
            key.clone(),
            Entry {
                breaker: breaker.clone(),
                last_used: AtomicU64::new(now),
            },
        );
        Ok(breaker)
    }

    /// How many breakers the registry holds.
    pub fn len(&self) -> usize {
        self.map
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether the registry holds no breaker.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every breaker with its key, sorted by name.
    pub fn breakers(&self) -> Vec<(K, B)> {
        let map = self.map.read().unwrap_or_else(PoisonError::into_inner);
        let mut all: Vec<(K, B)> = map
            .iter()
            .map(|(k, e)| (k.clone(), e.breaker.clone()))
            .collect();
        all.sort_by(|a, b| a.1.name().cmp(b.1.name()));
        all
    }

    /// Removes `key`'s breaker (handles already given out keep working on their own).
    pub fn remove(&self, key: &K) -> Option<B> {
        self.map
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key)
            .map(|e| e.breaker)
    }
}

impl<K: Hash + Eq + Clone + Display, C: Clock + Clone> Registry<K, CircuitBreaker<C>> {
    /// Snapshots of every breaker, sorted by name.
    pub fn snapshots(&self) -> Vec<Snapshot> {
        self.breakers()
            .iter()
            .map(|(_, breaker)| breaker.snapshot())
            .collect()
    }
}
