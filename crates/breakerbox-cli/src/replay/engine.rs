//! Replaying call attempts through the pure model on an explicit clock.
//!
//! Each event is one call attempt at its timestamp: the breaker is asked for a permit; a
//! rejected call is counted; an admitted call is judged by the HTTP judge and its verdict
//! is recorded when the call ends (timestamp + latency), so a probe that is still in flight
//! keeps its half-open slot. Outcomes due at or before an attempt are applied first. A call
//! longer than its permit's deadline (rule 22) ends at the deadline as a timeout failure.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use breakerbox::model::{Decision, ModelState, Operation, PermitKind, TransitionReason};
use breakerbox::{Config, JitterSource, Nanos, Phase, SplitMix, Verdict};
use breakerbox_http::{AfterHead, HttpJudge, Judgement, TransportError};
use http::{HeaderMap, StatusCode};
use serde::Serialize;

use super::timeline::Timeline;

/// The counts a replay ends with.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Stats {
    /// Call attempts replayed.
    pub events: u64,
    /// Calls the breaker let through (probes included).
    pub admitted: u64,
    /// Calls the breaker rejected.
    pub rejected: u64,
    /// Rejected calls that the trace says would have failed.
    pub rejected_would_fail: u64,
    /// Rule 23: rejected calls (counted in `rejected`) that the ramp after a recovery
    /// turned away while the breaker was closed.
    pub ramp_rejections: u64,
    /// Rule 20: with `shadow = true`, calls admitted that the breaker would have rejected
    /// (they are also in `admitted`; `rejected` stays zero).
    pub shadow_rejections: u64,
    /// Those of them that the trace says failed.
    pub shadow_rejections_failed: u64,
    /// Calls let through that failed.
    pub failed_let_through: u64,
    /// Those failures by reason (`status 503`, `slow`, `transport: no response`...).
    pub failures_by_reason: BTreeMap<String, u64>,
    /// Half-open probes sent.
    pub probes: u64,
    /// Closed -> open transitions.
    pub trips: u64,
    /// Half-open -> open transitions (a failed probe, or half-open timing out).
    pub reopens: u64,
    /// Half-open -> closed transitions.
    pub closes: u64,
    /// Time spent open, in milliseconds.
    pub time_open_ms: f64,
    /// Time spent half-open, in milliseconds.
    pub time_half_open_ms: f64,
    /// From the first event to the last call's end, in milliseconds.
    pub span_ms: f64,
}

/// An admitted call whose verdict is recorded when it ends.
#[derive(Copy, Clone, Debug)]
struct Pending {
    at: Nanos,
    seq: u64,
    generation: u64,
    probe: bool,
    verdict: Verdict,
    latency: Nanos,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Pending) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Pending {}

impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Pending) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Pending {
    fn cmp(&self, other: &Pending) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// A replay in progress.
pub struct Replayer {
    config: Config,
    judge: HttpJudge,
    pointer: Option<Vec<String>>,
    headers: HeaderMap,
    state: ModelState,
    jitter: Option<SplitMix>,
    pending: BinaryHeap<Reverse<Pending>>,
    seq: u64,
    origin: Option<i128>,
    now: Nanos,
    end: Nanos,
    phase: Phase,
    phase_since: Nanos,
    stats: Stats,
    time_in: [u64; 5],
    timeline: Option<Timeline>,
}

impl Replayer {
    /// A replay of `config` judged by `judge`. `pointer` is the JSON pointer a trace's
    /// error code is placed at for the judge (the judge's first business pointer).
    /// `timeline` keeps what the SVG chart needs. A trace is one node's calls, and a
    /// quorum (rule 21) counts nodes: a config with one is replayed as without it, the
    /// trips the node's own rules make.
    pub fn new(
        mut config: Config,
        judge: HttpJudge,
        pointer: Option<String>,
        timeline: bool,
    ) -> Replayer {
        config.quorum = 1;
        let state = ModelState::new(&config);
        let jitter = (config.jitter > 0.0).then(|| SplitMix::new(0x5EED));
        Replayer {
            pointer: pointer.map(|p| split_pointer(&p)),
            config,
            judge,
            headers: HeaderMap::new(),
            state,
            jitter,
            pending: BinaryHeap::new(),
            seq: 0,
            origin: None,
            now: Nanos::ZERO,
            end: Nanos::ZERO,
            phase: Phase::Closed,
            phase_since: Nanos::ZERO,
            stats: Stats::default(),
            time_in: [0; 5],
            timeline: timeline.then(Timeline::new),
        }
    }

    /// Replays one call attempt that started at `timestamp` (nanoseconds, any origin: the
    /// first event is time zero; an earlier timestamp than the last one is taken as the
    /// last one), answered with `status` (0: no response) after `latency` nanoseconds.
    pub fn call(&mut self, timestamp: i128, status: u16, latency: u64, error_code: Option<&str>) {
        let origin = *self.origin.get_or_insert(timestamp);
        let t = Nanos(u64::try_from(timestamp - origin).unwrap_or(0)).max(self.now);
        self.now = t;
        self.apply_due(t);
        self.stats.events += 1;
        let r = self.sample();
        let shadowed_before = self.state.shadow_rejections;
        let step = self.state.apply(Operation::Acquire, t, &self.config, r);
        let shadowed = self.state.shadow_rejections != shadowed_before;
        self.observe(step.transition.map(|tr| tr.reason), t);
        let latency = Nanos(latency);
        match step.decision {
            Decision::Admitted { generation, kind } => {
                let probe = kind == PermitKind::Probe;
                // Rule 22: a call longer than its deadline was cancelled at the deadline
                // (as the adapters do): judged a timeout, its outcome recorded then.
                let (judgement, latency) = self.judge_within(kind, status, latency, error_code);
                self.stats.admitted += 1;
                if probe {
                    self.stats.probes += 1;
                }
                let failed = judgement.verdict == Verdict::Failure;
                if let Some(tl) = &mut self.timeline {
                    tl.call(t, failed);
                }
                if shadowed {
                    self.stats.shadow_rejections += 1;
                    if failed {
                        self.stats.shadow_rejections_failed += 1;
                    }
                }
                if failed {
                    self.stats.failed_let_through += 1;
                    let reason = reason_key(&judgement);
                    match self.stats.failures_by_reason.get_mut(reason) {
                        Some(n) => *n += 1,
                        None => {
                            self.stats.failures_by_reason.insert(reason.to_owned(), 1);
                        }
                    }
                }
                let at = t.saturating_add(latency);
                self.end = self.end.max(at);
                if kind == PermitKind::Passthrough {
                    return;
                }
                let pending = Pending {
                    at,
                    seq: self.seq,
                    generation,
                    probe,
                    verdict: judgement.verdict,
                    latency,
                };
                self.seq += 1;
                if latency == Nanos::ZERO && self.pending.is_empty() {
                    self.apply_outcome(pending);
                } else {
                    self.pending.push(Reverse(pending));
                }
            }
            decision => {
                self.stats.rejected += 1;
                if let Decision::Rejected {
                    phase: Phase::Closed,
                    ..
                } = decision
                {
                    self.stats.ramp_rejections += 1;
                }
                let (judgement, _) =
                    self.judge_within(PermitKind::Normal, status, latency, error_code);
                let failed = judgement.verdict == Verdict::Failure;
                if failed {
                    self.stats.rejected_would_fail += 1;
                }
                if let Some(tl) = &mut self.timeline {
                    tl.call(t, failed);
                }
            }
        }
    }

    fn apply_due(&mut self, t: Nanos) {
        while let Some(Reverse(p)) = self.pending.peek().copied() {
            if p.at > t {
                break;
            }
            self.pending.pop();
            self.apply_outcome(p);
        }
    }

    fn apply_outcome(&mut self, p: Pending) {
        let kind = if p.probe {
            PermitKind::Probe
        } else {
            PermitKind::Normal
        };
        let r = self.sample();
        let step = self.state.apply(
            Operation::Outcome {
                generation: p.generation,
                kind,
                verdict: p.verdict,
                latency: p.latency,
                retry_hint: None,
                age: Nanos::ZERO,
                node: 0,
            },
            p.at,
            &self.config,
            r,
        );
        self.observe(step.transition.map(|tr| tr.reason), p.at);
    }

    fn sample(&self) -> f64 {
        self.jitter.as_ref().map_or(0.0, JitterSource::sample)
    }

    /// Judges a call made with a permit of `kind` under rule 22: one that took longer than
    /// the permit's deadline is a transport timeout after the deadline (the call would have
    /// been cancelled then), whatever the trace says it answered; any other is judged as
    /// recorded. Returns the judgement and the latency the call ends after.
    fn judge_within(
        &self,
        kind: PermitKind,
        status: u16,
        latency: Nanos,
        code: Option<&str>,
    ) -> (Judgement, Nanos) {
        let probe = kind == PermitKind::Probe;
        match self.config.deadline(kind).map(Nanos::from_duration) {
            Some(deadline) if latency > deadline => {
                let mut exchange = self.judge.exchange(probe);
                let judgement =
                    exchange.on_transport_error(TransportError::Timeout, deadline.as_duration());
                (judgement, deadline)
            }
            _ => (self.judge(status, latency, code, probe), latency),
        }
    }

    /// Judges one recorded exchange through the same sans-IO exchange judge as the proxy,
    /// the tower layer and the reqwest middleware: the head, then (only when a rule asks)
    /// a body carrying the recorded business code.
    fn judge(&self, status: u16, latency: Nanos, code: Option<&str>, probe: bool) -> Judgement {
        let latency = latency.as_duration();
        let mut exchange = self.judge.exchange(probe);
        let Ok(status) = StatusCode::from_u16(status) else {
            return exchange.on_transport_error(TransportError::NoResponse, latency);
        };
        match exchange.on_head(status, &self.headers, latency) {
            AfterHead::Judged(judgement) => judgement,
            AfterHead::ReadBody { .. } => {
                let body = match (code, &self.pointer) {
                    (Some(code), Some(pointer)) => Some(body_with_code(pointer, code)),
                    _ => None,
                };
                exchange.on_body(body.as_deref())
            }
            // A trace records no trailers: a gRPC status in them is not known.
            AfterHead::AwaitTrailers => exchange.on_trailers(None),
        }
    }

    /// Keeps the phase accounting and transition counts up to date after an operation.
    fn observe(&mut self, reason: Option<TransitionReason>, at: Nanos) {
        if let Some(reason) = reason {
            match reason {
                TransitionReason::Tripped(_) => self.stats.trips += 1,
                TransitionReason::ProbeFailed | TransitionReason::HalfOpenTimedOut => {
                    self.stats.reopens += 1
                }
                TransitionReason::ProbesSucceeded => self.stats.closes += 1,
                _ => {}
            }
        }
        let phase = self.state.phase;
        if phase != self.phase {
            self.leave_phase(at);
            self.phase = phase;
            if let Some(tl) = &mut self.timeline {
                tl.phase(at, phase);
            }
        }
    }

    fn leave_phase(&mut self, at: Nanos) {
        let spent = at.saturating_sub(self.phase_since).as_u64();
        self.time_in[self.phase.index()] += spent;
        self.phase_since = at;
    }

    /// Applies every outstanding outcome and returns the counts (and the timeline).
    pub fn finish(mut self) -> (Stats, Option<Timeline>) {
        self.apply_due(Nanos::MAX);
        let end = self.end.max(self.now);
        self.leave_phase(end);
        let ms = |n: u64| n as f64 / 1e6;
        self.stats.time_open_ms = ms(self.time_in[Phase::Open.index()]);
        self.stats.time_half_open_ms = ms(self.time_in[Phase::HalfOpen.index()]);
        self.stats.span_ms = ms(end.as_u64());
        if let Some(tl) = &mut self.timeline {
            tl.end(end);
        }
        (self.stats, self.timeline)
    }
}

/// A failure's reason for counting: latency reasons (`slow 1.2s > 800ms`) as one `slow`.
fn reason_key(judgement: &Judgement) -> &str {
    let reason = judgement.reason.as_ref();
    if reason.starts_with("slow ") {
        "slow"
    } else {
        reason
    }
}

/// The tokens of a JSON pointer (`/error/code` -> `["error", "code"]`).
fn split_pointer(pointer: &str) -> Vec<String> {
    pointer
        .split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// A JSON body holding `code` at `pointer`, for the judge's business rules.
fn body_with_code(pointer: &[String], code: &str) -> Vec<u8> {
    let mut value = serde_json::Value::String(code.to_owned());
    for token in pointer.iter().rev() {
        let mut map = serde_json::Map::new();
        map.insert(token.clone(), value);
        value = serde_json::Value::Object(map);
    }
    serde_json::to_vec(&value).unwrap_or_default()
}
