//! Counters per upstream and recent transitions (the admin service's status and
//! `/metrics` read them).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use breakerbox::model::Transition;
use breakerbox::model::TripReason;
use breakerbox::{Event, EventKind, Listener, Phase, RejectReason, Verdict};
use breakerbox_admin::TransitionLog;
use breakerbox_http::Judgement;

use super::exposition::Exposition;
use super::health::HealthStats;
use super::upload::ClientFault;

/// The rules a local open (rule 21) can be for, in the order of [`Stats`]'s counters.
pub const TRIP_REASONS: [TripReason; 3] = [
    TripReason::ConsecutiveFailures,
    TripReason::FailureRate,
    TripReason::SlowCallRate,
];

/// Every reason a breaker rejects a call for, in the order of [`Stats`]'s counters.
pub const REJECT_REASONS: [RejectReason; 2] = [RejectReason::Open, RejectReason::Ramp];

/// The counter of `reason`; a reason a later core adds counts as `open` until it has one.
fn reason_index(reason: RejectReason) -> usize {
    match reason {
        RejectReason::Ramp => 1,
        _ => 0,
    }
}

/// The counters of one upstream.
#[derive(Default)]
pub struct Stats {
    calls: [AtomicU64; 3],
    /// By [`RejectReason`]: `open` and `ramp`.
    rejections: [AtomicU64; 2],
    overloaded: AtomicU64,
    shadow_rejections: AtomicU64,
    stale: AtomicU64,
    /// Rule 21: local opens of this node's view of a shared breaker, by the rule that
    /// fired (in [`TRIP_REASONS`] order).
    local_opens: [AtomicU64; TRIP_REASONS.len()],
    upstream_errors: [AtomicU64; UpstreamError::ALL.len()],
    client_errors: [AtomicU64; CLIENT_FAULTS.len()],
    transitions: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    last: Mutex<Option<Judgement>>,
    /// Rule 24: the health checks, and the requests they held back.
    pub health: HealthStats,
}

/// Why no response came from an upstream.
#[derive(Copy, Clone, Debug)]
pub enum UpstreamError {
    /// The connection could not be made.
    Connect,
    /// No answer within `request_timeout`.
    Timeout,
    /// Anything else (reset, protocol error).
    Other,
    /// The response body ended before its declared end.
    BodyTruncated,
    /// The response body did not arrive within `request_timeout`.
    BodyTimeout,
}

impl UpstreamError {
    pub(super) const ALL: [UpstreamError; 5] = [
        UpstreamError::Connect,
        UpstreamError::Timeout,
        UpstreamError::Other,
        UpstreamError::BodyTruncated,
        UpstreamError::BodyTimeout,
    ];

    pub(super) fn as_str(self) -> &'static str {
        match self {
            UpstreamError::Connect => "connect",
            UpstreamError::Timeout => "timeout",
            UpstreamError::Other => "other",
            UpstreamError::BodyTruncated => "body_truncated",
            UpstreamError::BodyTimeout => "body_timeout",
        }
    }
}

/// Client faults, in the order of their counters.
pub(super) const CLIENT_FAULTS: [ClientFault; 4] = [
    ClientFault::Stalled,
    ClientFault::Gone,
    ClientFault::Malformed,
    ClientFault::TooLarge,
];

fn client_fault_index(fault: ClientFault) -> usize {
    match fault {
        ClientFault::Stalled => 0,
        ClientFault::Gone => 1,
        ClientFault::Malformed => 2,
        ClientFault::TooLarge => 3,
    }
}

pub(super) const VERDICTS: [Verdict; 3] = [Verdict::Success, Verdict::Failure, Verdict::Ignore];

fn verdict_index(v: Verdict) -> usize {
    match v {
        Verdict::Success => 0,
        Verdict::Failure => 1,
        Verdict::Ignore => 2,
    }
}

impl Stats {
    /// Counts a forwarded call's verdict.
    #[inline]
    pub fn call(&self, verdict: Verdict) {
        self.calls[verdict_index(verdict)].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a forwarded call's judgement and keeps it as the last one seen (best
    /// effort: skipped while another thread is storing its own).
    #[inline]
    pub fn judged(&self, judgement: Judgement) {
        self.call(judgement.verdict);
        if let Ok(mut last) = self.last.try_lock() {
            *last = Some(judgement);
        }
    }

    /// The judgement of the last forwarded call, if any.
    pub fn last_judgement(&self) -> Option<Judgement> {
        self.last.lock().ok()?.clone()
    }

    /// Counts a request answered 503 by the breaker, for `reason`.
    #[inline]
    pub fn rejected(&self, reason: RejectReason) {
        self.rejections[reason_index(reason)].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a request answered 503 `overloaded` by the upstream's concurrency limits
    /// (never a call: the breaker did not see it).
    #[inline]
    pub fn overloaded(&self) {
        self.overloaded.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an upstream that gave no response.
    pub fn upstream_error(&self, kind: UpstreamError) {
        self.upstream_errors[kind as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a request its client spoiled (not judged).
    pub fn client_fault(&self, fault: ClientFault) {
        self.client_errors[client_fault_index(fault)].fetch_add(1, Ordering::Relaxed);
    }

    /// Calls so far with `verdict`.
    pub fn calls(&self, verdict: Verdict) -> u64 {
        self.calls[verdict_index(verdict)].load(Ordering::Relaxed)
    }

    /// Requests rejected so far (by the breaker, and while a health check probes).
    pub fn rejections(&self) -> u64 {
        let by_breaker: u64 = REJECT_REASONS.iter().map(|&r| self.rejections_for(r)).sum();
        by_breaker + self.health.rejections()
    }

    /// Requests rejected so far for `reason` (rule 23: `ramp` while a recovery ramps up).
    pub fn rejections_for(&self, reason: RejectReason) -> u64 {
        self.rejections[reason_index(reason)].load(Ordering::Relaxed)
    }

    /// Requests answered 503 `overloaded` so far.
    pub fn overloads(&self) -> u64 {
        self.overloaded.load(Ordering::Relaxed)
    }

    /// Requests forwarded in shadow mode that the breaker would have rejected (rule 20),
    /// as this process saw them.
    pub fn shadow_rejections(&self) -> u64 {
        self.shadow_rejections.load(Ordering::Relaxed)
    }

    /// Stale results so far.
    pub fn stale(&self) -> u64 {
        self.stale.load(Ordering::Relaxed)
    }

    /// Rule 21: times this node opened its own view of a shared breaker because `reason`
    /// fired without the quorum of nodes (the shared breaker stayed closed).
    pub fn local_opens(&self, reason: TripReason) -> u64 {
        self.local_open_counter(reason)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// The counter of local opens for `reason`.
    fn local_open_counter(&self, reason: TripReason) -> Option<&AtomicU64> {
        let i = TRIP_REASONS.iter().position(|&r| r == reason)?;
        self.local_opens.get(i)
    }

    /// Requests that got no response, of `kind`, so far.
    pub fn upstream_errors(&self, kind: UpstreamError) -> u64 {
        self.upstream_errors[kind as usize].load(Ordering::Relaxed)
    }

    /// Requests spoiled by their client with `fault`, so far.
    pub fn client_errors(&self, fault: ClientFault) -> u64 {
        self.client_errors[client_fault_index(fault)].load(Ordering::Relaxed)
    }

    /// Phase changes so far, by (from, to).
    pub fn transitions(&self) -> Vec<((&'static str, &'static str), u64)> {
        self.transitions
            .lock()
            .map(|map| map.iter().map(|(k, n)| (*k, *n)).collect())
            .unwrap_or_default()
    }

    fn transition(&self, t: &Transition) {
        if let Ok(mut map) = self.transitions.lock() {
            *map.entry((t.from.as_str(), t.to.as_str())).or_insert(0) += 1;
        }
    }
}

/// Receives every breaker's events and keeps the counters, and the recent transitions
/// (for the admin service's status and dashboard). One per config: a reload makes the
/// next one with [`Recorder::next`], which shares the counters of the names it keeps.
pub struct Recorder {
    stats: BTreeMap<String, Arc<Stats>>,
    transitions: TransitionLog,
    exposition: Exposition,
}

impl Recorder {
    /// A recorder for these breaker names.
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> Recorder {
        Recorder {
            stats: names
                .into_iter()
                .map(|n| (n.to_string(), Arc::default()))
                .collect(),
            transitions: TransitionLog::new(),
            exposition: Exposition::new(),
        }
    }

    /// The recorder of the next config (a reload), for these breaker names: a name this
    /// one knows keeps its counters (shared: the breakers that report here and those that
    /// report there count in one place), a new name starts at zero, and the transition
    /// log is the same. Its exposition is new, so `/metrics` shows only these names.
    pub fn next<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Recorder {
        Recorder {
            stats: names
                .into_iter()
                .map(|n| {
                    (
                        n.to_string(),
                        self.stats.get(n).cloned().unwrap_or_default(),
                    )
                })
                .collect(),
            transitions: self.transitions.clone(),
            exposition: Exposition::new(),
        }
    }

    /// The counters of `name`.
    #[inline]
    pub fn stats(&self, name: &str) -> Option<&Stats> {
        self.stats.get(name).map(|s| &**s)
    }

    /// The recent transitions of every upstream's breaker.
    pub fn transitions(&self) -> &TransitionLog {
        &self.transitions
    }

    fn transition(&self, breaker: &str, t: &Transition) {
        if let Some(stats) = self.stats.get(breaker) {
            stats.transition(t);
        }
    }

    fn stale(&self, breaker: &str) {
        if let Some(stats) = self.stats.get(breaker) {
            stats.stale.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn local_opened(&self, breaker: &str, reason: TripReason) {
        if let Some(counter) = self
            .stats
            .get(breaker)
            .and_then(|s| s.local_open_counter(reason))
        {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn shadow_rejected(&self, breaker: &str) {
        if let Some(stats) = self.stats.get(breaker) {
            stats.shadow_rejections.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Listener for Recorder {
    fn on_event(&self, event: &Event<'_>) {
        match &event.kind {
            EventKind::Transition(t) => {
                self.transition(event.breaker, t);
                self.transitions.on_event(event);
            }
            EventKind::StaleResult { .. } => self.stale(event.breaker),
            EventKind::ShadowRejected(_) => self.shadow_rejected(event.breaker),
            EventKind::LocalOpened { reason, .. } => self.local_opened(event.breaker, *reason),
            // Rejections are counted where they happen; kinds added later are not metrics.
            _ => {}
        }
    }
}

/// The Prometheus text exposition of every breaker: `(name, phase as seen here)`, and
/// the reloads so far (`ok`, `error`), written by the recorder's exporter (see
/// [`super::exposition`]).
pub fn render(recorder: &Recorder, breakers: &[(&str, Phase)], reloads: [u64; 2]) -> String {
    recorder.exposition.render(recorder, breakers, reloads)
}
