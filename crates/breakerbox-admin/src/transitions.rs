//! [`TransitionLog`]: the recent phase changes of the breakers it listens to, for the
//! status document and the dashboard's table.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use breakerbox::model::Transition;
use breakerbox::{Clock, Event, EventKind, Listener, MonotonicClock, Nanos};

/// How many transitions a [`TransitionLog::new`] keeps.
pub const DEFAULT_TRANSITIONS: usize = 50;

/// A [`Listener`] that keeps the last transitions of every breaker it is attached to
/// (oldest dropped first). Cloning is cheap; clones share the log.
///
/// Attach it to each breaker (`.listener(log.clone())` on a builder,
/// `Registry::with_listener(Arc::new(log.clone()))`) and give it to
/// [`AdminServiceBuilder::transitions`](crate::AdminServiceBuilder::transitions): the
/// status document lists them and the dashboard shows them.
///
/// ```
/// use breakerbox::CircuitBreaker;
/// use breakerbox_admin::TransitionLog;
///
/// let log = TransitionLog::new();
/// let breaker = CircuitBreaker::builder().name("payments").listener(log.clone()).build()?;
/// breaker.force_open();
/// let recent = log.recent();
/// assert_eq!(recent[0].breaker, "payments");
/// assert_eq!(recent[0].transition.to, breakerbox::Phase::ForcedOpen);
/// # Ok::<(), breakerbox::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct TransitionLog {
    inner: Arc<Inner>,
}

struct Inner {
    capacity: usize,
    clock: MonotonicClock,
    entries: Mutex<VecDeque<RecordedTransition>>,
}

/// One transition a [`TransitionLog`] kept.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordedTransition {
    /// The breaker's name.
    pub breaker: String,
    /// The phase change.
    pub transition: Transition,
    /// When it was seen, on the log's clock ([`TransitionLog::now`]).
    pub at: Nanos,
}

impl TransitionLog {
    /// A log of the last [`DEFAULT_TRANSITIONS`] transitions.
    pub fn new() -> TransitionLog {
        TransitionLog::with_capacity(DEFAULT_TRANSITIONS)
    }

    /// A log of the last `capacity` transitions (at least one).
    pub fn with_capacity(capacity: usize) -> TransitionLog {
        let capacity = capacity.max(1);
        TransitionLog {
            inner: Arc::new(Inner {
                capacity,
                clock: MonotonicClock,
                entries: Mutex::new(VecDeque::with_capacity(capacity)),
            }),
        }
    }

    /// The kept transitions, newest first.
    pub fn recent(&self) -> Vec<RecordedTransition> {
        let entries = self
            .inner
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        entries.iter().rev().cloned().collect()
    }

    /// Now, on the log's clock: `now() - at` is a transition's age.
    pub fn now(&self) -> Nanos {
        self.inner.clock.now()
    }
}

impl Default for TransitionLog {
    fn default() -> TransitionLog {
        TransitionLog::new()
    }
}

impl fmt::Debug for TransitionLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TransitionLog")
            .field("capacity", &self.inner.capacity)
            .finish_non_exhaustive()
    }
}

impl Listener for TransitionLog {
    fn on_event(&self, event: &Event<'_>) {
        let EventKind::Transition(transition) = &event.kind else {
            return;
        };
        let recorded = RecordedTransition {
            breaker: event.breaker.to_string(),
            transition: *transition,
            at: self.inner.clock.now(),
        };
        let mut entries = self
            .inner
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= self.inner.capacity {
            entries.pop_front();
        }
        entries.push_back(recorded);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use breakerbox::CircuitBreaker;

    #[test]
    fn the_log_keeps_the_newest_transitions_up_to_its_capacity() {
        let log = TransitionLog::with_capacity(2);
        let breaker = CircuitBreaker::builder()
            .name("a")
            .listener(log.clone())
            .build()
            .unwrap();
        breaker.force_open();
        breaker.reset();
        breaker.disable();
        let recent = log.recent();
        assert_eq!(recent.len(), 2);
        assert_eq!(recent[0].transition.to, breakerbox::Phase::Disabled);
        assert_eq!(recent[1].transition.to, breakerbox::Phase::Closed);
    }
}
