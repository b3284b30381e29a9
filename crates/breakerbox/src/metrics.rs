//! Metrics through the [`metrics`] facade (feature `metrics`): any exporter works
//! (`metrics-exporter-prometheus`, OpenTelemetry through its metrics bridge, ...).
//!
//! | metric | type | labels | what |
//! |---|---|---|---|
//! | `breakerbox_state` | gauge | `breaker`, `phase` | 1 for the phase the breaker is in (as this process sees it), 0 for the others |
//! | `breakerbox_calls_total` | counter | `breaker`, `verdict` | recorded outcomes (probes included) by verdict |
//! | `breakerbox_probes_total` | counter | `breaker`, `verdict` | half-open probe outcomes by verdict |
//! | `breakerbox_rejections_total` | counter | `breaker`, `phase`, `reason` | rejected calls, by the phase that rejected them and why (`open`; `ramp`: a closed phase ramping up, rule 23) |
//! | `breakerbox_shadow_rejections_total` | counter | `breaker`, `phase`, `reason` | calls admitted in shadow mode that would have been rejected, by that phase and reason |
//! | `breakerbox_transitions_total` | counter | `breaker`, `from`, `to` | phase changes made by this process |
//! | `breakerbox_stale_results_total` | counter | `breaker` | results of an older generation, dropped |
//! | `breakerbox_local_opens_total` | counter | `breaker`, `reason` | rule 21: local open phases of this node (a rule fired without the quorum of nodes; shared engines) |
//! | `breakerbox_store_outage` | gauge | `breaker` | 1 while a shared engine's store is away and its fallback decides |
//! | `breakerbox_store_outages_total` | counter | `breaker` | outage episodes |
//! | `breakerbox_store_repairs_total` | counter | `breaker` | corrupt stored states replaced |
//!
//! Calls, probes and the phase are counted by the engine itself from the moment it is
//! built (so install the recorder first: the engine keeps its handles); the rest comes
//! from events, through a [`MetricsListener`] attached to each breaker. The names and
//! labels are those of `breakerbox proxy`'s `/metrics`.
//!
//! ```
//! use breakerbox::metrics::MetricsListener;
//! use breakerbox::CircuitBreaker;
//!
//! // Install an exporter's recorder first, e.g. metrics_exporter_prometheus.
//! breakerbox::metrics::describe();
//! let breaker = CircuitBreaker::builder()
//!     .name("payments")
//!     .listener(MetricsListener)
//!     .build()
//!     .unwrap();
//! breaker.force_open();
//! ```

use metrics::{counter, describe_counter, describe_gauge, gauge, Counter};

use crate::events::{Event, EventKind, Listener};
use crate::model::PermitKind;
use crate::{Phase, Verdict};

const VERDICTS: [Verdict; 3] = [Verdict::Success, Verdict::Failure, Verdict::Ignore];

/// Registers the help text of every metric with the installed recorder.
pub fn describe() {
    describe_gauge!(
        "breakerbox_state",
        "1 for the phase each breaker is in, 0 for the others."
    );
    describe_counter!(
        "breakerbox_calls_total",
        "Recorded outcomes (probes included) by verdict."
    );
    describe_counter!(
        "breakerbox_probes_total",
        "Half-open probe outcomes by verdict."
    );
    describe_counter!(
        "breakerbox_rejections_total",
        "Calls rejected without reaching the dependency, by the phase that rejected them and why (open, or ramp: a recovery admitting a fraction)."
    );
    describe_counter!(
        "breakerbox_shadow_rejections_total",
        "Calls admitted in shadow mode that would have been rejected, by that phase and reason."
    );
    describe_counter!(
        "breakerbox_transitions_total",
        "Phase changes made by this process."
    );
    describe_counter!(
        "breakerbox_stale_results_total",
        "Results dropped because their permit was from an older generation."
    );
    describe_counter!(
        "breakerbox_local_opens_total",
        "Local open phases this node entered: a rule fired without the quorum of nodes."
    );
    describe_gauge!(
        "breakerbox_store_outage",
        "1 while the shared store is away and the fallback decides."
    );
    describe_counter!(
        "breakerbox_store_outages_total",
        "Episodes of the shared store being away."
    );
    describe_counter!(
        "breakerbox_store_repairs_total",
        "Corrupt stored states replaced by a fresh closed state."
    );
}

/// Sets `breakerbox_state` of `breaker` to `phase` (1 for it, 0 for the other phases).
/// Engines call it when the phase they see changes.
pub fn set_phase(breaker: &str, phase: Phase) {
    for p in Phase::ALL {
        gauge!("breakerbox_state", "breaker" => breaker.to_string(), "phase" => p.as_str())
            .set(f64::from(u8::from(p == phase)));
    }
}

/// The counters one engine bumps on every outcome: handles taken once, at build, so an
/// outcome costs one relaxed atomic add per counter.
#[derive(Debug)]
pub struct OutcomeCounters {
    calls: [Counter; 3],
    probes: [Counter; 3],
}

fn verdict_index(verdict: Verdict) -> usize {
    match verdict {
        Verdict::Success => 0,
        Verdict::Failure => 1,
        Verdict::Ignore => 2,
    }
}

impl OutcomeCounters {
    /// The counters of `breaker`, from the recorder installed now.
    pub fn new(breaker: &str) -> Self {
        let of = |name: &'static str| {
            VERDICTS
                .map(|v| counter!(name, "breaker" => breaker.to_string(), "verdict" => v.as_str()))
        };
        OutcomeCounters {
            calls: of("breakerbox_calls_total"),
            probes: of("breakerbox_probes_total"),
        }
    }

    /// Counts one outcome of a permit of `kind`.
    #[inline]
    pub fn record(&self, kind: PermitKind, verdict: Verdict) {
        let i = verdict_index(verdict);
        if let Some(c) = self.calls.get(i) {
            c.increment(1);
        }
        if kind == PermitKind::Probe {
            if let Some(c) = self.probes.get(i) {
                c.increment(1);
            }
        }
    }
}

/// A [`Listener`] that turns events into metrics: rejections, transitions (and the phase
/// gauge), stale results, store outages and repairs.
#[derive(Copy, Clone, Debug, Default)]
pub struct MetricsListener;

impl Listener for MetricsListener {
    fn on_event(&self, event: &Event<'_>) {
        let breaker = event.breaker.to_string();
        match &event.kind {
            EventKind::Transition(t) => {
                counter!(
                    "breakerbox_transitions_total",
                    "breaker" => breaker,
                    "from" => t.from.as_str(),
                    "to" => t.to.as_str()
                )
                .increment(1);
                set_phase(event.breaker, t.to);
            }
            EventKind::Rejected(open) => {
                counter!(
                    "breakerbox_rejections_total",
                    "breaker" => breaker,
                    "phase" => open.phase().as_str(),
                    "reason" => open.reason().as_str()
                )
                .increment(1);
            }
            EventKind::ShadowRejected(open) => {
                counter!(
                    "breakerbox_shadow_rejections_total",
                    "breaker" => breaker,
                    "phase" => open.phase().as_str(),
                    "reason" => open.reason().as_str()
                )
                .increment(1);
            }
            EventKind::StaleResult { .. } => {
                counter!("breakerbox_stale_results_total", "breaker" => breaker).increment(1);
            }
            EventKind::LocalOpened { reason, .. } => {
                counter!(
                    "breakerbox_local_opens_total",
                    "breaker" => breaker,
                    "reason" => reason.as_str()
                )
                .increment(1);
            }
            EventKind::OutageStarted { .. } => {
                counter!("breakerbox_store_outages_total", "breaker" => breaker.clone())
                    .increment(1);
                gauge!("breakerbox_store_outage", "breaker" => breaker).set(1.0);
            }
            EventKind::OutageEnded { .. } => {
                gauge!("breakerbox_store_outage", "breaker" => breaker).set(0.0);
            }
            EventKind::CorruptStateRepaired { .. } => {
                counter!("breakerbox_store_repairs_total", "breaker" => breaker).increment(1);
            }
        }
    }
}
