//! Events: transitions, rejections and stale results, delivered to listeners outside any
//! critical section.

use std::sync::Arc;

use crate::model::Transition;
use crate::CircuitOpen;

/// Something a breaker did.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventKind {
    /// The phase changed.
    Transition(Transition),
    /// A call was rejected.
    Rejected(CircuitOpen),
    /// A result or release from an older generation was dropped.
    StaleResult {
        /// The permit's generation.
        generation: u64,
    },
}

/// An event of the breaker named `breaker`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Event<'a> {
    /// The breaker's name.
    pub breaker: &'a str,
    /// What happened.
    pub kind: EventKind,
}

/// Receives events. Called on the thread that caused the event, after the breaker has
/// released its lock, so a listener may call back into the breaker.
///
/// ```
/// use breakerbox::{CircuitBreaker, Event, EventKind};
/// use std::sync::{Arc, Mutex};
///
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let log = seen.clone();
/// let breaker = CircuitBreaker::builder()
///     .name("payments")
///     .listener(move |event: &Event<'_>| {
///         if let EventKind::Transition(t) = event.kind {
///             log.lock().unwrap().push(format!("{}: {} -> {}", event.breaker, t.from, t.to));
///         }
///     })
///     .build()
///     .unwrap();
/// breaker.force_open();
/// assert_eq!(seen.lock().unwrap().as_slice(), ["payments: closed -> forced_open"]);
/// ```
pub trait Listener: Send + Sync + 'static {
    /// Called for every event.
    fn on_event(&self, event: &Event<'_>);
}

impl<F: Fn(&Event<'_>) + Send + Sync + 'static> Listener for F {
    fn on_event(&self, event: &Event<'_>) {
        self(event)
    }
}

/// The listeners of one breaker.
#[derive(Clone, Default)]
pub(crate) struct Listeners {
    list: Vec<Arc<dyn Listener>>,
}

impl Listeners {
    pub(crate) fn push(&mut self, listener: Arc<dyn Listener>) {
        self.list.push(listener);
    }

    /// Whether anything wants rejection events (the hot path asks before building one).
    #[inline]
    pub(crate) fn active(&self) -> bool {
        !self.list.is_empty() || cfg!(feature = "tracing")
    }

    pub(crate) fn emit(&self, breaker: &str, kind: EventKind) {
        let event = Event { breaker, kind };
        #[cfg(feature = "tracing")]
        trace_event(&event);
        for listener in &self.list {
            listener.on_event(&event);
        }
    }
}

#[cfg(feature = "tracing")]
fn trace_event(event: &Event<'_>) {
    match event.kind {
        EventKind::Transition(t) => tracing::info!(
            target: "breakerbox",
            breaker = event.breaker,
            from = t.from.as_str(),
            to = t.to.as_str(),
            generation = t.generation,
            reason = t.reason.as_str(),
            "circuit breaker transition"
        ),
        EventKind::Rejected(open) => tracing::trace!(
            target: "breakerbox",
            breaker = event.breaker,
            phase = open.phase().as_str(),
            retry_after_ms = open.retry_after().map(|d| d.as_millis() as u64),
            "call rejected"
        ),
        EventKind::StaleResult { generation } => tracing::debug!(
            target: "breakerbox",
            breaker = event.breaker,
            generation,
            "stale result dropped"
        ),
    }
}
