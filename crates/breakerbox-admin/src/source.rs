//! Where the admin service finds its breakers: [`BreakerSource`], asked on every request,
//! so a registry that grows (or forgets idle breakers) is seen as it is now.

use std::any::Any;
use std::collections::HashSet;
use std::fmt::Display;
use std::hash::Hash;
use std::sync::Arc;

use breakerbox::contract::{Breaker, DynBreaker};
use breakerbox::Registry;
use serde_json::{Map, Value};

/// One breaker as the admin service sees it: the breaker (any engine, behind the core's
/// [`DynBreaker`]) and optional details that its status entry shows besides the
/// breaker's own state (where it routes, what it protects, counters of your own).
///
/// ```
/// use breakerbox::CircuitBreaker;
/// use breakerbox_admin::Listed;
///
/// let breaker = CircuitBreaker::builder().name("payments").build()?;
/// let listed = Listed::new(breaker).with_detail("upstream", "http://10.0.0.7:8080");
/// assert_eq!(listed.name(), "payments");
/// assert_eq!(listed.details()["upstream"], "http://10.0.0.7:8080");
/// # Ok::<(), breakerbox::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Listed {
    breaker: DynBreaker,
    details: Map<String, Value>,
}

impl Listed {
    /// `breaker`, of any engine (a [`DynBreaker`] is taken as it is, not wrapped again).
    pub fn new<B: Breaker>(breaker: B) -> Listed {
        let breaker = match (&breaker as &dyn Any).downcast_ref::<DynBreaker>() {
            Some(erased) => erased.clone(),
            None => DynBreaker::new(breaker),
        };
        Listed {
            breaker,
            details: Map::new(),
        }
    }

    /// Adds `key: value` to the breaker's status entry. Details are written after the
    /// breaker's own fields, so a detail named like one of them replaces it.
    pub fn with_detail(mut self, key: impl Into<String>, value: impl Into<Value>) -> Listed {
        self.details.insert(key.into(), value.into());
        self
    }

    /// The breaker's name.
    pub fn name(&self) -> &str {
        self.breaker.name()
    }

    /// The breaker.
    pub fn breaker(&self) -> &DynBreaker {
        &self.breaker
    }

    /// The details added with [`Listed::with_detail`].
    pub fn details(&self) -> &Map<String, Value> {
        &self.details
    }
}

/// A set of breakers the admin service serves, listed anew for every request.
///
/// Implemented by [`Listed`] (one breaker), `Vec<Listed>` (a fixed set), the core's
/// [`Registry`] of any engine (the in-memory one, or `breakerbox_redis::RedisNode::registry`),
/// and `Arc<T>` of any source. Implement it for a set of your own: the proxy of the
/// `breakerbox` command lists its upstreams with their routes and counters.
///
/// ```
/// use breakerbox::CircuitBreaker;
/// use breakerbox_admin::{BreakerSource, Listed};
///
/// /// Two breakers that always exist.
/// struct Dependencies {
///     payments: CircuitBreaker,
///     search: CircuitBreaker,
/// }
///
/// impl BreakerSource for Dependencies {
///     fn breakers(&self) -> Vec<Listed> {
///         vec![Listed::new(self.payments.clone()), Listed::new(self.search.clone())]
///     }
/// }
/// ```
pub trait BreakerSource: Send + Sync + 'static {
    /// Every breaker now, in the order the service lists them.
    fn breakers(&self) -> Vec<Listed>;

    /// The breaker named `name`, if there is one now. Never creates a breaker (a typo in
    /// an admin action must not add one). The default searches [`BreakerSource::breakers`].
    fn breaker(&self, name: &str) -> Option<Listed> {
        self.breakers().into_iter().find(|b| b.name() == name)
    }
}

impl<T: BreakerSource + ?Sized> BreakerSource for Arc<T> {
    fn breakers(&self) -> Vec<Listed> {
        (**self).breakers()
    }

    fn breaker(&self, name: &str) -> Option<Listed> {
        (**self).breaker(name)
    }
}

impl<T: BreakerSource + ?Sized> BreakerSource for Box<T> {
    fn breakers(&self) -> Vec<Listed> {
        (**self).breakers()
    }

    fn breaker(&self, name: &str) -> Option<Listed> {
        (**self).breaker(name)
    }
}

impl BreakerSource for Listed {
    fn breakers(&self) -> Vec<Listed> {
        vec![self.clone()]
    }

    fn breaker(&self, name: &str) -> Option<Listed> {
        (self.name() == name).then(|| self.clone())
    }
}

impl BreakerSource for Vec<Listed> {
    fn breakers(&self) -> Vec<Listed> {
        self.clone()
    }

    fn breaker(&self, name: &str) -> Option<Listed> {
        self.iter().find(|b| b.name() == name).cloned()
    }
}

/// The breakers the registry holds now, sorted by name. Listing them does not create
/// one; while a request holds a handle, that breaker is not idle (so not evicted).
impl<K, B> BreakerSource for Registry<K, B>
where
    K: Hash + Eq + Clone + Display + Send + Sync + 'static,
    B: Breaker,
    Registry<K, B>: Send + Sync,
{
    fn breakers(&self) -> Vec<Listed> {
        Registry::breakers(self)
            .into_iter()
            .map(|(_, breaker)| Listed::new(breaker))
            .collect()
    }

    fn breaker(&self, name: &str) -> Option<Listed> {
        Registry::breakers(self)
            .into_iter()
            .find(|(_, breaker)| breaker.name() == name)
            .map(|(_, breaker)| Listed::new(breaker))
    }
}

/// The sources of one service, in the order they were added. A name listed by more than
/// one source is served from the first.
#[derive(Clone, Default)]
pub(crate) struct Sources(pub(crate) Vec<Arc<dyn BreakerSource>>);

impl Sources {
    /// Every breaker now, first source first, each name once.
    pub(crate) fn list(&self) -> Vec<Listed> {
        let mut seen = HashSet::new();
        let mut all = Vec::new();
        for source in &self.0 {
            for listed in source.breakers() {
                if seen.insert(listed.name().to_string()) {
                    all.push(listed);
                }
            }
        }
        all
    }

    /// The breaker named `name`, from the first source that has it.
    pub(crate) fn find(&self, name: &str) -> Option<Listed> {
        self.0.iter().find_map(|source| source.breaker(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use breakerbox::{CircuitBreaker, Config};

    #[test]
    fn a_dyn_breaker_is_listed_as_it_is_and_a_registry_is_listed_as_it_grows() {
        let breaker = CircuitBreaker::builder().name("one").build().unwrap();
        let erased = DynBreaker::new(breaker.clone());
        breaker.force_open();
        let listed = Listed::new(erased.clone());
        assert_eq!(listed.breaker().phase(), breakerbox::Phase::ForcedOpen);
        assert!(
            format!("{:?}", listed.breaker())
                .matches("DynBreaker")
                .count()
                == 1
        );

        let registry =
            Arc::new(Registry::<String>::new(Config::builder().build().unwrap(), 10).unwrap());
        let sources = Sources(vec![Arc::new(listed), registry.clone()]);
        assert_eq!(sources.list().len(), 1);
        registry.get(&"b".to_string()).unwrap();
        registry.get(&"one".to_string()).unwrap();
        let names: Vec<String> = sources
            .list()
            .iter()
            .map(|l| l.name().to_string())
            .collect();
        assert_eq!(names, ["one", "b"]);
        // The first source wins a shared name.
        assert_eq!(
            sources.find("one").unwrap().breaker().phase(),
            breakerbox::Phase::ForcedOpen
        );
        assert!(sources.find("nope").is_none());
        assert_eq!(registry.len(), 2, "finding created nothing");
    }
}
