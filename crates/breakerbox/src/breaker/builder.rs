//! Building a [`CircuitBreaker`].

use std::sync::Arc;
use std::time::Duration;

use super::Engine;
use crate::events::Listeners;
use crate::{
    CircuitBreaker, Clock, Config, ConfigBuilder, ConfigError, JitterSource, Listener,
    MonotonicClock, SplitMix,
};

/// Builds a [`CircuitBreaker`]: the config setters of [`ConfigBuilder`], plus a name, a
/// clock, listeners and a jitter source. `build` validates everything.
///
/// ```
/// use breakerbox::{CircuitBreaker, ManualClock};
/// use std::time::Duration;
///
/// let breaker = CircuitBreaker::builder()
///     .name("inventory")
///     .failure_rate(0.5)
///     .count_window(100)
///     .min_calls(20)
///     .slow_call_threshold(Duration::from_millis(800))
///     .slow_call_rate(0.8)
///     .recovery_timeout(Duration::from_secs(5))
///     .backoff(2.0, Duration::from_secs(60))
///     .max_probes(2)
///     .required_successes(3)
///     .clock(ManualClock::new())
///     .build()
///     .unwrap();
/// assert_eq!(breaker.name(), "inventory");
///
/// let err = CircuitBreaker::builder().max_probes(0).build().unwrap_err();
/// assert_eq!(err.to_string(), "invalid value 0 for `max_probes`: expected 1..=4095");
/// ```
pub struct Builder<C> {
    config: ConfigBuilder,
    clock: C,
    name: Option<String>,
    listeners: Listeners,
    jitter: Option<Arc<dyn JitterSource>>,
}

impl<C: std::fmt::Debug> std::fmt::Debug for Builder<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("config", &self.config)
            .field("clock", &self.clock)
            .field("name", &self.name)
            .field("jitter", &self.jitter.is_some())
            .finish_non_exhaustive()
    }
}

macro_rules! forward {
    ($($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),*);)*) => {
        $(
            $(#[$doc])*
            pub fn $name(mut self, $($arg: $ty),*) -> Self {
                self.config = self.config.$name($($arg),*);
                self
            }
        )*
    };
}

impl Builder<MonotonicClock> {
    pub(crate) fn new() -> Self {
        Builder {
            config: ConfigBuilder::default(),
            clock: MonotonicClock,
            name: None,
            listeners: Listeners::default(),
            jitter: None,
        }
    }
}

impl<C: Clock> Builder<C> {
    forward! {
        /// See [`ConfigBuilder::consecutive_failures`].
        consecutive_failures(n: u32);
        /// See [`ConfigBuilder::failure_rate`].
        failure_rate(rate: f64);
        /// See [`ConfigBuilder::slow_call_rate`].
        slow_call_rate(rate: f64);
        /// See [`ConfigBuilder::slow_call_threshold`].
        slow_call_threshold(threshold: Duration);
        /// See [`ConfigBuilder::count_window`].
        count_window(size: u32);
        /// See [`ConfigBuilder::time_window`].
        time_window(duration: Duration, buckets: u32);
        /// See [`ConfigBuilder::min_calls`].
        min_calls(n: u32);
        /// See [`ConfigBuilder::recovery_timeout`].
        recovery_timeout(timeout: Duration);
        /// See [`ConfigBuilder::backoff`].
        backoff(multiplier: f64, max: Duration);
        /// See [`ConfigBuilder::jitter`].
        jitter(fraction: f64);
        /// See [`ConfigBuilder::max_probes`].
        max_probes(n: u32);
        /// See [`ConfigBuilder::required_successes`].
        required_successes(n: u32);
        /// See [`ConfigBuilder::half_open_timeout`].
        half_open_timeout(timeout: Duration);
        /// See [`ConfigBuilder::shadow`] (rule 20).
        shadow(on: bool);
        /// See [`ConfigBuilder::call_timeout`] (rule 22).
        call_timeout(timeout: Duration);
        /// See [`ConfigBuilder::probe_timeout`] (rule 22).
        probe_timeout(timeout: Duration);
        /// See [`ConfigBuilder::quorum`] (rule 21; this engine refuses more than 1).
        quorum(k: u32);
        /// See [`ConfigBuilder::ramp`] (rule 23).
        ramp(start: f64, duration: Duration);
    }

    /// Starts from a ready config (later setters still apply on top of it).
    pub fn config(mut self, config: Config) -> Self {
        self.config = ConfigBuilder::from(config);
        self
    }

    /// Names the breaker (for events, logs and metrics). Default: `"default"`.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Adds a listener for transitions, rejections and stale results.
    pub fn listener(mut self, listener: impl Listener) -> Self {
        self.listeners.push(Arc::new(listener));
        self
    }

    /// Adds a shared listener.
    pub fn shared_listener(mut self, listener: Arc<dyn Listener>) -> Self {
        self.listeners.push(listener);
        self
    }

    /// The randomness for jitter (default: a generator seeded from the clock).
    pub fn jitter_source(mut self, source: impl JitterSource) -> Self {
        self.jitter = Some(Arc::new(source));
        self
    }

    /// Uses another clock, e.g. a [`crate::ManualClock`] in tests.
    pub fn clock<C2: Clock>(self, clock: C2) -> Builder<C2> {
        Builder {
            config: self.config,
            clock,
            name: self.name,
            listeners: self.listeners,
            jitter: self.jitter,
        }
    }

    /// Validates the config and builds the breaker. A `quorum` above 1 is refused: this
    /// engine is one node, whose failures could never make a quorum (rule 21; a quorum
    /// is for shared breakers, e.g. breakerbox-redis).
    pub fn build(self) -> Result<CircuitBreaker<C>, ConfigError> {
        let config = self.config.build()?;
        if config.has_quorum() {
            return Err(ConfigError::new(
                "quorum",
                config.quorum,
                "1: the in-memory engine is one node (a quorum is for shared breakers)",
            ));
        }
        let jitter = match self.jitter {
            Some(source) => Some(source),
            None if config.jitter > 0.0 => {
                let seed = self.clock.now().as_u64() ^ (&config as *const Config as u64);
                Some(Arc::new(SplitMix::new(seed)) as Arc<dyn JitterSource>)
            }
            None => None,
        };
        let name: Arc<str> = Arc::from(self.name.as_deref().unwrap_or("default"));
        Ok(CircuitBreaker::from_engine(Engine::new(
            config,
            self.clock,
            name,
            self.listeners,
            jitter,
        )))
    }
}
