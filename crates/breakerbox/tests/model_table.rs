//! Table tests of the pure transition model, one group per rule of `docs/RULES.md`.
//!
//! Every test drives `ModelState::apply` directly with explicit timestamps, so each rule is
//! pinned down without an engine, a clock or threads.

use std::time::Duration;

use breakerbox::model::{
    Decision, ModelState, Operation, PermitKind, Step, TransitionReason, TripReason, WindowCounts,
};
use breakerbox::{Config, ConfigBuilder, Nanos, Phase, Verdict};

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000 * MS;

fn ms(n: u64) -> Nanos {
    Nanos(n * MS)
}

fn secs(n: u64) -> Nanos {
    Nanos(n * SEC)
}

/// A permit as the model hands it out.
#[derive(Copy, Clone, Debug, PartialEq)]
struct Held {
    generation: u64,
    kind: PermitKind,
}

/// The model plus its config and the jitter sample to use for re-opens.
struct Model {
    state: ModelState,
    config: Config,
    r: f64,
}

impl Model {
    fn new(builder: ConfigBuilder) -> Model {
        let config = builder.build().expect("valid config");
        Model {
            state: ModelState::new(&config),
            config,
            r: 0.0,
        }
    }

    fn apply(&mut self, op: Operation, now: Nanos) -> Step {
        self.state.apply(op, now, &self.config, self.r)
    }

    fn acquire(&mut self, now: Nanos) -> Step {
        self.apply(Operation::Acquire, now)
    }

    fn admit(&mut self, now: Nanos) -> Held {
        match self.acquire(now).decision {
            Decision::Admitted { generation, kind } => Held { generation, kind },
            other => panic!("expected an admission at {now:?}, got {other:?}"),
        }
    }

    fn reject(&mut self, now: Nanos) -> (Phase, Option<Nanos>) {
        match self.acquire(now).decision {
            Decision::Rejected { phase, retry_after } => (phase, retry_after),
            other => panic!("expected a rejection at {now:?}, got {other:?}"),
        }
    }

    fn outcome(&mut self, held: Held, verdict: Verdict, latency: Nanos, now: Nanos) -> Step {
        self.apply(
            Operation::Outcome {
                generation: held.generation,
                kind: held.kind,
                verdict,
                latency,
                retry_hint: None,
                age: Nanos::ZERO,
                node: 0,
            },
            now,
        )
    }

    /// An outcome that completed `age` before `now` (rule 19).
    fn late(&mut self, held: Held, verdict: Verdict, age: Nanos, now: Nanos) -> Step {
        self.apply(
            Operation::Outcome {
                generation: held.generation,
                kind: held.kind,
                verdict,
                latency: Nanos::ZERO,
                retry_hint: None,
                age,
                node: 0,
            },
            now,
        )
    }

    fn release(&mut self, held: Held, now: Nanos) -> Step {
        self.apply(
            Operation::Release {
                generation: held.generation,
                kind: held.kind,
            },
            now,
        )
    }

    /// A whole closed-phase call: acquire and report at `now`.
    fn call(&mut self, verdict: Verdict, latency: Nanos, now: Nanos) -> Step {
        let held = self.admit(now);
        assert_eq!(held.kind, PermitKind::Normal, "a call in closed");
        self.outcome(held, verdict, latency, now)
    }

    fn calls(&mut self, n: usize, verdict: Verdict, now: Nanos) {
        for _ in 0..n {
            self.call(verdict, Nanos::ZERO, now);
        }
    }

    fn counts(&self, now: Nanos) -> WindowCounts {
        self.state.window.counts(now)
    }

    /// Trips a breaker whose rule is `consecutive_failures(1)` at `now`.
    fn trip_now(&mut self, now: Nanos) {
        let step = self.call(Verdict::Failure, Nanos::ZERO, now);
        assert_eq!(self.state.phase, Phase::Open, "{step:?}");
    }
}

fn one_failure_trips() -> ConfigBuilder {
    Config::builder()
        .consecutive_failures(1)
        .recovery_timeout(Duration::from_secs(10))
        .half_open_timeout(Duration::from_secs(30))
}

fn counts(calls: u64, failures: u64, slow: u64) -> WindowCounts {
    WindowCounts {
        calls,
        failures,
        slow,
    }
}

// ----- rule 1: timed transitions are lazy ------------------------------------------------

#[test]
fn open_past_its_end_stays_open_until_an_acquire_comes() {
    let mut m = Model::new(one_failure_trips());
    let closed_permit = m.admit(secs(0));
    m.trip_now(secs(0));
    let generation = m.state.generation;
    assert_eq!(m.state.open_until, secs(10));

    // An outcome and a release long after the cool-down do not move the phase.
    let step = m.outcome(closed_permit, Verdict::Success, Nanos::ZERO, secs(100));
    assert_eq!(step.decision, Decision::Stale);
    let step = m.release(closed_permit, secs(200));
    assert_eq!(step.decision, Decision::Stale);
    assert_eq!(step.transition, None);
    assert_eq!(m.state.phase, Phase::Open);
    assert_eq!(m.state.generation, generation);
    // The stored phase still says when the cool-down ended.
    assert_eq!(m.state.retry_after(secs(300), &m.config), Some(Nanos::ZERO));

    let step = m.acquire(secs(300));
    let transition = step.transition.expect("open -> half-open");
    assert_eq!(
        (transition.from, transition.to, transition.reason),
        (
            Phase::Open,
            Phase::HalfOpen,
            TransitionReason::CooldownElapsed
        )
    );
    assert_eq!(
        step.decision,
        Decision::Admitted {
            generation: generation + 1,
            kind: PermitKind::Probe
        }
    );
    assert_eq!(m.state.since, secs(300));
    assert_eq!(
        m.state.in_flight, 1,
        "the acquire took the first probe slot"
    );
    assert_eq!(m.state.open_until, Nanos::ZERO);
}

#[test]
fn open_admits_exactly_at_its_end_and_not_a_nanosecond_before() {
    let mut m = Model::new(one_failure_trips());
    m.trip_now(secs(1));
    assert_eq!(m.reject(Nanos(11 * SEC - 1)), (Phase::Open, Some(Nanos(1))));
    assert_eq!(m.admit(secs(11)).kind, PermitKind::Probe);
}

#[test]
fn half_open_past_its_deadline_reopens_on_an_outcome_which_is_then_stale() {
    let mut m = Model::new(one_failure_trips().required_successes(1));
    m.trip_now(secs(0));
    let probe = m.admit(secs(10));
    let step = m.outcome(probe, Verdict::Success, Nanos::ZERO, secs(40));
    assert_eq!(step.decision, Decision::Stale);
    let transition = step.transition.expect("half-open timed out");
    assert_eq!(
        (transition.from, transition.to, transition.reason),
        (
            Phase::HalfOpen,
            Phase::Open,
            TransitionReason::HalfOpenTimedOut
        )
    );
    assert_eq!(m.state.phase, Phase::Open);
    assert_eq!(m.state.open_until, secs(50));
    assert_eq!(m.state.trips, 2);
    assert_eq!(m.state.in_flight, 0);
}

#[test]
fn half_open_past_its_deadline_reopens_on_a_release_which_is_then_stale() {
    let mut m = Model::new(one_failure_trips());
    m.trip_now(secs(0));
    let probe = m.admit(secs(10));
    let generation = m.state.generation;
    let step = m.release(probe, secs(45));
    assert_eq!(step.decision, Decision::Stale);
    assert_eq!(m.state.phase, Phase::Open);
    assert_eq!(m.state.generation, generation + 1);
    assert_eq!(m.state.open_until, secs(55));
}

#[test]
fn half_open_result_one_nanosecond_before_the_deadline_still_counts() {
    let mut m = Model::new(one_failure_trips().required_successes(1));
    m.trip_now(secs(0));
    let probe = m.admit(secs(10));
    let step = m.outcome(probe, Verdict::Success, Nanos::ZERO, Nanos(40 * SEC - 1));
    assert_eq!(step.decision, Decision::Recorded);
    assert_eq!(m.state.phase, Phase::Closed);
}

// ----- rule 2: the half-open deadline is per phase ---------------------------------------

#[test]
fn half_open_deadline_counts_from_entering_half_open_not_from_the_last_probe() {
    let mut m = Model::new(one_failure_trips().required_successes(2));
    m.trip_now(secs(0));
    let first = m.admit(secs(10));
    m.outcome(first, Verdict::Success, Nanos::ZERO, secs(35));
    assert_eq!(m.state.probe_successes, 1);
    // A second probe admitted late still belongs to the phase that began at 10 s.
    let second = m.admit(secs(39));
    assert_eq!(m.reject(secs(40)), (Phase::Open, Some(secs(10))));
    let step = m.outcome(second, Verdict::Success, Nanos::ZERO, secs(40));
    assert_eq!(step.decision, Decision::Stale);
    // The next half-open phase gets its own full deadline.
    let third = m.admit(secs(50));
    assert_eq!(m.state.since, secs(50));
    assert_eq!(
        m.state.retry_after(secs(51), &m.config),
        Some(secs(29)),
        "deadline at 80 s"
    );
    m.outcome(third, Verdict::Success, Nanos::ZERO, secs(79));
    assert_eq!(m.state.phase, Phase::HalfOpen);
}

#[test]
fn lost_probes_are_reclaimed_by_the_deadline() {
    let mut m = Model::new(one_failure_trips().max_probes(2));
    m.trip_now(secs(0));
    let _lost_a = m.admit(secs(10));
    let _lost_b = m.admit(secs(10));
    assert_eq!(m.reject(secs(20)), (Phase::HalfOpen, Some(secs(20))));
    // The deadline re-opens; after the next cool-down probing starts with free slots.
    assert_eq!(m.reject(secs(40)).0, Phase::Open);
    assert_eq!(m.admit(secs(50)).kind, PermitKind::Probe);
    assert_eq!(m.state.in_flight, 1);
}

// ----- rule 3: trip evaluation after every closed outcome --------------------------------

#[test]
fn a_success_that_brings_the_window_to_min_calls_trips() {
    let mut m = Model::new(
        Config::builder()
            .failure_rate(0.5)
            .count_window(10)
            .min_calls(4),
    );
    m.calls(3, Verdict::Failure, secs(0));
    assert_eq!(m.state.phase, Phase::Closed, "3 calls < min_calls");
    let step = m.call(Verdict::Success, Nanos::ZERO, secs(0));
    let transition = step.transition.expect("the success tripped");
    assert_eq!(
        transition.reason,
        TransitionReason::Tripped(TripReason::FailureRate)
    );
}

#[test]
fn neither_an_acquire_nor_ageing_buckets_trip() {
    let mut m = Model::new(
        Config::builder()
            .failure_rate(0.5)
            .time_window(Duration::from_secs(10), 10)
            .min_calls(2),
    );
    m.calls(4, Verdict::Success, ms(0));
    m.calls(2, Verdict::Failure, ms(5_000));
    assert_eq!(m.state.phase, Phase::Closed, "2 of 6 failed");
    // At 10.5 s the successes have aged out: the window alone says 100 %.
    assert_eq!(m.counts(ms(10_500)), counts(2, 2, 0));
    let held = m.admit(ms(10_500));
    assert_eq!(held.kind, PermitKind::Normal);
    assert_eq!(m.state.phase, Phase::Closed);
    // The next recorded outcome evaluates and trips, even though it is a success.
    let step = m.outcome(held, Verdict::Success, Nanos::ZERO, ms(10_500));
    assert_eq!(m.state.phase, Phase::Open, "{step:?}");
}

// ----- rule 4: ignore is neutral ----------------------------------------------------------

#[test]
fn ignore_does_not_break_a_failure_streak() {
    let mut m = Model::new(Config::builder().consecutive_failures(3));
    m.calls(2, Verdict::Failure, secs(0));
    m.calls(5, Verdict::Ignore, secs(0));
    assert_eq!(
        m.state.consecutive_failures, 2,
        "ignore neither breaks nor extends"
    );
    assert_eq!(m.state.phase, Phase::Closed);
    m.call(Verdict::Failure, Nanos::ZERO, secs(0));
    assert_eq!(m.state.phase, Phase::Open);
}

#[test]
fn ignore_is_not_a_call_in_the_window() {
    let mut m = Model::new(
        Config::builder()
            .failure_rate(0.5)
            .count_window(4)
            .min_calls(4),
    );
    m.calls(3, Verdict::Failure, secs(0));
    m.calls(10, Verdict::Ignore, secs(0));
    assert_eq!(m.counts(secs(0)), counts(3, 3, 0));
    assert_eq!(m.state.phase, Phase::Closed);
}

#[test]
fn ignore_in_half_open_only_frees_the_slot() {
    let mut m = Model::new(one_failure_trips().required_successes(2));
    m.trip_now(secs(0));
    let first = m.admit(secs(10));
    m.outcome(first, Verdict::Success, Nanos::ZERO, secs(11));
    let second = m.admit(secs(12));
    let generation = m.state.generation;
    assert_eq!(m.state.in_flight, 1);
    let step = m.outcome(second, Verdict::Ignore, Nanos::ZERO, secs(13));
    assert_eq!((step.decision, step.transition), (Decision::Recorded, None));
    assert_eq!(m.state.phase, Phase::HalfOpen);
    assert_eq!(m.state.generation, generation);
    assert_eq!(m.state.in_flight, 0);
    assert_eq!(m.state.probe_successes, 1, "neither reset nor advanced");
    assert_eq!(m.state.trips, 1);
}

// ----- rule 5: slow calls ------------------------------------------------------------------

fn slow_config() -> ConfigBuilder {
    Config::builder()
        .slow_call_threshold(Duration::from_millis(100))
        .slow_call_rate(0.5)
        .failure_rate(1.0)
        .count_window(4)
        .min_calls(4)
}

#[test]
fn a_call_is_slow_only_strictly_above_the_threshold() {
    let mut m = Model::new(slow_config());
    m.call(Verdict::Success, ms(100), secs(0));
    assert_eq!(m.counts(secs(0)), counts(1, 0, 0));
    m.call(Verdict::Success, Nanos(100 * MS + 1), secs(0));
    assert_eq!(m.counts(secs(0)), counts(2, 0, 1));
}

#[test]
fn a_slow_failure_counts_in_both_rates() {
    let mut m = Model::new(slow_config());
    m.call(Verdict::Failure, ms(500), secs(0));
    m.call(Verdict::Success, ms(1), secs(0));
    m.call(Verdict::Success, ms(1), secs(0));
    assert_eq!(m.counts(secs(0)), counts(3, 1, 1));
    let step = m.call(Verdict::Failure, ms(500), secs(0));
    assert_eq!(m.counts(secs(0)), counts(4, 2, 2));
    assert_eq!(
        step.transition.map(|t| t.reason),
        Some(TransitionReason::Tripped(TripReason::SlowCallRate)),
        "2 slow of 4 reaches 50 %, 2 failures of 4 do not reach 100 %"
    );
}

#[test]
fn slow_failures_trip_the_failure_rate() {
    let mut m = Model::new(
        Config::builder()
            .slow_call_threshold(Duration::from_millis(100))
            .slow_call_rate(1.0)
            .failure_rate(0.5)
            .count_window(4)
            .min_calls(4),
    );
    m.calls(2, Verdict::Success, secs(0));
    m.call(Verdict::Failure, ms(500), secs(0));
    let step = m.call(Verdict::Failure, ms(500), secs(0));
    assert_eq!(
        step.transition.map(|t| t.reason),
        Some(TransitionReason::Tripped(TripReason::FailureRate))
    );
}

#[test]
fn a_slow_probe_success_is_a_probe_failure_when_a_threshold_is_set() {
    let mut m = Model::new(
        one_failure_trips()
            .slow_call_threshold(Duration::from_millis(100))
            .required_successes(1),
    );
    m.trip_now(secs(0));
    let probe = m.admit(secs(10));
    let step = m.outcome(probe, Verdict::Success, ms(101), secs(11));
    assert_eq!(
        step.transition.map(|t| (t.to, t.reason)),
        Some((Phase::Open, TransitionReason::ProbeFailed))
    );
    assert_eq!(m.state.trips, 2);
    // At exactly the threshold it is a success.
    let probe = m.admit(secs(21));
    m.outcome(probe, Verdict::Success, ms(100), secs(21));
    assert_eq!(m.state.phase, Phase::Closed);
}

#[test]
fn without_a_threshold_a_slow_probe_success_is_a_success() {
    let mut m = Model::new(one_failure_trips().required_successes(1));
    m.trip_now(secs(0));
    let probe = m.admit(secs(10));
    m.outcome(probe, Verdict::Success, secs(25), secs(11));
    assert_eq!(m.state.phase, Phase::Closed);
}

// ----- rule 6: exact rates -----------------------------------------------------------------

fn half_of_100() -> ConfigBuilder {
    Config::builder()
        .failure_rate(0.5)
        .count_window(100)
        .min_calls(100)
}

#[test]
fn fifty_percent_of_100_trips_at_50_failures_not_49() {
    let mut m = Model::new(half_of_100());
    m.calls(51, Verdict::Success, secs(0));
    m.calls(49, Verdict::Failure, secs(0));
    assert_eq!(m.counts(secs(0)), counts(100, 49, 0));
    assert_eq!(m.state.phase, Phase::Closed);
    // The 50th failure pushes out a success: 50 of 100.
    m.call(Verdict::Failure, Nanos::ZERO, secs(0));
    assert_eq!(m.state.phase, Phase::Open);
}

#[test]
fn rates_that_are_inexact_in_binary_compare_exactly() {
    // 0.3 is not representable in binary; 3 of 10 must still reach it, 2 of 10 not.
    let mut m = Model::new(
        Config::builder()
            .failure_rate(0.3)
            .count_window(10)
            .min_calls(10),
    );
    m.calls(8, Verdict::Success, secs(0));
    m.calls(2, Verdict::Failure, secs(0));
    assert_eq!(m.state.phase, Phase::Closed);
    m.call(Verdict::Failure, Nanos::ZERO, secs(0));
    assert_eq!(m.counts(secs(0)), counts(10, 3, 0));
    assert_eq!(m.state.phase, Phase::Open);
}

#[test]
fn a_rate_is_not_judged_below_min_calls() {
    let mut m = Model::new(half_of_100());
    m.calls(99, Verdict::Failure, secs(0));
    assert_eq!(m.state.phase, Phase::Closed);
    m.call(Verdict::Failure, Nanos::ZERO, secs(0));
    assert_eq!(m.state.phase, Phase::Open);
}

// ----- rule 7: windows ------------------------------------------------------------------------

#[test]
fn count_window_slides_after_a_long_healthy_history() {
    let mut m = Model::new(half_of_100());
    m.calls(1_000, Verdict::Success, secs(0));
    m.calls(49, Verdict::Failure, secs(0));
    assert_eq!(m.state.phase, Phase::Closed);
    assert_eq!(m.counts(secs(0)), counts(100, 49, 0));
    m.call(Verdict::Failure, Nanos::ZERO, secs(0));
    assert_eq!(m.state.phase, Phase::Open, "exactly 50 failures trip");
}

#[test]
fn time_window_buckets_align_to_the_clock_zero_and_old_ones_are_evicted() {
    // 10 s in 10 buckets of 1 s: at time t the window holds buckets floor(t)-9 ..= floor(t).
    let mut m = Model::new(
        Config::builder()
            .failure_rate(1.0)
            .time_window(Duration::from_secs(10), 10)
            .min_calls(100),
    );
    m.call(Verdict::Failure, Nanos::ZERO, Nanos(SEC - 1)); // bucket 0
    m.call(Verdict::Failure, Nanos::ZERO, secs(1)); // bucket 1
    m.call(Verdict::Success, Nanos::ZERO, ms(1_500)); // bucket 1
    assert_eq!(m.counts(Nanos(10 * SEC - 1)), counts(3, 2, 0));
    assert_eq!(m.counts(secs(10)), counts(2, 1, 0), "bucket 0 left at 10 s");
    assert_eq!(m.counts(Nanos(11 * SEC - 1)), counts(2, 1, 0));
    assert_eq!(m.counts(secs(11)), counts(0, 0, 0), "bucket 1 left at 11 s");
}

#[test]
fn time_window_reuses_a_ring_slot_for_a_later_bucket() {
    let mut m = Model::new(
        Config::builder()
            .failure_rate(1.0)
            .time_window(Duration::from_secs(3), 3)
            .min_calls(100),
    );
    m.call(Verdict::Failure, Nanos::ZERO, secs(0)); // bucket 0, slot 0
    m.call(Verdict::Success, Nanos::ZERO, secs(1)); // bucket 1, slot 1
    m.call(Verdict::Success, Nanos::ZERO, secs(3)); // bucket 3, slot 0 again
    assert_eq!(m.counts(secs(3)), counts(2, 0, 0));
    // An idle stretch longer than the window empties it entirely.
    assert_eq!(m.counts(secs(100)), counts(0, 0, 0));
    m.call(Verdict::Failure, Nanos::ZERO, secs(100));
    assert_eq!(m.counts(secs(100)), counts(1, 1, 0));
}

// ----- rule 8: policies combine ---------------------------------------------------------------

fn combined() -> ConfigBuilder {
    Config::builder()
        .consecutive_failures(3)
        .failure_rate(0.5)
        .count_window(10)
        .min_calls(10)
}

#[test]
fn combined_policy_trips_on_a_streak_before_min_calls() {
    let mut m = Model::new(combined());
    m.calls(2, Verdict::Failure, secs(0));
    let step = m.call(Verdict::Failure, Nanos::ZERO, secs(0));
    assert_eq!(
        step.transition.map(|t| t.reason),
        Some(TransitionReason::Tripped(TripReason::ConsecutiveFailures))
    );
}

#[test]
fn combined_policy_trips_on_the_rate_without_a_streak() {
    let mut m = Model::new(combined());
    let mut last = None;
    for _ in 0..5 {
        m.call(Verdict::Success, Nanos::ZERO, secs(0));
        last = m.call(Verdict::Failure, Nanos::ZERO, secs(0)).transition;
    }
    assert_eq!(
        last.map(|t| t.reason),
        Some(TransitionReason::Tripped(TripReason::FailureRate))
    );
}

#[test]
fn min_calls_above_the_window_size_is_a_config_error() {
    let err = Config::builder()
        .failure_rate(0.5)
        .count_window(10)
        .min_calls(11)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "min_calls");
    assert_eq!(err.value(), "11");
}

// ----- rule 9: open duration, backoff, jitter, trips -------------------------------------------

fn backoff_config() -> ConfigBuilder {
    one_failure_trips()
        .recovery_timeout(Duration::from_secs(1))
        .backoff(2.0, Duration::from_secs(5))
        .required_successes(1)
        .half_open_timeout(Duration::from_secs(100))
}

#[test]
fn open_duration_grows_by_the_multiplier_and_stops_at_the_cap() {
    let mut m = Model::new(backoff_config());
    let mut now = secs(0);
    m.trip_now(now);
    let mut seen = vec![m.state.open_until.saturating_sub(now)];
    for _ in 0..5 {
        now = m.state.open_until;
        let probe = m.admit(now);
        m.outcome(probe, Verdict::Failure, Nanos::ZERO, now);
        seen.push(m.state.open_until.saturating_sub(now));
    }
    assert_eq!(
        seen,
        [secs(1), secs(2), secs(4), secs(5), secs(5), secs(5)],
        "1, 2, 4, then capped at 5"
    );
    assert_eq!(m.state.trips, 6);
}

#[test]
fn every_reopen_counts_as_a_trip_including_the_half_open_deadline() {
    let mut m = Model::new(backoff_config());
    m.trip_now(secs(0));
    assert_eq!(m.state.trips, 1, "a closed trip");
    let probe = m.admit(secs(1));
    m.outcome(probe, Verdict::Failure, Nanos::ZERO, secs(1));
    assert_eq!(m.state.trips, 2, "a probe failure");
    m.admit(secs(3));
    assert_eq!(m.reject(secs(103)), (Phase::Open, Some(secs(4))));
    assert_eq!(m.state.trips, 3, "the half-open deadline");
}

#[test]
fn trips_reset_on_close_and_on_reset() {
    let mut m = Model::new(backoff_config());
    m.trip_now(secs(0));
    let probe = m.admit(secs(1));
    m.outcome(probe, Verdict::Failure, Nanos::ZERO, secs(1));
    assert_eq!(m.state.trips, 2);
    let probe = m.admit(secs(3));
    m.outcome(probe, Verdict::Success, Nanos::ZERO, secs(3));
    assert_eq!((m.state.phase, m.state.trips), (Phase::Closed, 0));
    m.trip_now(secs(4));
    assert_eq!(m.state.open_until, secs(5), "back to the base duration");
    m.apply(Operation::Reset, secs(4));
    assert_eq!(m.state.trips, 0);
}

#[test]
fn jitter_only_shortens_the_open_duration() {
    let config = backoff_config().jitter(0.5).build().expect("valid");
    assert_eq!(config.open_duration(1, 0.0), secs(1));
    assert_eq!(config.open_duration(1, 0.5), ms(750));
    assert_eq!(config.open_duration(3, 0.5), secs(3));
    assert_eq!(
        config.open_duration(9, 0.5),
        ms(3_750),
        "capped, then shortened"
    );
    // The shortest possible is d * (1 - jitter); never longer than d.
    let nearly_one = 1.0 - f64::EPSILON;
    assert!(config.open_duration(1, nearly_one) >= ms(500));
    assert!(config.open_duration(1, nearly_one) < secs(1));

    let mut m = Model::new(backoff_config().jitter(0.5));
    m.r = 0.5;
    m.trip_now(secs(0));
    assert_eq!(m.state.open_until, ms(750));
}

#[test]
fn manual_control_does_not_change_trips() {
    let mut m = Model::new(backoff_config());
    m.trip_now(secs(0));
    m.apply(Operation::ForceOpen { until: None }, secs(0));
    m.apply(Operation::Disable { until: None }, secs(0));
    assert_eq!(m.state.trips, 1);
}

// ----- rule 10: retry_after -------------------------------------------------------------------

#[test]
fn retry_after_is_the_rest_of_the_open_phase() {
    let mut m = Model::new(one_failure_trips());
    m.trip_now(secs(0));
    assert_eq!(m.reject(ms(2_500)), (Phase::Open, Some(ms(7_500))));
    assert_eq!(m.state.retry_after(ms(2_500), &m.config), Some(ms(7_500)));
}

#[test]
fn retry_after_in_a_full_half_open_is_the_time_to_its_deadline() {
    let mut m = Model::new(one_failure_trips());
    m.trip_now(secs(0));
    m.admit(secs(10));
    assert_eq!(m.reject(secs(15)), (Phase::HalfOpen, Some(secs(25))));
}

#[test]
fn retry_after_when_forced_open_is_the_rest_of_the_override_or_none() {
    let mut m = Model::new(one_failure_trips());
    m.apply(Operation::ForceOpen { until: None }, secs(0));
    assert_eq!(m.reject(secs(1)), (Phase::ForcedOpen, None));
    m.apply(
        Operation::ForceOpen {
            until: Some(secs(60)),
        },
        secs(1),
    );
    assert_eq!(m.reject(secs(20)), (Phase::ForcedOpen, Some(secs(40))));
}

// ----- rule 11: manual control ----------------------------------------------------------------

#[test]
fn force_open_starts_a_new_generation_only_when_the_phase_changes() {
    let mut m = Model::new(one_failure_trips());
    let step = m.apply(Operation::ForceOpen { until: None }, secs(0));
    assert_eq!(step.decision, Decision::Done);
    assert_eq!(m.state.generation, 1);
    let step = m.apply(Operation::ForceOpen { until: None }, secs(1));
    assert_eq!(step.transition, None);
    assert_eq!(m.state.generation, 1);
    assert_eq!(m.state.since, secs(0));
}

#[test]
fn disable_starts_a_new_generation_only_when_the_phase_changes() {
    let mut m = Model::new(one_failure_trips());
    m.apply(Operation::Disable { until: None }, secs(0));
    assert_eq!((m.state.phase, m.state.generation), (Phase::Disabled, 1));
    m.apply(Operation::Disable { until: None }, secs(1));
    assert_eq!(m.state.generation, 1);
    let held = m.admit(secs(2));
    assert_eq!(held.kind, PermitKind::Passthrough);
    m.outcome(held, Verdict::Failure, Nanos::ZERO, secs(2));
    assert_eq!(m.state.phase, Phase::Disabled, "nothing is recorded");
}

#[test]
fn manual_control_works_from_every_phase() {
    for manual in [
        Operation::ForceOpen { until: None },
        Operation::Disable { until: None },
    ] {
        let mut m = Model::new(one_failure_trips().max_probes(2));
        m.trip_now(secs(0));
        let probe = m.admit(secs(10));
        assert_eq!(m.state.phase, Phase::HalfOpen);
        let generation = m.state.generation;
        m.apply(manual, secs(11));
        assert_eq!(m.state.generation, generation + 1);
        assert_eq!(m.state.in_flight, 0);
        assert_eq!(m.release(probe, secs(12)).decision, Decision::Stale);
    }
}

#[test]
fn reset_always_starts_a_fresh_closed_generation() {
    let mut m = Model::new(combined());
    m.calls(2, Verdict::Failure, secs(0));
    let held = m.admit(secs(0));
    let step = m.apply(Operation::Reset, secs(1));
    assert_eq!(
        step.transition.map(|t| (t.from, t.to, t.reason)),
        Some((Phase::Closed, Phase::Closed, TransitionReason::Reset))
    );
    assert_eq!(m.state.generation, 1);
    assert_eq!(m.state.consecutive_failures, 0);
    assert_eq!(m.counts(secs(1)), counts(0, 0, 0));
    assert_eq!(
        m.outcome(held, Verdict::Failure, Nanos::ZERO, secs(1))
            .decision,
        Decision::Stale
    );
    // Reset clears an override too.
    m.apply(Operation::ForceOpen { until: None }, secs(2));
    m.apply(Operation::Reset, secs(3));
    assert_eq!(
        (m.state.phase, m.state.open_until),
        (Phase::Closed, Nanos::ZERO)
    );
    assert_eq!(m.admit(secs(3)).kind, PermitKind::Normal);
}

#[test]
fn force_open_for_expiry_sends_the_next_acquire_to_half_open() {
    let mut m = Model::new(one_failure_trips());
    m.apply(
        Operation::ForceOpen {
            until: Some(secs(5)),
        },
        secs(0),
    );
    assert_eq!(
        m.reject(Nanos(5 * SEC - 1)),
        (Phase::ForcedOpen, Some(Nanos(1)))
    );
    let step = m.acquire(secs(5));
    assert_eq!(
        step.transition.map(|t| (t.from, t.to, t.reason)),
        Some((
            Phase::ForcedOpen,
            Phase::HalfOpen,
            TransitionReason::CooldownElapsed
        ))
    );
    assert!(matches!(
        step.decision,
        Decision::Admitted {
            kind: PermitKind::Probe,
            ..
        }
    ));
}

#[test]
fn disable_with_expiry_closes_on_any_operation_after_it() {
    // An outcome after the expiry closes the breaker and is stale.
    let mut m = Model::new(one_failure_trips());
    m.apply(
        Operation::Disable {
            until: Some(secs(5)),
        },
        secs(0),
    );
    let held = m.admit(secs(4));
    let step = m.outcome(held, Verdict::Failure, Nanos::ZERO, secs(5));
    assert_eq!(step.decision, Decision::Stale);
    assert_eq!(
        step.transition.map(|t| (t.from, t.to, t.reason)),
        Some((
            Phase::Disabled,
            Phase::Closed,
            TransitionReason::OverrideExpired
        ))
    );
    assert_eq!(m.state.phase, Phase::Closed);

    // So does a release, and an acquire.
    let mut m = Model::new(one_failure_trips());
    m.apply(
        Operation::Disable {
            until: Some(secs(5)),
        },
        secs(0),
    );
    let held = m.admit(secs(1));
    assert_eq!(m.release(held, secs(6)).decision, Decision::Stale);
    assert_eq!(m.state.phase, Phase::Closed);
    m.apply(
        Operation::Disable {
            until: Some(secs(8)),
        },
        secs(7),
    );
    assert_eq!(m.admit(secs(8)).kind, PermitKind::Normal);
}

// ----- rule 12: stale permits change nothing ---------------------------------------------------

#[test]
fn stale_outcomes_and_releases_change_nothing() {
    let mut m = Model::new(one_failure_trips().max_probes(2).required_successes(2));
    let closed = m.admit(secs(0));
    m.trip_now(secs(0));
    let probe = m.admit(secs(10));
    let other = m.admit(secs(10));
    m.outcome(probe, Verdict::Success, Nanos::ZERO, secs(11));
    let before = m.state.clone();
    for verdict in [Verdict::Success, Verdict::Failure, Verdict::Ignore] {
        let step = m.outcome(closed, verdict, Nanos::ZERO, secs(12));
        assert_eq!((step.decision, step.transition), (Decision::Stale, None));
        assert_eq!(m.state, before);
    }
    assert_eq!(m.release(closed, secs(12)).decision, Decision::Stale);
    assert_eq!(m.state, before);
    // A permit from a half-open phase that was left is stale as well.
    m.apply(Operation::ForceOpen { until: None }, secs(13));
    let before = m.state.clone();
    assert_eq!(
        m.outcome(other, Verdict::Failure, Nanos::ZERO, secs(14))
            .decision,
        Decision::Stale
    );
    assert_eq!(m.state, before);
}

// ----- rule 13: the phase a rejection carries ---------------------------------------------------

#[test]
fn a_rejection_carries_the_phase_after_the_operation() {
    let mut m = Model::new(one_failure_trips());
    m.trip_now(secs(0));
    m.admit(secs(10));
    assert_eq!(m.reject(secs(20)).0, Phase::HalfOpen);
    let step = m.acquire(secs(40));
    assert_eq!(
        step.decision,
        Decision::Rejected {
            phase: Phase::Open,
            retry_after: Some(secs(10))
        }
    );
    assert_eq!(
        step.transition.map(|t| t.reason),
        Some(TransitionReason::HalfOpenTimedOut)
    );
}

#[test]
fn an_expired_disable_closes_like_any_close_and_resets_trips() {
    // Rule 9: trips reset on close; a close by override expiry is a close.
    let mut m = Model::new(one_failure_trips());
    let held = m.admit(secs(0));
    m.outcome(held, Verdict::Failure, Nanos::ZERO, secs(0));
    assert_eq!(m.state.trips, 1);
    m.apply(
        Operation::Disable {
            until: Some(secs(5)),
        },
        secs(1),
    );
    assert_eq!(m.state.trips, 1, "disable does not change trips (rule 11)");
    m.admit(secs(5));
    assert_eq!(m.state.phase, Phase::Closed);
    assert_eq!(m.state.trips, 0);
}

// Rule 19: outcomes that waited in a batch are placed where they completed.

#[test]
fn a_success_that_completed_before_the_streak_began_does_not_end_it() {
    let mut m = Model::new(Config::builder().consecutive_failures(3));
    let held = m.admit(ms(0));
    m.late(held, Verdict::Failure, Nanos::ZERO, ms(100));
    m.late(held, Verdict::Failure, Nanos::ZERO, ms(110));
    assert_eq!(m.state.streak_started, ms(100));
    // Completed at 60 ms, reported at 120 ms: before the streak, which stands.
    m.late(held, Verdict::Success, ms(60), ms(120));
    assert_eq!(m.state.consecutive_failures, 2);
    // The third failure trips, as it would have had the success arrived in time.
    let step = m.late(held, Verdict::Failure, Nanos::ZERO, ms(130));
    assert_eq!(
        step.transition.map(|t| t.reason),
        Some(TransitionReason::Tripped(TripReason::ConsecutiveFailures))
    );
}

#[test]
fn a_success_that_completed_after_the_streak_began_ends_it() {
    let mut m = Model::new(Config::builder().consecutive_failures(3));
    let held = m.admit(ms(0));
    m.late(held, Verdict::Failure, Nanos::ZERO, ms(100));
    // Completed at 100 ms, the streak's start: not before it.
    m.late(held, Verdict::Success, ms(20), ms(120));
    assert_eq!(m.state.consecutive_failures, 0);
    assert_eq!(m.state.streak_started, Nanos::ZERO);
}

#[test]
fn a_late_failure_moves_the_streak_start_back() {
    let mut m = Model::new(Config::builder().consecutive_failures(5));
    let held = m.admit(ms(0));
    m.late(held, Verdict::Failure, Nanos::ZERO, ms(100));
    m.late(held, Verdict::Failure, ms(50), ms(110));
    assert_eq!(m.state.streak_started, ms(60));
    m.late(held, Verdict::Failure, Nanos::ZERO, ms(120));
    assert_eq!(m.state.streak_started, ms(60));
    // A success from 70 ms is after the start: the streak ends.
    m.late(held, Verdict::Success, ms(60), ms(130));
    assert_eq!(m.state.consecutive_failures, 0);
}

#[test]
fn a_streak_that_starts_in_the_future_ends_at_any_success() {
    // The clock stepped back: the streak's start is ahead of `now`, so no success can
    // be placed before it, and every success ends the streak.
    let mut m = Model::new(Config::builder().consecutive_failures(3));
    let held = m.admit(ms(0));
    m.late(held, Verdict::Failure, Nanos::ZERO, secs(100));
    m.late(held, Verdict::Success, ms(1), secs(70));
    assert_eq!(m.state.consecutive_failures, 0);
}

// ----- rule 20: shadow permits in half-open ----------------------------------------------------

#[test]
fn a_shadow_passthrough_permit_of_a_half_open_phase_frees_no_probe_slot() {
    let mut m = Model::new(one_failure_trips().shadow(true));
    m.trip_now(secs(0));
    let probe = m.admit(secs(10));
    assert_eq!(probe.kind, PermitKind::Probe);
    // The only slot is taken: shadow mode admits what it would reject, in this generation.
    let passthrough = m.admit(secs(11));
    assert_eq!(
        passthrough,
        Held {
            generation: probe.generation,
            kind: PermitKind::Passthrough
        }
    );
    let step = m.release(passthrough, secs(12));
    assert_eq!(step.decision, Decision::Recorded);
    assert_eq!(m.state.in_flight, 1, "a release of a passthrough");
    let again = m.admit(secs(13));
    m.outcome(again, Verdict::Success, Nanos::ZERO, secs(14));
    assert_eq!(m.state.in_flight, 1, "an outcome of a passthrough");
    assert_eq!(m.state.phase, Phase::HalfOpen);
}

// ----- rule 23: the ramp -------------------------------------------------------------------

/// One failure trips; the open phase doubles with every trip (10 s, 20 s, ...); one probe
/// success closes, into a 10 s ramp from half of the calls.
fn ramped() -> ConfigBuilder {
    one_failure_trips()
        .backoff(2.0, Duration::from_secs(600))
        .required_successes(1)
        .ramp(0.5, Duration::from_secs(10))
}

/// Trips at 0 s and closes at 10 s into a ramp that ends at 20 s, with the trip kept.
fn closed_into_a_ramp() -> Model {
    let mut m = Model::new(ramped());
    m.trip_now(secs(0));
    let probe = m.admit(secs(10));
    assert_eq!(probe.kind, PermitKind::Probe);
    m.outcome(probe, Verdict::Success, Nanos::ZERO, secs(10));
    assert_eq!(
        (m.state.phase, m.state.ramp_started, m.state.trips),
        (Phase::Closed, Some(secs(10)), 1),
        "the close keeps the trip while the ramp lasts"
    );
    m
}

#[test]
fn an_acquire_after_the_ramp_ends_it_and_resets_the_trips() {
    let mut m = closed_into_a_ramp();
    m.admit(secs(20));
    assert_eq!(
        (m.state.ramp_started, m.state.trips),
        (None, 0),
        "the recovery is complete"
    );
}

#[test]
fn a_trip_after_the_ramp_is_the_first_one() {
    let mut m = closed_into_a_ramp();
    // No acquire since the ramp ran out: the trip itself ends it first.
    let held = m.admit(secs(19));
    m.outcome(held, Verdict::Failure, Nanos::ZERO, secs(20));
    assert_eq!(m.state.phase, Phase::Open);
    assert_eq!(
        (m.state.trips, m.state.open_until),
        (1, secs(30)),
        "the base cool-down, not the backed-off one"
    );
}

// ----- names ----------------------------------------------------------------------------------

#[test]
fn every_transition_reason_is_parsed_back_from_its_name() {
    let reasons = [
        TransitionReason::Tripped(TripReason::ConsecutiveFailures),
        TransitionReason::Tripped(TripReason::FailureRate),
        TransitionReason::Tripped(TripReason::SlowCallRate),
        TransitionReason::CooldownElapsed,
        TransitionReason::ProbeFailed,
        TransitionReason::HalfOpenTimedOut,
        TransitionReason::ProbesSucceeded,
        TransitionReason::OverrideExpired,
        TransitionReason::ForcedOpen,
        TransitionReason::Disabled,
        TransitionReason::Reset,
        TransitionReason::Restored,
    ];
    for reason in reasons {
        assert_eq!(
            TransitionReason::from_name(reason.as_str()),
            Some(reason),
            "{}",
            reason.as_str()
        );
    }
    let names: std::collections::HashSet<_> = reasons.iter().map(|r| r.as_str()).collect();
    assert_eq!(names.len(), reasons.len(), "names are distinct");
    assert_eq!(TransitionReason::from_name(""), None);
    assert_eq!(
        TransitionReason::from_name("Reset"),
        None,
        "names are exact"
    );
}

#[test]
fn a_success_without_a_failure_run_clears_a_run_start_left_in_the_state() {
    // A state rebuilt from a store may hold a run start without a run: a success that
    // completed before that start still has no run to spare, and clears it.
    let mut m = Model::new(Config::builder().consecutive_failures(3));
    m.state.streak_started = secs(100);
    let held = m.admit(secs(200));
    m.late(held, Verdict::Success, secs(150), secs(200));
    assert_eq!(m.state.consecutive_failures, 0);
    assert_eq!(m.state.streak_started, Nanos::ZERO);
}

// Rule 22: a call past its permit's deadline is a failure with reason timeout.

fn with_deadlines() -> ConfigBuilder {
    one_failure_trips()
        .consecutive_failures(2)
        .call_timeout(Duration::from_millis(200))
        .probe_timeout(Duration::from_millis(50))
}

#[test]
fn a_call_later_than_its_deadline_is_a_failure_whatever_its_verdict() {
    for verdict in [Verdict::Success, Verdict::Ignore, Verdict::Failure] {
        let mut m = Model::new(with_deadlines());
        m.call(verdict, ms(201), ms(300));
        assert_eq!(m.state.consecutive_failures, 1, "{verdict:?}");
        let step = m.call(Verdict::Success, Nanos(200 * MS + 1), ms(400));
        assert_eq!(
            step.transition.map(|t| t.reason),
            Some(TransitionReason::Tripped(TripReason::ConsecutiveFailures)),
            "{verdict:?}"
        );
    }
}

#[test]
fn a_call_exactly_at_its_deadline_keeps_its_verdict() {
    let mut m = Model::new(with_deadlines());
    m.call(Verdict::Failure, Nanos::ZERO, ms(0));
    m.call(Verdict::Success, ms(200), ms(300));
    assert_eq!(m.state.consecutive_failures, 0);
    m.call(Verdict::Ignore, ms(200), ms(300));
    assert_eq!(m.state.consecutive_failures, 0);
}

#[test]
fn a_probe_is_held_to_the_shorter_probe_timeout() {
    let mut m = Model::new(with_deadlines());
    m.calls(2, Verdict::Failure, ms(0));
    assert_eq!(m.state.phase, Phase::Open);
    let probe = m.admit(secs(10));
    assert_eq!(probe.kind, PermitKind::Probe);
    // 51 ms is well within the call timeout, but not the probe's.
    let step = m.outcome(probe, Verdict::Success, ms(51), ms(10_051));
    assert_eq!(
        step.transition.map(|t| t.reason),
        Some(TransitionReason::ProbeFailed)
    );
}

#[test]
fn without_a_probe_timeout_probes_use_the_call_timeout() {
    let mut m = Model::new(
        one_failure_trips()
            .required_successes(1)
            .call_timeout(Duration::from_millis(200)),
    );
    m.trip_now(ms(0));
    let probe = m.admit(secs(10));
    m.outcome(probe, Verdict::Success, ms(199), ms(10_199));
    assert_eq!(m.state.phase, Phase::Closed);
    m.trip_now(secs(11));
    let probe = m.admit(secs(21));
    m.outcome(probe, Verdict::Success, ms(201), ms(21_201));
    assert_eq!(m.state.phase, Phase::Open);
}

#[test]
fn without_deadlines_a_slow_call_keeps_its_verdict() {
    let mut m = Model::new(one_failure_trips());
    m.call(Verdict::Success, secs(3_600), secs(3_600));
    assert_eq!(m.state.phase, Phase::Closed);
}
