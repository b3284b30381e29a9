//! Rule 21: a node's local open phase. When this node's failures make a trip rule fire
//! but too few nodes failed for the quorum, the script leaves the shared breaker closed
//! and answers "open locally": this node rejects on its own until the phase ends, while
//! the rest of the fleet keeps serving.

use std::sync::atomic::Ordering;

use breakerbox::model::TripReason;
use breakerbox::{CircuitOpen, Clock, EventKind, Nanos, Phase};

use super::Inner;

impl<C: Clock + Clone> Inner<C> {
    /// Enters a local open phase of `open_for` from now (the node's clock), or extends
    /// the running one; reports it.
    pub(crate) fn enter_local_open(&self, reason: TripReason, open_for: Nanos) {
        let until = self.clock.now().saturating_add(open_for).as_u64().max(1);
        self.local_open_until.fetch_max(until, Ordering::AcqRel);
        self.emit(EventKind::LocalOpened {
            reason,
            open_for: open_for.as_duration(),
        });
    }

    /// The time left of the local open phase at `now`, if one runs.
    pub(crate) fn local_open_left(&self, now: Nanos) -> Option<Nanos> {
        let until = self.local_open_until.load(Ordering::Acquire);
        (until > now.as_u64()).then(|| Nanos(until - now.as_u64()))
    }

    /// The rejection of a call while this node is open locally (the phase an operator
    /// would see here is open; the shared phase stays as it is). `None`: no local open
    /// phase runs, or the view is in shadow mode (rule 20: nothing is rejected).
    #[inline]
    pub(crate) fn locally_open(&self) -> Option<CircuitOpen> {
        if self.local_open_until.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let left = self.local_open_left(self.clock.now())?;
        if self.view().shadow {
            return None;
        }
        Some(CircuitOpen::new(Phase::Open, Some(left.as_duration())))
    }
}
