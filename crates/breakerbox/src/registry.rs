//! Breakers per key (host, endpoint, tenant), created on demand from a template.

use std::collections::HashMap;
use std::fmt::Display;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use crate::{
    CircuitBreaker, Clock, Config, ConfigError, Listener, MonotonicClock, Phase, Snapshot,
};

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

struct Entry<C: Clock> {
    breaker: CircuitBreaker<C>,
    last_used: AtomicU64,
}

/// Breakers per key, created from one template config, bounded in number.
///
/// When full, a new key evicts the least recently used breaker that is closed and idle (no
/// handle or permit held outside the registry). Open, half-open and manually overridden
/// breakers are never evicted, so unique keys cannot wipe out what the registry has learnt
/// about failing dependencies; if nothing can go, `get` answers [`RegistryFull`].
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
pub struct Registry<K, C: Clock + Clone = MonotonicClock> {
    template: Config,
    clock: C,
    capacity: usize,
    listeners: Vec<Arc<dyn Listener>>,
    map: RwLock<HashMap<K, Entry<C>>>,
}

impl<K, C: Clock + Clone> std::fmt::Debug for Registry<K, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("template", &self.template)
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl<K: Hash + Eq + Clone + Display> Registry<K, MonotonicClock> {
    /// A registry of at most `capacity` breakers built from `template`.
    pub fn new(template: Config, capacity: usize) -> Result<Self, ConfigError> {
        Registry::with_clock(template, capacity, MonotonicClock)
    }
}

impl<K: Hash + Eq + Clone + Display, C: Clock + Clone> Registry<K, C> {
    /// A registry whose breakers use `clock`.
    pub fn with_clock(template: Config, capacity: usize, clock: C) -> Result<Self, ConfigError> {
        template.validate()?;
        Ok(Registry {
            template,
            clock,
            capacity: capacity.max(1),
            listeners: Vec::new(),
            map: RwLock::new(HashMap::new()),
        })
    }

    /// Adds a listener to every breaker created from now on.
    pub fn with_listener(mut self, listener: Arc<dyn Listener>) -> Self {
        self.listeners.push(listener);
        self
    }

    /// The template config.
    pub fn template(&self) -> &Config {
        &self.template
    }

    /// The breaker for `key`, created if needed.
    pub fn get(&self, key: &K) -> Result<CircuitBreaker<C>, RegistryFull> {
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
                .filter(|(_, e)| e.breaker.phase() == Phase::Closed && e.breaker.handles() == 1)
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
        let mut builder = CircuitBreaker::builder()
            .config(self.template.clone())
            .name(key.to_string())
            .clock(self.clock.clone());
        for listener in &self.listeners {
            builder = builder.shared_listener(listener.clone());
        }
        // The template was validated by the constructor, so this cannot fail; were it to,
        // the key gets no breaker rather than a panic.
        let breaker = builder.build().map_err(|_| RegistryFull {
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

    /// Snapshots of every breaker, sorted by name.
    pub fn snapshots(&self) -> Vec<Snapshot> {
        let map = self.map.read().unwrap_or_else(PoisonError::into_inner);
        let mut all: Vec<Snapshot> = map.values().map(|e| e.breaker.snapshot()).collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    /// Removes `key`'s breaker (handles already given out keep working on their own).
    pub fn remove(&self, key: &K) -> Option<CircuitBreaker<C>> {
        self.map
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key)
            .map(|e| e.breaker)
    }
}
