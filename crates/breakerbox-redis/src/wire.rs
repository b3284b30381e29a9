//! What goes over the wire: the config as a script argument, and the scripts' replies.

use breakerbox::config::WindowKind;
use breakerbox::model::{Decision, Transition};
use breakerbox::model::{PermitKind, TransitionReason, TripReason, WindowCounts};
use breakerbox::{Config, Nanos, Phase};
use redis::Value;

/// Whole microseconds of a duration (sub-microsecond parts are dropped: the Redis engine
/// keeps time in microseconds).
/// More outcomes than a batch reply can stand for (a node's buffer holds far fewer).
const MAX_BATCH_OUTCOMES: u64 = 1 << 24;

pub(crate) fn micros(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

/// The config as `lua/common.lua`'s `parse_config` reads it, with the probe lease.
pub(crate) fn encode_config(config: &Config, probe_lease: std::time::Duration) -> String {
    let (wk, wsize, wwidth, wbuckets) = match config.rate.map(|rule| rule.window) {
        None => ("n", 0, 0, 0),
        Some(WindowKind::Count { size }) => ("c", u64::from(size), 0, 0),
        Some(kind @ WindowKind::Time { buckets, .. }) => {
            let width_us = kind
                .bucket_width()
                .map_or(1, |w| (w.as_u64() / 1000).max(1));
            ("t", 0, width_us, u64::from(buckets))
        }
    };
    let rule = config.rate;
    let fppm = rule.and_then(|r| r.failure_rate).map_or(0, |r| r.ppm());
    let sppm = rule.and_then(|r| r.slow_rate).map_or(0, |r| r.ppm());
    let minc = rule.map_or(0, |r| r.min_calls);
    let slow = config
        .slow_call_threshold
        .map_or(-1, |t| i128::from(micros(t)) as i64);
    // Rule 22: the deadline of each kind, resolved here by the core's one definition.
    let deadline = |kind: PermitKind| {
        config
            .deadline(kind)
            .map_or(-1, |d| i64::try_from(micros(d)).unwrap_or(i64::MAX))
    };
    format!(
        "{},{},{},{},{},{},{},{},{},{},{:?},{},{:?},{},{},{},{},{},{},{},{},{},{}",
        config.consecutive_failures.unwrap_or(0),
        wk,
        wsize,
        wwidth,
        wbuckets,
        fppm,
        sppm,
        minc,
        slow,
        micros(config.recovery_timeout),
        config.backoff_multiplier,
        micros(config.max_open_duration),
        config.jitter,
        config.max_probes,
        config.required_successes,
        micros(config.half_open_timeout),
        micros(probe_lease).max(1),
        u8::from(config.shadow),
        deadline(PermitKind::Normal),
        deadline(PermitKind::Probe),
        config.quorum.max(1),
        config.ramp.map_or(0, |r| r.start.ppm()),
        config.ramp.map_or(0, |r| micros(r.duration).max(1)),
    )
}

/// What a script decided: for an acquire, a release, an outcome or a manual operation, the
/// model's own [`Decision`] (the scripts port the model); besides, what only a script
/// answers (a batch, a read, a repair).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplyDecision {
    /// The model's decision. An admitted probe's lease token is [`Reply::lease`].
    Model(Decision),
    /// A batch of outcomes: one entry per outcome, `true` recorded, `false` stale.
    Batch(Vec<bool>),
    /// A read: what the window holds now (zero outside closed).
    State(WindowCounts),
    /// The script found the value corrupt (the reason) and replaced it by a fresh closed
    /// state in the same atomic step; the operation itself was not applied.
    Repaired(String),
}

/// The breaker's state as stored in Redis, after the operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredState {
    /// The phase.
    pub phase: Phase,
    /// The generation.
    pub generation: u64,
    /// When the phase began (Redis time, microseconds).
    pub since_us: u64,
    /// Open: end of the cool-down; ForcedOpen / Disabled: end of the override (`None`:
    /// never); otherwise 0.
    pub until_us: Option<u64>,
    /// Consecutive trips without a close.
    pub trips: u32,
    /// Half-open probes in flight.
    pub in_flight: u32,
    /// Half-open consecutive probe successes.
    pub probe_successes: u32,
    /// Closed: the current failure streak.
    pub consecutive_failures: u32,
    /// Closed: when the streak's earliest failure completed (Redis time, microseconds;
    /// 0 without a streak).
    pub streak_started_us: u64,
    /// Grows with every write within one incarnation: views order news by it, never by
    /// Redis time (which can step back). 0: nothing stored.
    pub version: u64,
    /// Names one life of the stored state (set when the hash is created): a different
    /// incarnation means Redis lost the state and started anew. 0: nothing stored.
    pub incarnation: u64,
    /// Rule 20: whether the breaker is in shadow mode (the stored switch, or the config's
    /// value while no operator set it).
    pub shadow: bool,
    /// Rule 20: would-be rejections the scripts admitted in shadow mode, fleet-wide.
    pub shadow_rejections: u64,
    /// Rule 23: when the closed phase's ramp began (Redis time, microseconds), while one
    /// is recorded (it may be over: see [`StoredState::ramp_remaining_us`]).
    pub ramp_started_us: Option<u64>,
    /// Rule 23: the acquires the scripts numbered in the current ramp.
    pub ramp_calls: u64,
}

impl StoredState {
    /// How long until `until_us`, seen from `now_us` (`None` for never).
    pub fn remaining_us(&self, now_us: u64) -> Option<u64> {
        self.until_us.map(|until| until.saturating_sub(now_us))
    }

    /// Rule 23: how long the recorded ramp still runs, seen from `now_us`, given the
    /// config's ramp duration; `None` when no ramp is active.
    pub fn ramp_remaining_us(&self, now_us: u64, duration_us: u64) -> Option<u64> {
        let end = self.ramp_started_us?.saturating_add(duration_us);
        (self.phase == Phase::Closed && now_us < end).then(|| end - now_us)
    }
}

/// A script's whole reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// What was decided.
    pub decision: ReplyDecision,
    /// The lease token of the probe slot an acquire reserved (rule 15); 0 otherwise.
    pub lease: u64,
    /// The state after the operation.
    pub state: StoredState,
    /// The script's `now` (Redis `TIME`, or the explicit time), in microseconds.
    pub now_us: u64,
    /// The phase changes the operation made, in order.
    pub transitions: Vec<Transition>,
    /// Rule 20: for an acquire admitted in shadow mode, the rejection it replaced
    /// (phase, retry-after); the decision is then a passthrough admission.
    pub shadowed: Option<(Phase, Option<Nanos>)>,
    /// Rule 21: for a batch, the local open phase the reporting node should enter (the
    /// rule that fired without its quorum, and how long), the longest of the batch's.
    pub local_open: Option<(TripReason, Nanos)>,
}

/// Why a reply could not be understood, or a corrupt value the script found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ParseError {
    Corrupt(String),
    Protocol(String),
}

fn int(values: &[Value], i: usize) -> Result<i64, ParseError> {
    match values.get(i) {
        Some(Value::Int(n)) => Ok(*n),
        Some(Value::BulkString(b)) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| ParseError::Protocol(format!("reply item {i} is not an integer"))),
        other => Err(ParseError::Protocol(format!(
            "reply item {i} is {other:?}, expected an integer"
        ))),
    }
}

fn uint(values: &[Value], i: usize) -> Result<u64, ParseError> {
    let n = int(values, i)?;
    u64::try_from(n).map_err(|_| ParseError::Protocol(format!("reply item {i} is {n}")))
}

/// A lease token: any u64, sent as a decimal string.
fn token(values: &[Value], i: usize) -> Result<u64, ParseError> {
    match values.get(i) {
        Some(Value::BulkString(b)) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| ParseError::Protocol(format!("reply item {i} is not a token"))),
        _ => uint(values, i),
    }
}

fn small(values: &[Value], i: usize) -> Result<u32, ParseError> {
    let n = uint(values, i)?;
    u32::try_from(n).map_err(|_| ParseError::Protocol(format!("reply item {i} is {n}")))
}

fn text(values: &[Value], i: usize) -> Result<String, ParseError> {
    match values.get(i) {
        Some(Value::BulkString(b)) => Ok(String::from_utf8_lossy(b).into_owned()),
        Some(Value::SimpleString(s)) => Ok(s.clone()),
        other => Err(ParseError::Protocol(format!(
            "reply item {i} is {other:?}, expected a string"
        ))),
    }
}

fn phase(values: &[Value], i: usize) -> Result<Phase, ParseError> {
    let code = int(values, i)?;
    usize::try_from(code)
        .ok()
        .and_then(Phase::from_index)
        .ok_or_else(|| ParseError::Protocol(format!("phase code {code}")))
}

fn kind(code: i64) -> Result<PermitKind, ParseError> {
    Ok(match code {
        0 => PermitKind::Normal,
        1 => PermitKind::Probe,
        2 => PermitKind::Passthrough,
        n => return Err(ParseError::Protocol(format!("permit kind code {n}"))),
    })
}

/// The code a permit kind has in the scripts.
pub(crate) fn kind_code(kind: PermitKind) -> u8 {
    match kind {
        PermitKind::Normal => 0,
        PermitKind::Probe => 1,
        PermitKind::Passthrough => 2,
    }
}

/// Parses a transition reason as `TransitionReason::as_str` spells it.
pub fn reason_from_str(name: &str) -> Option<TransitionReason> {
    TransitionReason::from_name(name)
}

/// Parses a script reply (see `answer` in `lua/common.lua`).
pub(crate) fn parse_reply(value: &Value) -> Result<Reply, ParseError> {
    let Value::Array(v) = value else {
        return Err(ParseError::Protocol(format!(
            "script reply is {value:?}, expected an array"
        )));
    };
    let head = text(v, 0)?;
    if head == "corrupt" {
        return Err(ParseError::Corrupt(text(v, 1)?));
    }
    if head == "error" {
        return Err(ParseError::Protocol(text(v, 1)?));
    }
    let state = StoredState {
        phase: phase(v, 4)?,
        generation: uint(v, 5)?,
        since_us: uint(v, 6)?,
        until_us: match int(v, 7)? {
            -1 => None,
            n => Some(u64::try_from(n).unwrap_or(0)),
        },
        trips: small(v, 8)?,
        in_flight: small(v, 9)?,
        probe_successes: small(v, 10)?,
        consecutive_failures: small(v, 11)?,
        streak_started_us: uint(v, 12)?,
        version: uint(v, 13)?,
        incarnation: uint(v, 14)?,
        shadow: uint(v, 16)? == 1,
        shadow_rejections: uint(v, 17)?,
        ramp_started_us: match int(v, 18)? {
            -1 => None,
            n => Some(u64::try_from(n).unwrap_or(0)),
        },
        ramp_calls: uint(v, 19)?,
    };
    let now_us = uint(v, 15)?;
    let count = usize::try_from(uint(v, 20)?).unwrap_or(usize::MAX);
    let mut transitions = Vec::with_capacity(count.min(8));
    let mut at = 21;
    for _ in 0..count {
        let name = text(v, at + 3)?;
        transitions.push(Transition {
            from: phase(v, at)?,
            to: phase(v, at + 1)?,
            generation: uint(v, at + 2)?,
            reason: reason_from_str(&name)
                .ok_or_else(|| ParseError::Protocol(format!("transition reason {name}")))?,
        });
        at += 4;
    }
    let mut lease = 0;
    let retry_after = |i: usize| -> Result<Option<Nanos>, ParseError> {
        Ok(match int(v, i)? {
            -1 => None,
            n => Some(Nanos(u64::try_from(n).unwrap_or(0).saturating_mul(1_000))),
        })
    };
    let mut shadowed = None;
    let mut local_open = None;
    let decision = match head.as_str() {
        "shadow" => {
            shadowed = Some((phase(v, 2)?, retry_after(3)?));
            ReplyDecision::Model(Decision::Admitted {
                generation: uint(v, 1)?,
                kind: PermitKind::Passthrough,
            })
        }
        "admit" => {
            lease = token(v, 3)?;
            ReplyDecision::Model(Decision::Admitted {
                generation: uint(v, 1)?,
                kind: kind(int(v, 2)?)?,
            })
        }
        "reject" => ReplyDecision::Model(Decision::Rejected {
            phase: phase(v, 1)?,
            retry_after: retry_after(2)?,
        }),
        "recorded" => ReplyDecision::Model(Decision::Recorded),
        "stale" => ReplyDecision::Model(Decision::Stale),
        "done" => ReplyDecision::Model(Decision::Done),
        "repaired" => ReplyDecision::Repaired(text(v, 1)?),
        "batch" => {
            // Per entry: how many outcomes it stands for, and how many were recorded.
            let n = usize::try_from(uint(v, 1)?).unwrap_or(usize::MAX);
            if let Some(us) = retry_after(2)? {
                let name = text(v, 3)?;
                let Some(TransitionReason::Tripped(reason)) = reason_from_str(&name) else {
                    return Err(ParseError::Protocol(format!("local open reason {name}")));
                };
                local_open = Some((reason, us));
            }
            let mut codes = Vec::with_capacity(n.min(v.len()));
            for i in 0..n {
                let count = uint(v, at + 2 * i)?;
                let recorded = uint(v, at + 2 * i + 1)?.min(count);
                let total = (codes.len() as u64).saturating_add(count);
                if total > MAX_BATCH_OUTCOMES {
                    return Err(ParseError::Protocol(format!(
                        "a batch reply of {total} outcomes"
                    )));
                }
                codes.extend((0..count).map(|k| k < recorded));
            }
            ReplyDecision::Batch(codes)
        }
        "state" => ReplyDecision::State(WindowCounts {
            calls: uint(v, at)?,
            failures: uint(v, at + 1)?,
            slow: uint(v, at + 2)?,
        }),
        other => return Err(ParseError::Protocol(format!("script reply head {other}"))),
    };
    Ok(Reply {
        decision,
        lease,
        state,
        now_us,
        transitions,
        shadowed,
        local_open,
    })
}
