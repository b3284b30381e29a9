//! Differential test: random operation sequences run through the engine (`CircuitBreaker`
//! on a `ManualClock`) and the pure model (`ModelState::apply`) side by side. After every
//! step both must have decided the same (same permit generation and kind, or the same
//! rejection phase and `retry_after`), announced the same transition, and hold the same
//! state as far as a snapshot shows it.
//!
//! Cases: `PROPTEST_CASES` (default 256 here; CI runs 10,000). Failures are persisted in
//! `proptest-regressions/model_vs_engine.txt` next to this crate's manifest.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use breakerbox::model::{Decision, ModelState, Operation, PermitKind, Transition};
use breakerbox::{
    CircuitBreaker, Clock, Config, ConfigBuilder, Event, EventKind, JitterSource, ManualClock,
    Nanos, Permit, Phase, Verdict,
};
use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, TestCaseError};

const MS: u64 = 1_000_000;
const SLOW_THRESHOLD: Nanos = Nanos(100 * MS);

fn proptest_config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/proptest-regressions/model_vs_engine.txt"
        )))),
        ..ProptestConfig::default()
    }
}

// ----- configurations ------------------------------------------------------------------------

/// Which family of config a case runs, with its random parameters.
#[derive(Clone, Debug)]
struct CaseConfig {
    family: Family,
    max_probes: u32,
    required_successes: u32,
    /// Consecutive failures, or the count window size.
    n: u32,
    /// Min calls as a fraction of what the window allows, in 1..=n.
    min_calls: u32,
    /// Start in shadow mode (rule 20).
    shadow: bool,
    /// Rule 22: 0 no deadline, 1 a call timeout, 2 a call and a shorter probe timeout,
    /// 3 a probe timeout alone.
    deadlines: u8,
    /// Rule 23: a ramp after recovery (start fraction, duration).
    ramp: Option<(f64, Duration)>,
}

const CALL_TIMEOUT: Nanos = Nanos(200 * MS);
const PROBE_TIMEOUT: Nanos = Nanos(150 * MS);

#[derive(Copy, Clone, Debug)]
enum Family {
    /// Only a consecutive-failure rule.
    Consecutive,
    /// A count window with a failure rate and a slow-call rate (and a streak rule).
    CountRateAndSlow,
    /// A time window of 4 s in 4 buckets with a failure rate; a slow threshold for probes.
    TimeWindow,
    /// Consecutive failures with backoff and jitter.
    BackoffJitter,
    /// One failure opens for `Duration::MAX`, so `open_until` saturates (fixed cases only).
    SaturatedOpen,
}

impl CaseConfig {
    fn builder(&self) -> ConfigBuilder {
        let base = Config::builder()
            .recovery_timeout(Duration::from_secs(1))
            .half_open_timeout(Duration::from_secs(3))
            .max_probes(self.max_probes)
            .required_successes(self.required_successes)
            .shadow(self.shadow);
        let base = match self.deadlines {
            1 => base.call_timeout(CALL_TIMEOUT.as_duration()),
            2 => base
                .call_timeout(CALL_TIMEOUT.as_duration())
                .probe_timeout(PROBE_TIMEOUT.as_duration()),
            3 => base.probe_timeout(PROBE_TIMEOUT.as_duration()),
            _ => base,
        };
        let base = match self.ramp {
            Some((start, duration)) => base.ramp(start, duration),
            None => base,
        };
        match self.family {
            Family::Consecutive => base.consecutive_failures(self.n),
            Family::CountRateAndSlow => base
                .consecutive_failures(self.n + 2)
                .failure_rate(0.5)
                .slow_call_threshold(SLOW_THRESHOLD.as_duration())
                .slow_call_rate(0.6)
                .count_window(self.n)
                .min_calls(self.min_calls.min(self.n)),
            Family::TimeWindow => base
                .failure_rate(0.5)
                .time_window(Duration::from_secs(4), 4)
                .min_calls(self.min_calls)
                .slow_call_threshold(SLOW_THRESHOLD.as_duration()),
            Family::BackoffJitter => base
                .consecutive_failures(self.n.min(2))
                .backoff(2.0, Duration::from_millis(5_500))
                .jitter(0.5),
            Family::SaturatedOpen => base.consecutive_failures(1).recovery_timeout(Duration::MAX),
        }
    }
}

fn case_config() -> impl Strategy<Value = CaseConfig> {
    let family = prop_oneof![
        Just(Family::Consecutive),
        Just(Family::CountRateAndSlow),
        Just(Family::TimeWindow),
        Just(Family::BackoffJitter),
    ];
    (
        family,
        1..=3u32,
        1..=3u32,
        1..=6u32,
        1..=6u32,
        prop::bool::weighted(0.25),
        prop_oneof![2 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8), 1 => Just(3u8)],
        ramp(),
    )
        .prop_map(
            |(family, max_probes, required_successes, n, min_calls, shadow, deadlines, ramp)| {
                CaseConfig {
                    family,
                    max_probes,
                    required_successes,
                    n,
                    min_calls,
                    shadow,
                    deadlines,
                    ramp,
                }
            },
        )
}

/// Rule 23: no ramp, or one of a few (a start of 1 admits everything but still keeps the
/// trips until it ends).
fn ramp() -> impl Strategy<Value = Option<(f64, Duration)>> {
    prop_oneof![
        3 => Just(None),
        1 => Just(Some((0.1, Duration::from_secs(2)))),
        1 => Just(Some((0.5, Duration::from_millis(500)))),
        1 => Just(Some((1.0, Duration::from_secs(1)))),
        1 => (1..=1_000_000u32, 1..3_000u64)
            .prop_map(|(ppm, ms)| Some((f64::from(ppm) / 1e6, Duration::from_millis(ms)))),
    ]
}

// ----- operations ----------------------------------------------------------------------------

#[derive(Copy, Clone, Debug)]
enum Latency {
    /// `Permit::record`: the engine measures it through its clock from the acquire.
    Measured,
    /// `Permit::record_with_latency`.
    Given(Nanos),
    /// `Permit::record_with_retry_hint`: a given latency and the dependency's retry hint.
    Hinted(Nanos, Nanos),
}

#[derive(Copy, Clone, Debug)]
enum Op {
    Acquire,
    Record {
        pick: usize,
        verdict: Verdict,
        latency: Latency,
    },
    Drop {
        pick: usize,
    },
    Advance(Nanos),
    /// Set the clock to the next deadline the model knows of, plus `offset` nanoseconds.
    ToDeadline {
        offset: i64,
    },
    ForceOpen,
    ForceOpenFor(Duration),
    Disable,
    DisableFor(Duration),
    Reset,
    /// Switch shadow mode (rule 20).
    Shadow(bool),
}

fn latency() -> impl Strategy<Value = Latency> {
    prop_oneof![
        3 => Just(Latency::Measured),
        1 => Just(Latency::Given(Nanos::ZERO)),
        1 => Just(Latency::Given(SLOW_THRESHOLD)),
        1 => Just(Latency::Given(Nanos(SLOW_THRESHOLD.0 + 1))),
        1 => prop_oneof![
            Just(CALL_TIMEOUT),
            Just(Nanos(CALL_TIMEOUT.0 + 1)),
            Just(PROBE_TIMEOUT),
            Just(Nanos(PROBE_TIMEOUT.0 + 1)),
        ]
        .prop_map(Latency::Given),
        1 => (0..500 * MS).prop_map(|n| Latency::Given(Nanos(n))),
        1 => (0..500 * MS, 0..20_000 * MS).prop_map(|(l, h)| Latency::Hinted(Nanos(l), Nanos(h))),
    ]
}

fn verdict() -> impl Strategy<Value = Verdict> {
    prop_oneof![
        6 => Just(Verdict::Success),
        3 => Just(Verdict::Failure),
        1 => Just(Verdict::Ignore),
    ]
}

fn advance() -> impl Strategy<Value = Nanos> {
    prop_oneof![
        Just(Nanos(1)),
        Just(Nanos(50 * MS)),
        Just(Nanos(100 * MS + 1)),
        Just(Nanos(999 * MS)),
        Just(Nanos(1_000 * MS)),
        Just(Nanos(3_000 * MS)),
        (0..6_000 * MS).prop_map(Nanos),
    ]
}

fn override_for() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        Just(Duration::from_millis(1)),
        Just(Duration::from_millis(500)),
        Just(Duration::from_secs(2)),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        24 => Just(Op::Acquire),
        24 => (any::<usize>(), verdict(), latency())
            .prop_map(|(pick, verdict, latency)| Op::Record { pick, verdict, latency }),
        5 => any::<usize>().prop_map(|pick| Op::Drop { pick }),
        10 => advance().prop_map(Op::Advance),
        8 => (-1..=1i64).prop_map(|offset| Op::ToDeadline { offset }),
        1 => Just(Op::ForceOpen),
        1 => override_for().prop_map(Op::ForceOpenFor),
        1 => Just(Op::Disable),
        1 => override_for().prop_map(Op::DisableFor),
        1 => Just(Op::Reset),
        2 => any::<bool>().prop_map(Op::Shadow),
    ]
}

#[derive(Clone, Debug)]
struct Case {
    config: CaseConfig,
    start: Nanos,
    /// Each operation with the jitter sample the engine's source hands out during it.
    ops: Vec<(Op, f64)>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        case_config(),
        prop_oneof![Just(Nanos::ZERO), (0..10_000 * MS).prop_map(Nanos)],
        prop::collection::vec((op(), 0.0..1.0f64), 1..80),
    )
        .prop_map(|(config, start, ops)| Case { config, start, ops })
}

// ----- the harness ---------------------------------------------------------------------------

/// A jitter source whose next sample the harness sets before each operation, so the model
/// gets the very same value.
#[derive(Clone, Default)]
struct SharedSample(Arc<AtomicU64>);

impl SharedSample {
    fn set(&self, r: f64) {
        self.0.store(r.to_bits(), Ordering::SeqCst);
    }
}

impl JitterSource for SharedSample {
    fn sample(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::SeqCst))
    }
}

/// What the engine's listener saw.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<EventKind>>>);

impl Seen {
    fn take(&self) -> Vec<EventKind> {
        std::mem::take(&mut *self.0.lock().expect("listener lock"))
    }
}

struct Held<'a> {
    permit: Permit<'a, ManualClock>,
    generation: u64,
    kind: PermitKind,
    acquired_at: Nanos,
}

fn next_deadline(model: &ModelState, config: &Config, now: Nanos) -> Option<Nanos> {
    match model.phase {
        Phase::Open => Some(model.open_until),
        Phase::HalfOpen => Some(
            model
                .since
                .saturating_add(Nanos::from_duration(config.half_open_timeout)),
        ),
        Phase::ForcedOpen | Phase::Disabled if model.open_until != Nanos::MAX => {
            Some(model.open_until)
        }
        Phase::Closed => {
            let edge = config
                .rate
                .and_then(|rule| rule.window.bucket_width())
                .map(|width| Nanos((now.0 / width.0 + 1) * width.0));
            // Rule 23: the end of a ramp is a deadline too.
            let ramp_end = model
                .ramp_started
                .zip(config.ramp)
                .map(|(started, ramp)| started.saturating_add(ramp.duration.into()))
                .filter(|end| *end > now);
            match (edge, ramp_end) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        }
        _ => None,
    }
}

fn run(case: &Case) -> Result<(), TestCaseError> {
    let config = case
        .config
        .builder()
        .build()
        .map_err(|e| TestCaseError::fail(format!("bad case config: {e}")))?;
    let clock = ManualClock::starting_at(case.start);
    let sample = SharedSample::default();
    let seen = Seen::default();
    let recorder = seen.clone();
    let breaker = CircuitBreaker::builder()
        .config(config.clone())
        .clock(clock.clone())
        .jitter_source(sample.clone())
        .listener(move |event: &Event<'_>| {
            recorder
                .0
                .lock()
                .expect("listener lock")
                .push(event.kind.clone());
        })
        .build()
        .map_err(|e| TestCaseError::fail(format!("engine refused the config: {e}")))?;
    prop_assert_eq!(
        breaker.config(),
        &config,
        "the engine keeps the config as built"
    );

    let mut model = ModelState::new(&config);
    let mut held: Vec<Held<'_>> = Vec::new();
    let mut stale = 0u64;

    for (index, &(op, r)) in case.ops.iter().enumerate() {
        sample.set(r);
        let now = clock.now();
        let mut apply = |model: &mut ModelState, operation: Operation| {
            let step = model.apply(operation, now, &config, r);
            if step.decision == Decision::Stale {
                stale += 1;
            }
            step
        };
        // What the engine announced must be what the model says happened.
        let mut expected_transition: Option<Transition> = None;
        let mut expected_rejection = None;
        let mut expected_stale = None;
        let mut expected_shadow_rejection = None;
        match op {
            Op::Acquire => {
                // Rule 20: what the rules alone decide, for the shadow event's content.
                let mut rules_alone = model.clone();
                rules_alone.shadow = false;
                let unshadowed = rules_alone.apply(Operation::Acquire, now, &config, r);
                let step = apply(&mut model, Operation::Acquire);
                prop_assert_eq!(
                    (&rules_alone.phase, rules_alone.generation, step.transition),
                    (&model.phase, model.generation, unshadowed.transition),
                    "step {}: shadow mode changed a transition",
                    index
                );
                if let (true, Decision::Rejected { phase, retry_after }) =
                    (model.shadow, unshadowed.decision)
                {
                    expected_shadow_rejection = Some((phase, retry_after.map(Nanos::as_duration)));
                }
                expected_transition = step.transition;
                match (breaker.try_acquire(), step.decision) {
                    (Ok(permit), Decision::Admitted { generation, kind }) => {
                        prop_assert_eq!(
                            (permit.generation(), permit.kind()),
                            (generation, kind),
                            "step {}: admitted permit differs",
                            index
                        );
                        held.push(Held {
                            permit,
                            generation,
                            kind,
                            acquired_at: now,
                        });
                    }
                    (Err(open), Decision::Rejected { phase, retry_after }) => {
                        prop_assert_eq!(
                            (open.phase(), open.retry_after()),
                            (phase, retry_after.map(Nanos::as_duration)),
                            "step {}: rejection differs",
                            index
                        );
                        expected_rejection = Some(open);
                    }
                    (engine, model) => {
                        return Err(TestCaseError::fail(format!(
                            "step {index}: engine decided {engine:?}, model {model:?}"
                        )))
                    }
                }
            }
            Op::Record {
                pick,
                verdict,
                latency,
            } => {
                if held.is_empty() {
                    continue;
                }
                let h = held.swap_remove(pick % held.len());
                let latency_nanos = match latency {
                    Latency::Measured if config.measures_latency() => {
                        now.saturating_sub(h.acquired_at)
                    }
                    Latency::Measured => Nanos::ZERO,
                    Latency::Given(latency) | Latency::Hinted(latency, _) => latency,
                };
                let retry_hint = match latency {
                    Latency::Hinted(_, hint) => Some(hint),
                    _ => None,
                };
                let step = apply(
                    &mut model,
                    Operation::Outcome {
                        generation: h.generation,
                        kind: h.kind,
                        verdict,
                        latency: latency_nanos,
                        retry_hint,
                        age: Nanos::ZERO,
                        node: 0,
                    },
                );
                expected_transition = step.transition;
                if step.decision == Decision::Stale {
                    expected_stale = Some(h.generation);
                }
                match latency {
                    Latency::Measured => h.permit.record(verdict),
                    Latency::Given(latency) => {
                        h.permit.record_with_latency(verdict, latency.as_duration())
                    }
                    Latency::Hinted(latency, hint) => h.permit.record_with_retry_hint(
                        verdict,
                        latency.as_duration(),
                        Some(hint.as_duration()),
                    ),
                }
            }
            Op::Drop { pick } => {
                if held.is_empty() {
                    continue;
                }
                let h = held.swap_remove(pick % held.len());
                let step = apply(
                    &mut model,
                    Operation::Release {
                        generation: h.generation,
                        kind: h.kind,
                    },
                );
                expected_transition = step.transition;
                if step.decision == Decision::Stale {
                    expected_stale = Some(h.generation);
                }
                drop(h.permit);
            }
            Op::Advance(by) => clock.advance(by.as_duration()),
            Op::ToDeadline { offset } => {
                if let Some(deadline) = next_deadline(&model, &config, now) {
                    let target = deadline.0.saturating_add_signed(offset);
                    if target > now.0 && target != u64::MAX {
                        clock.set(Nanos(target));
                    }
                }
            }
            Op::ForceOpen => {
                expected_transition =
                    apply(&mut model, Operation::ForceOpen { until: None }).transition;
                breaker.force_open();
            }
            Op::ForceOpenFor(d) => {
                let until = Some(now.saturating_add(d.into()));
                expected_transition = apply(&mut model, Operation::ForceOpen { until }).transition;
                breaker.force_open_for(d);
            }
            Op::Disable => {
                expected_transition =
                    apply(&mut model, Operation::Disable { until: None }).transition;
                breaker.disable();
            }
            Op::DisableFor(d) => {
                let until = Some(now.saturating_add(d.into()));
                expected_transition = apply(&mut model, Operation::Disable { until }).transition;
                breaker.disable_for(d);
            }
            Op::Reset => {
                expected_transition = apply(&mut model, Operation::Reset).transition;
                breaker.reset();
            }
            Op::Shadow(on) => {
                expected_transition = apply(&mut model, Operation::SetShadow { on }).transition;
                breaker.set_shadow(on);
            }
        }

        // Events: the one transition the model made, the rejection, the stale result.
        let events = seen.take();
        let transitions: Vec<Transition> = events
            .iter()
            .filter_map(|e| match e {
                EventKind::Transition(t) => Some(*t),
                _ => None,
            })
            .collect();
        prop_assert_eq!(
            transitions,
            expected_transition.into_iter().collect::<Vec<_>>(),
            "step {} ({:?}): transitions announced",
            index,
            op
        );
        let rejections: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                EventKind::Rejected(open) => Some(*open),
                _ => None,
            })
            .collect();
        prop_assert_eq!(
            rejections,
            expected_rejection.into_iter().collect::<Vec<_>>(),
            "step {} ({:?}): rejections announced",
            index,
            op
        );
        let shadow_rejections: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                EventKind::ShadowRejected(open) => Some((open.phase(), open.retry_after())),
                _ => None,
            })
            .collect();
        prop_assert_eq!(
            shadow_rejections,
            expected_shadow_rejection.into_iter().collect::<Vec<_>>(),
            "step {} ({:?}): would-be rejections announced",
            index,
            op
        );
        let stale_results: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                EventKind::StaleResult { generation } => Some(*generation),
                _ => None,
            })
            .collect();
        prop_assert_eq!(
            stale_results,
            expected_stale.into_iter().collect::<Vec<_>>(),
            "step {} ({:?}): stale results announced",
            index,
            op
        );

        compare(&breaker, &model, &config, clock.now(), stale, index, op)?;
    }
    Ok(())
}

fn compare(
    breaker: &CircuitBreaker<ManualClock>,
    model: &ModelState,
    config: &Config,
    now: Nanos,
    stale: u64,
    index: usize,
    op: Op,
) -> Result<(), TestCaseError> {
    let snap = breaker.snapshot();
    let closed = model.phase == Phase::Closed;
    let engine = (
        snap.phase,
        snap.generation,
        snap.probes_in_flight,
        snap.probe_successes,
        snap.trips,
        snap.consecutive_failures,
        snap.window,
        snap.retry_after,
        snap.stale_results,
        snap.shadow,
        snap.shadow_rejections,
        snap.ramp,
    );
    let expected = (
        model.phase,
        model.generation,
        model.in_flight,
        model.probe_successes,
        model.trips,
        if closed {
            model.consecutive_failures
        } else {
            0
        },
        if closed {
            model.window.counts(now)
        } else {
            Default::default()
        },
        model.retry_after(now, config).map(Nanos::as_duration),
        stale,
        model.shadow,
        model.shadow_rejections,
        model.ramp_fraction(now, config),
    );
    prop_assert_eq!(
        engine,
        expected,
        "step {} ({:?}) at {:?}: (phase, generation, in flight, probe successes, trips, \
         streak, window, retry_after, stale, shadow, shadow rejections, ramp) differ; model: {:?}",
        index,
        op,
        now,
        model
    );
    Ok(())
}

proptest! {
    #![proptest_config(proptest_config())]

    #[test]
    fn engine_matches_the_model_step_by_step(case in case()) {
        run(&case)?;
    }
}

// ----- fixed cases -----------------------------------------------------------------------------

fn fixed(family: Family, n: u32, min_calls: u32, ops: Vec<Op>) -> Case {
    Case {
        config: CaseConfig {
            family,
            max_probes: 1,
            required_successes: 1,
            n,
            min_calls,
            shadow: false,
            deadlines: 0,
            ramp: None,
        },
        start: Nanos(5),
        ops: ops.into_iter().map(|op| (op, 0.0)).collect(),
    }
}

fn record(verdict: Verdict) -> Op {
    Op::Record {
        pick: 0,
        verdict,
        latency: Latency::Given(Nanos::ZERO),
    }
}

#[test]
fn engine_matches_the_model_on_late_calls_and_probes() {
    let late = |latency: Nanos| Op::Record {
        pick: 0,
        verdict: Verdict::Success,
        latency: Latency::Given(latency),
    };
    // A late success trips (consecutive failures: 1); a probe late by its own shorter
    // deadline re-opens; one just in time closes.
    let ops = vec![
        Op::Acquire,
        late(Nanos(CALL_TIMEOUT.0 + 1)),
        Op::Advance(Nanos(1_000 * MS)),
        Op::Acquire,
        late(Nanos(PROBE_TIMEOUT.0 + 1)),
        Op::Advance(Nanos(1_000 * MS)),
        Op::Acquire,
        late(PROBE_TIMEOUT),
        Op::Acquire,
        Op::Advance(Nanos(CALL_TIMEOUT.0 + 1)),
        Op::Record {
            pick: 0,
            verdict: Verdict::Ignore,
            latency: Latency::Measured,
        },
    ];
    let mut case = fixed(Family::Consecutive, 1, 1, ops);
    case.config.deadlines = 2;
    run(&case).unwrap();
}

#[test]
fn engine_matches_the_model_when_open_until_saturates() {
    let ops = vec![Op::Acquire, record(Verdict::Failure), Op::Acquire];
    run(&fixed(Family::SaturatedOpen, 1, 1, ops)).unwrap();
}

#[test]
fn engine_matches_the_model_through_quiet_count_windows() {
    // A window of 8 past its gate of 1: plain successes go to this thread's lane, which
    // looks for quiet at its 64th; after each failure the engine counts again, and a
    // failure rate of 0.5 trips only if the window holds exactly what the model says.
    let successes = |ops: &mut Vec<Op>, n: usize| {
        for _ in 0..n {
            ops.extend([Op::Acquire, record(Verdict::Success)]);
        }
    };
    let failure = |ops: &mut Vec<Op>| ops.extend([Op::Acquire, record(Verdict::Failure)]);
    let mut ops = Vec::new();
    successes(&mut ops, 70);
    for gap in [7, 3, 1, 0, 2, 80, 4, 4, 130, 1, 1] {
        failure(&mut ops);
        successes(&mut ops, gap);
    }
    failure(&mut ops);
    failure(&mut ops);
    failure(&mut ops);
    run(&fixed(Family::CountRateAndSlow, 8, 1, ops)).unwrap();
}

#[test]
fn engine_matches_the_model_after_a_long_outage() {
    let mut ops = Vec::new();
    // Ten failures fill the count window of ten and trip on the failure rate.
    for _ in 0..10 {
        ops.extend([Op::Acquire, record(Verdict::Failure)]);
    }
    // 16,384 failed probes: two generations each, no closed-phase outcome.
    for _ in 0..16_384 {
        ops.extend([
            Op::Advance(Nanos(1_000 * MS)),
            Op::Acquire,
            record(Verdict::Failure),
        ]);
    }
    // Recovery, then the same ten failures must trip again.
    ops.extend([
        Op::Advance(Nanos(1_000 * MS)),
        Op::Acquire,
        record(Verdict::Success),
    ]);
    for _ in 0..10 {
        ops.extend([Op::Acquire, record(Verdict::Failure)]);
    }
    run(&fixed(Family::CountRateAndSlow, 10, 10, ops)).unwrap();
}
