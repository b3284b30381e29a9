//! Rule 21: the quorum against one bad node. A shared breaker's closed phase remembers
//! which nodes failed recently (at most `quorum` of them, each with its latest failure),
//! so a failure-driven trip can ask whether enough distinct nodes saw the dependency
//! fail, rather than one node with a broken network path.
//!
//! Rule numbers ("rule 21") refer to `docs/RULES.md` in the repository.

use super::{
    fired_rules, recorded, Decision, ModelState, ModelWindow, Step, TransitionReason, TripReason,
    WindowCounts,
};
use crate::{Config, Nanos};

/// One node's latest failure in the closed phase.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct NodeFailure {
    /// The node that reported it.
    pub node: u64,
    /// Its sequence number: the n-th non-ignored outcome of the closed phase has n.
    pub seq: u64,
    /// When it was recorded (the time the window filed it, rule 7).
    pub at: Nanos,
}

/// What the closed phase keeps for the quorum (empty while `quorum` is 1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QuorumTrack {
    /// Non-ignored outcomes recorded in this closed phase (the last one's sequence).
    pub calls: u64,
    /// The sequence of the current failure streak's first failure.
    pub streak_from: u64,
    /// The nodes whose latest failures are the most recent, at most `quorum` of them,
    /// oldest first (by sequence).
    pub nodes: Vec<NodeFailure>,
}

impl QuorumTrack {
    /// Files one non-ignored outcome of `node` at `now`: every outcome takes the next
    /// sequence; a failure makes `node` the most recent failing node (dropping the
    /// oldest beyond `quorum`), and one that began a streak marks the streak's start.
    pub fn record(&mut self, node: u64, failed: bool, began_streak: bool, now: Nanos, quorum: u32) {
        self.calls += 1;
        if !failed {
            return;
        }
        if began_streak {
            self.streak_from = self.calls;
        }
        self.nodes.retain(|f| f.node != node);
        self.nodes.push(NodeFailure {
            node,
            seq: self.calls,
            at: now,
        });
        // The youngest `quorum` entries are all a quorum can need.
        let extra = self.nodes.len().saturating_sub(quorum.max(1) as usize);
        self.nodes.drain(..extra);
    }

    /// Whether the rule that fired (`reason`) has its quorum of `quorum` nodes at `now`:
    /// for consecutive failures, nodes whose latest failure is within the current streak;
    /// for the failure rate, nodes whose latest failure the window still holds (a count
    /// window's last `size` outcomes, a time window's buckets). The slow-call rate needs
    /// no quorum.
    pub fn met(&self, reason: TripReason, window: &ModelWindow, now: Nanos, quorum: u32) -> bool {
        let within = |f: &&NodeFailure| match reason {
            TripReason::ConsecutiveFailures => f.seq >= self.streak_from,
            TripReason::FailureRate => match window {
                ModelWindow::None => true,
                ModelWindow::Count { size, .. } => f.seq.saturating_add(*size as u64) > self.calls,
                ModelWindow::Time { width, buckets } => {
                    let width = width.as_u64().max(1);
                    let (current, index) = (now.as_u64() / width, f.at.as_u64() / width);
                    index <= current && current - index < buckets.len() as u64
                }
            },
            TripReason::SlowCallRate => true,
        };
        reason == TripReason::SlowCallRate
            || self.nodes.iter().filter(within).count() >= quorum as usize
    }
}

impl ModelState {
    /// Rule 21: the first rule that fired and has its quorum trips; a rule that fired
    /// without one tells the reporting node to open locally if it reported a failure. A trip
    /// is a closed phase's trip like any other (a ramp over by now ends first, rule 23).
    pub(super) fn quorum_trip(
        &mut self,
        counts: WindowCounts,
        (failed, retry_hint): (bool, Option<Nanos>),
        now: Nanos,
        config: &Config,
        r: f64,
    ) -> Step {
        let mut local = None;
        for reason in fired_rules(config, self.consecutive_failures, counts) {
            if self.quorum.met(reason, &self.window, now, config.quorum) {
                let reason = TransitionReason::Tripped(reason);
                return Step {
                    decision: Decision::Recorded,
                    transition: Some(self.trip_closed(now, config, r, retry_hint, reason)),
                };
            }
            local.get_or_insert(reason);
        }
        match local {
            Some(reason) if failed => recorded(Decision::LocalOpen {
                reason,
                open_for: config.open_duration_with_hint(
                    self.trips.saturating_add(1),
                    0.0,
                    retry_hint,
                ),
            }),
            _ => recorded(Decision::Recorded),
        }
    }
}
