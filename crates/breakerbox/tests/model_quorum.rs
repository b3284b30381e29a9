//! Rule 21 in the pure model: a failure-driven trip needs failures from `quorum` distinct
//! nodes within the streak or the window; one node's failures alone open only that node
//! locally. Driven through `ModelState::apply` with explicit times and node ids.

use std::time::Duration;

use breakerbox::model::{
    Decision, ModelState, Operation, PermitKind, QuorumTrack, Step, TripReason,
};
use breakerbox::{CircuitBreaker, Config, ConfigBuilder, Nanos, Phase, Verdict};

const MS: u64 = 1_000_000;

struct Model {
    state: ModelState,
    config: Config,
}

impl Model {
    fn new(builder: ConfigBuilder) -> Model {
        let config = builder.build().expect("valid config");
        Model {
            state: ModelState::new(&config),
            config,
        }
    }

    /// A closed-phase call of `node` at `now_ms` that ended with `verdict` (latency `lat_ms`).
    fn call(&mut self, node: u64, verdict: Verdict, lat_ms: u64, now_ms: u64) -> Step {
        let now = Nanos(now_ms * MS);
        let step = self.state.apply(Operation::Acquire, now, &self.config, 0.5);
        let Decision::Admitted { generation, kind } = step.decision else {
            panic!("expected an admission, got {step:?}");
        };
        assert_eq!(kind, PermitKind::Normal);
        let outcome = Operation::Outcome {
            generation,
            kind,
            verdict,
            latency: Nanos(lat_ms * MS),
            retry_hint: None,
            age: Nanos::ZERO,
            node,
        };
        self.state.apply(outcome, now, &self.config, 0.5)
    }

    fn fail(&mut self, node: u64, now_ms: u64) -> Step {
        self.call(node, Verdict::Failure, 1, now_ms)
    }
}

fn local_open(reason: TripReason, open_for_ms: u64) -> Decision {
    Decision::LocalOpen {
        reason,
        open_for: Nanos(open_for_ms * MS),
    }
}

fn consecutive(k: u32) -> ConfigBuilder {
    Config::builder()
        .consecutive_failures(3)
        .recovery_timeout(Duration::from_secs(10))
        .jitter(0.5)
        .quorum(k)
}

#[test]
fn one_nodes_streak_opens_it_locally_and_leaves_the_shared_phase_closed() {
    let mut m = Model::new(consecutive(2));
    m.fail(7, 0);
    m.fail(7, 1);
    let step = m.fail(7, 2);
    // The open duration a trip would have had, without jitter.
    assert_eq!(
        step.decision,
        local_open(TripReason::ConsecutiveFailures, 10_000)
    );
    assert_eq!(step.transition, None);
    assert_eq!(m.state.phase, Phase::Closed);
    assert_eq!(m.state.trips, 0);
    // Every further failure of that node alone answers the same.
    assert_eq!(
        m.fail(7, 3).decision,
        local_open(TripReason::ConsecutiveFailures, 10_000)
    );
}

#[test]
fn a_second_nodes_failure_within_the_streak_trips_the_fleet() {
    let mut m = Model::new(consecutive(2));
    m.fail(7, 0);
    m.fail(7, 1);
    m.fail(7, 2);
    let step = m.fail(8, 3);
    assert_eq!(step.decision, Decision::Recorded);
    let t = step.transition.expect("a trip");
    assert_eq!((t.from, t.to), (Phase::Closed, Phase::Open));
    assert_eq!(m.state.phase, Phase::Open);
}

#[test]
fn a_node_whose_failures_ended_with_the_last_streak_does_not_count() {
    let mut m = Model::new(consecutive(2));
    m.fail(8, 0);
    // A success ends the streak node 8 was part of.
    assert_eq!(
        m.call(8, Verdict::Success, 1, 1).decision,
        Decision::Recorded
    );
    m.fail(7, 2);
    m.fail(7, 3);
    assert_eq!(
        m.fail(7, 4).decision,
        local_open(TripReason::ConsecutiveFailures, 10_000)
    );
    assert_eq!(m.state.phase, Phase::Closed);
}

#[test]
fn without_a_quorum_one_nodes_failures_trip_the_fleet() {
    for k in [None, Some(1)] {
        let mut b = Config::builder().consecutive_failures(3);
        if let Some(k) = k {
            b = b.quorum(k);
        }
        let mut m = Model::new(b);
        m.fail(7, 0);
        m.fail(7, 1);
        let step = m.fail(7, 2);
        assert_eq!(step.decision, Decision::Recorded);
        assert_eq!(m.state.phase, Phase::Open, "quorum {k:?}");
        // Nothing is tracked without a quorum.
        assert_eq!(m.state.quorum, Default::default());
    }
}

#[test]
fn a_count_window_counts_only_the_nodes_whose_failures_it_still_holds() {
    let mut m = Model::new(
        Config::builder()
            .failure_rate(0.5)
            .count_window(4)
            .min_calls(4)
            .recovery_timeout(Duration::from_secs(5))
            .quorum(2),
    );
    m.fail(8, 0);
    for t in 1..4 {
        m.call(7, Verdict::Success, 1, t);
    }
    // Node 8's failure leaves the window with this call: 2 of 4 failed, all node 7's.
    m.fail(7, 4);
    let step = m.fail(7, 5);
    assert_eq!(step.decision, local_open(TripReason::FailureRate, 5_000));
    assert_eq!(m.state.phase, Phase::Closed);
    // Node 8 fails again, within the window: the fleet trips.
    m.fail(8, 6);
    assert_eq!(m.state.phase, Phase::Open);
}

#[test]
fn a_time_window_counts_only_the_nodes_whose_failures_are_within_its_duration() {
    let mut m = Model::new(
        Config::builder()
            .failure_rate(1.0)
            .time_window(Duration::from_secs(1), 1)
            .min_calls(2)
            .recovery_timeout(Duration::from_secs(5))
            .quorum(2),
    );
    m.fail(8, 100);
    // A second later node 8's failure has left the window.
    m.fail(7, 1_100);
    assert_eq!(
        m.fail(7, 1_200).decision,
        local_open(TripReason::FailureRate, 5_000)
    );
    m.fail(8, 1_300);
    assert_eq!(m.state.phase, Phase::Open);
}

#[test]
fn at_most_quorum_nodes_are_remembered() {
    let mut m = Model::new(Config::builder().consecutive_failures(1_000).quorum(3));
    for node in 1..=20 {
        m.fail(node, node);
        m.fail(node, node);
        assert!(m.state.quorum.nodes.len() <= 3);
    }
    let nodes: Vec<u64> = m.state.quorum.nodes.iter().map(|f| f.node).collect();
    assert_eq!(nodes, [18, 19, 20], "the three most recent, oldest first");
    assert_eq!(m.state.quorum.calls, 40);
}

#[test]
fn the_slow_call_rate_trips_without_a_quorum() {
    let mut m = Model::new(
        Config::builder()
            .slow_call_threshold(Duration::from_millis(100))
            .slow_call_rate(0.5)
            .count_window(4)
            .min_calls(2)
            .quorum(3),
    );
    m.call(7, Verdict::Success, 500, 0);
    m.call(7, Verdict::Success, 500, 1);
    assert_eq!(m.state.phase, Phase::Open);
}

#[test]
fn a_failed_probe_reopens_whatever_the_quorum() {
    let mut m = Model::new(consecutive(2).recovery_timeout(Duration::from_millis(10)));
    m.fail(7, 0);
    m.fail(7, 1);
    m.fail(8, 2);
    assert_eq!(m.state.phase, Phase::Open);
    let now = Nanos(20 * MS);
    let step = m.state.apply(Operation::Acquire, now, &m.config, 0.0);
    let Decision::Admitted { generation, kind } = step.decision else {
        panic!("{step:?}");
    };
    let probe = Operation::Outcome {
        generation,
        kind,
        verdict: Verdict::Failure,
        latency: Nanos(MS),
        retry_hint: None,
        age: Nanos::ZERO,
        node: 9,
    };
    m.state.apply(probe, now, &m.config, 0.0);
    assert_eq!(m.state.phase, Phase::Open);
    assert_eq!(m.state.trips, 2);
}

#[test]
fn a_new_closed_phase_forgets_the_failing_nodes() {
    let mut m = Model::new(consecutive(2));
    m.fail(7, 0);
    let reset = m.state.apply(Operation::Reset, Nanos(MS), &m.config, 0.0);
    assert!(reset.transition.is_some());
    assert_eq!(m.state.quorum, Default::default());
}

#[test]
fn quorum_is_validated_and_named_and_the_in_memory_engine_refuses_one() {
    for bad in [0, 65] {
        let err = Config::builder().quorum(bad).build().unwrap_err();
        assert_eq!(err.field(), "quorum");
        assert!(err.to_string().contains(&bad.to_string()), "{err}");
    }
    assert_eq!(Config::builder().quorum(64).build().unwrap().quorum, 64);
    assert_eq!(Config::builder().build().unwrap().quorum, 1);
    let err = CircuitBreaker::builder().quorum(2).build().unwrap_err();
    assert_eq!(err.field(), "quorum");
    assert!(CircuitBreaker::builder().quorum(1).build().is_ok());
}

#[cfg(feature = "serde")]
#[test]
fn quorum_reads_from_and_writes_to_a_config_file_under_its_key() {
    use breakerbox::config::ConfigFile;
    let file: ConfigFile = toml::from_str("consecutive_failures = 3\nquorum = 2").unwrap();
    let config = file.to_config().unwrap();
    assert_eq!(config.quorum, 2);
    let written = toml::to_string(&ConfigFile::from(&config)).unwrap();
    assert!(written.contains("quorum = 2"), "{written}");
    let back: ConfigFile = toml::from_str(&written).unwrap();
    assert_eq!(back.to_config().unwrap(), config);
    // No quorum is not written at all.
    let plain = Config::builder().build().unwrap();
    assert!(!toml::to_string(&ConfigFile::from(&plain))
        .unwrap()
        .contains("quorum"));
    let file: ConfigFile = toml::from_str("quorum = 100").unwrap();
    assert_eq!(file.to_config().unwrap_err().field(), "quorum");
}

#[test]
fn a_success_that_finds_a_rule_firing_without_the_quorum_opens_nothing() {
    let mut m = Model::new(
        Config::builder()
            .failure_rate(0.5)
            .count_window(4)
            .min_calls(4)
            .quorum(2),
    );
    m.fail(7, 0);
    m.fail(7, 1);
    m.fail(7, 2);
    // Node 8's success brings the window to min_calls with 3 of 4 failed: the rule
    // fires, without the quorum, and node 8 (healthy) is not told to open.
    assert_eq!(
        m.call(8, Verdict::Success, 1, 3).decision,
        Decision::Recorded
    );
    assert_eq!(m.state.phase, Phase::Closed);
    assert_eq!(
        m.fail(7, 4).decision,
        local_open(TripReason::FailureRate, 30_000)
    );
}

#[test]
fn a_count_window_drops_a_nodes_failure_exactly_when_it_leaves_the_window() {
    let mut m = Model::new(
        Config::builder()
            .failure_rate(0.5)
            .count_window(4)
            .min_calls(4)
            .recovery_timeout(Duration::from_secs(5))
            .quorum(3),
    );
    m.fail(6, 0);
    m.fail(7, 1);
    // The window fires from the 4th call on, with failures of two nodes: no quorum.
    for t in 2..4 {
        assert_eq!(
            m.call(8, Verdict::Success, 1, t).decision,
            Decision::Recorded
        );
    }
    // The 5th call is node 8's failure; node 6's, 4 calls ago, has just left the window:
    // two nodes of three.
    assert_eq!(
        m.fail(8, 4).decision,
        local_open(TripReason::FailureRate, 5_000)
    );
    assert_eq!(m.state.phase, Phase::Closed);
}

#[test]
fn a_lowered_quorum_keeps_only_the_most_recent_nodes() {
    let mut track = QuorumTrack::default();
    for node in 1..=4 {
        track.record(node, true, node == 1, Nanos(node), 4);
    }
    track.record(5, true, false, Nanos(5), 2);
    let nodes: Vec<u64> = track.nodes.iter().map(|f| f.node).collect();
    assert_eq!(nodes, [4, 5]);
    assert_eq!((track.calls, track.streak_from), (5, 1));
}
