//! Events: transitions, rejections, stale results and (for engines with a shared store)
//! outages and repairs, delivered to listeners outside any critical section.

use std::sync::Arc;
use std::time::Duration;

use crate::model::{Transition, TripReason};
use crate::CircuitOpen;

/// Something a breaker did. Every engine reports through these kinds; the in-memory
/// engine never reports the store ones (outages, repairs).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventKind {
    /// The phase changed.
    Transition(Transition),
    /// A call was rejected.
    Rejected(CircuitOpen),
    /// Rule 20: in shadow mode, a call that would have been rejected (with this
    /// rejection) was admitted with a passthrough permit.
    ShadowRejected(CircuitOpen),
    /// Rule 21: a failure-driven rule fired without the quorum of nodes, so this node
    /// (only) opened its own view; the shared breaker stays closed. Shared engines only.
    LocalOpened {
        /// The rule that fired.
        reason: TripReason,
        /// How long the node rejects locally.
        open_for: Duration,
    },
    /// A result or release from an older generation was dropped.
    StaleResult {
        /// The permit's generation.
        generation: u64,
    },
    /// The engine's shared store (Redis) stopped answering: its fallback decides until the
    /// store is back. Reported once per outage episode.
    OutageStarted {
        /// The first error of the episode.
        error: String,
    },
    /// The shared store answers again and the state was resynchronised.
    OutageEnded {
        /// How long the engine ran on its fallback.
        lasted: Duration,
        /// What the engine pushed to the store while resynchronising (e.g. `"trip"`,
        /// `"force_open"`), if anything.
        pushed: Option<&'static str>,
    },
    /// A corrupt or foreign value in the shared store was replaced by a fresh closed
    /// state.
    CorruptStateRepaired {
        /// What was wrong.
        reason: String,
    },
}

/// An event of the breaker named `breaker`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Event<'a> {
    /// The breaker's name.
    pub breaker: &'a str,
    /// What happened.
    pub kind: EventKind,
}

impl<'a> Event<'a> {
    /// An event of `breaker`, for engines outside this crate that report through
    /// [`Listener`].
    pub fn new(breaker: &'a str, kind: EventKind) -> Self {
        Event { breaker, kind }
    }
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
        emit_event(&self.list, &Event { breaker, kind });
    }
}

/// Delivers `event` to every listener of `listeners` (and to `tracing` with the
/// `tracing` feature): how every engine reports.
pub fn emit_event(listeners: &[Arc<dyn Listener>], event: &Event<'_>) {
    #[cfg(feature = "tracing")]
    trace_event(event);
    for listener in listeners {
        listener.on_event(event);
    }
}

#[cfg(feature = "tracing")]
fn trace_event(event: &Event<'_>) {
    match &event.kind {
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
            reason = open.reason().as_str(),
            retry_after_ms = open.retry_after().map(|d| d.as_millis() as u64),
            "call rejected"
        ),
        EventKind::ShadowRejected(open) => tracing::debug!(
            target: "breakerbox",
            breaker = event.breaker,
            phase = open.phase().as_str(),
            reason = open.reason().as_str(),
            retry_after_ms = open.retry_after().map(|d| d.as_millis() as u64),
            "call admitted in shadow mode; it would have been rejected"
        ),
        EventKind::LocalOpened { reason, open_for } => tracing::warn!(
            target: "breakerbox",
            breaker = event.breaker,
            reason = reason.as_str(),
            open_for_ms = open_for.as_millis() as u64,
            "this node opened locally: a rule fired without the quorum of nodes"
        ),
        EventKind::StaleResult { generation } => tracing::debug!(
            target: "breakerbox",
            breaker = event.breaker,
            generation = *generation,
            "stale result dropped"
        ),
        EventKind::OutageStarted { error } => tracing::warn!(
            target: "breakerbox",
            breaker = event.breaker,
            error = error.as_str(),
            "shared store unreachable; the fallback decides"
        ),
        EventKind::OutageEnded { lasted, pushed } => tracing::info!(
            target: "breakerbox",
            breaker = event.breaker,
            lasted_ms = lasted.as_millis() as u64,
            pushed = pushed.unwrap_or("nothing"),
            "shared store back; state resynchronised"
        ),
        EventKind::CorruptStateRepaired { reason } => tracing::warn!(
            target: "breakerbox",
            breaker = event.breaker,
            reason = reason.as_str(),
            "corrupt shared state repaired"
        ),
    }
}
