//! Loom models of the breaker's concurrent paths: every interleaving of a few threads
//! (up to the preemption bound) is explored, with the crate's atomics and lock swapped for
//! loom's through `src/sync.rs`.
//!
//! Run with:
//! `RUSTFLAGS="--cfg loom" cargo test -p breakerbox --test loom --release`
//! (`LOOM_MAX_PREEMPTIONS` overrides the default bound of 4).
#![cfg(loom)]

use std::sync::Mutex as StdMutex;
use std::time::Duration;

use breakerbox::model::{PermitKind, Transition, TransitionReason};
use breakerbox::{
    Builder, CircuitBreaker, CircuitOpen, Event, EventKind, ManualClock, OwnedPermit, Phase,
};
use loom::thread;

const RECOVERY: Duration = Duration::from_secs(1);
const HALF_OPEN_TIMEOUT: Duration = Duration::from_secs(60);

type Permit = OwnedPermit<ManualClock>;

/// Runs `model` under loom, with a preemption bound of 4 unless `LOOM_MAX_PREEMPTIONS` says
/// otherwise, and checks that loom explored more than one interleaving.
fn check(name: &str, model: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(4);
    }
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = runs.clone();
    builder.check(move || {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        model();
    });
    let runs = runs.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("{name}: {runs} interleavings explored");
    assert!(runs > 1, "{name}: loom explored a single interleaving");
}

/// A breaker on a manual clock whose transitions are logged. The log is a std mutex: it is
/// only touched inside a listener call, which has no loom yield point, so it never blocks.
struct Rig {
    breaker: CircuitBreaker<ManualClock>,
    clock: ManualClock,
    log: std::sync::Arc<StdMutex<Vec<Transition>>>,
}

impl Rig {
    fn new(configure: impl FnOnce(Builder<ManualClock>) -> Builder<ManualClock>) -> Rig {
        let clock = ManualClock::new();
        let log = std::sync::Arc::new(StdMutex::new(Vec::new()));
        let sink = log.clone();
        let builder = CircuitBreaker::builder()
            .name("loom")
            .recovery_timeout(RECOVERY)
            .half_open_timeout(HALF_OPEN_TIMEOUT)
            .clock(clock.clone())
            .listener(move |event: &Event<'_>| {
                if let EventKind::Transition(t) = event.kind {
                    sink.lock().expect("log lock").push(t);
                }
            });
        let breaker = configure(builder).build().expect("a valid config");
        Rig {
            breaker,
            clock,
            log,
        }
    }

    fn acquire(&self) -> Permit {
        self.breaker
            .try_acquire_owned()
            .expect("the rig expects an admission")
    }

    /// Trips a `consecutive_failures(1)` breaker and lets its cool-down run out.
    fn trip_and_wait(&self) {
        self.acquire().failure();
        assert_eq!(self.breaker.phase(), Phase::Open);
        self.clock.advance(RECOVERY);
    }

    /// The transitions logged since the last call.
    fn take_transitions(&self) -> Vec<Transition> {
        std::mem::take(&mut *self.log.lock().expect("log lock"))
    }
}

// ----- (a) probe admission ---------------------------------------------------------------

#[test]
fn two_racers_after_the_cooldown_get_exactly_one_probe() {
    check(
        "two_racers_after_the_cooldown_get_exactly_one_probe",
        || {
            let rig = Rig::new(|b| b.consecutive_failures(1).max_probes(1));
            rig.trip_and_wait();
            rig.take_transitions();
            let racers: Vec<_> = (0..2)
                .map(|_| {
                    let breaker = rig.breaker.clone();
                    thread::spawn(move || breaker.try_acquire_owned())
                })
                .collect();
            let results: Vec<Result<Permit, CircuitOpen>> =
                racers.into_iter().map(|h| h.join().unwrap()).collect();

            let admitted: Vec<&Permit> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
            assert_eq!(admitted.len(), 1, "exactly one racer is admitted");
            assert!(admitted[0].is_probe());
            let rejected = results.iter().find_map(|r| r.as_ref().err()).unwrap();
            assert_eq!(rejected.phase(), Phase::HalfOpen);
            let snapshot = rig.breaker.snapshot();
            assert_eq!(snapshot.phase, Phase::HalfOpen);
            assert_eq!(snapshot.probes_in_flight, 1);
            let transitions = rig.take_transitions();
            assert_eq!(
                transitions.len(),
                1,
                "one cool-down transition: {transitions:?}"
            );
            assert_eq!(transitions[0].reason, TransitionReason::CooldownElapsed);
            assert_eq!(admitted[0].generation(), transitions[0].generation);
        },
    );
}

#[test]
fn two_racers_for_one_freed_slot_in_half_open_get_exactly_one_probe() {
    check(
        "two_racers_for_one_freed_slot_in_half_open_get_exactly_one_probe",
        || {
            let rig = Rig::new(|b| b.consecutive_failures(1).max_probes(1));
            rig.trip_and_wait();
            // Enter half-open and give the slot back, so the racers take the lock-free path.
            drop(rig.acquire());
            assert_eq!(rig.breaker.snapshot().probes_in_flight, 0);
            let racers: Vec<_> = (0..2)
                .map(|_| {
                    let breaker = rig.breaker.clone();
                    thread::spawn(move || breaker.try_acquire_owned())
                })
                .collect();
            let results: Vec<Result<Permit, CircuitOpen>> =
                racers.into_iter().map(|h| h.join().unwrap()).collect();

            let probes = results
                .iter()
                .filter(|r| r.as_ref().is_ok_and(|p| p.is_probe()))
                .count();
            assert_eq!(probes, 1, "exactly one racer is admitted, as a probe");
            assert_eq!(rig.breaker.snapshot().probes_in_flight, 1);
            assert_eq!(rig.breaker.phase(), Phase::HalfOpen);
        },
    );
}

// ----- (b) probe slots vs. releases vs. closing --------------------------------------------

/// Builds a half-open breaker (`max_probes(2)`) and returns a probe permit of an earlier
/// half-open generation, which a probe failure has already ended.
fn half_open_with_an_old_probe(rig: &Rig) -> Permit {
    rig.trip_and_wait();
    let old = rig.acquire();
    assert!(old.is_probe());
    rig.acquire().failure(); // re-opens: `old` is now stale
    rig.clock.advance(RECOVERY * 2);
    old
}

#[test]
fn a_freed_slot_is_reused_once_and_a_stale_release_frees_nothing() {
    check(
        "a_freed_slot_is_reused_once_and_a_stale_release_frees_nothing",
        || {
            let rig = Rig::new(|b| {
                b.consecutive_failures(1)
                    .max_probes(2)
                    .required_successes(2)
            });
            let old = half_open_with_an_old_probe(&rig);
            let p1 = rig.acquire();
            let p2 = rig.acquire();
            assert!(p1.is_probe() && p2.is_probe());
            let generation = p1.generation();
            assert_eq!(rig.breaker.snapshot().probes_in_flight, 2);
            let stale_before = rig.breaker.snapshot().stale_results;
            rig.take_transitions();

            let releaser = thread::spawn(move || drop(p1));
            let stale = thread::spawn(move || drop(old));
            let breaker = rig.breaker.clone();
            let acquirer = thread::spawn(move || {
                let result = breaker.try_acquire_owned();
                if result.is_ok() {
                    assert!(breaker.snapshot().probes_in_flight <= 2);
                }
                result
            });
            releaser.join().unwrap();
            stale.join().unwrap();
            let acquired = acquirer.join().unwrap();

            let snapshot = rig.breaker.snapshot();
            assert_eq!(snapshot.phase, Phase::HalfOpen);
            assert_eq!(snapshot.generation, generation);
            assert_eq!(
                snapshot.stale_results,
                stale_before + 1,
                "only `old` is stale"
            );
            match &acquired {
                Ok(p3) => {
                    assert!(p3.is_probe());
                    assert_eq!(p3.generation(), generation);
                    assert_eq!(snapshot.probes_in_flight, 2, "p2 and p3");
                }
                Err(open) => {
                    assert_eq!(open.phase(), Phase::HalfOpen);
                    assert_eq!(snapshot.probes_in_flight, 1, "p2 only");
                }
            }
            // Every slot is now taken by a permit of this generation: no more admissions.
            let extra = rig.breaker.try_acquire_owned();
            assert_eq!(extra.is_ok(), acquired.is_err());
            drop(extra);
            drop(acquired);
            drop(p2);
            assert_eq!(rig.breaker.snapshot().probes_in_flight, 0);
            assert!(
                rig.take_transitions().is_empty(),
                "releases change no phase"
            );
        },
    );
}

#[test]
fn a_full_half_open_admits_no_probe_while_a_stale_permit_is_released() {
    check(
        "a_full_half_open_admits_no_probe_while_a_stale_permit_is_released",
        || {
            let rig = Rig::new(|b| {
                b.consecutive_failures(1)
                    .max_probes(2)
                    .required_successes(2)
            });
            let old = half_open_with_an_old_probe(&rig);
            let p1 = rig.acquire();
            let p2 = rig.acquire();
            let stale = thread::spawn(move || old.failure());
            let breaker = rig.breaker.clone();
            let acquirer = thread::spawn(move || breaker.try_acquire_owned().map(|p| p.kind()));
            stale.join().unwrap();
            let acquired = acquirer.join().unwrap();
            assert_eq!(
                acquired.map_err(|open| open.phase()),
                Err(Phase::HalfOpen),
                "both slots are held by current probes"
            );
            let snapshot = rig.breaker.snapshot();
            assert_eq!(snapshot.phase, Phase::HalfOpen);
            assert_eq!(snapshot.probes_in_flight, 2);
            assert_eq!(snapshot.generation, p1.generation());
            drop((p1, p2));
        },
    );
}

#[test]
fn a_probe_success_that_closes_races_an_acquire_and_a_late_verdict() {
    check(
        "a_probe_success_that_closes_races_an_acquire_and_a_late_verdict",
        || {
            let rig = Rig::new(|b| {
                b.consecutive_failures(3)
                    .max_probes(2)
                    .required_successes(1)
            });
            // Three failures trip; after the cool-down p1 opens half-open.
            for _ in 0..3 {
                rig.acquire().failure();
            }
            rig.clock.advance(RECOVERY);
            let p1 = rig.acquire();
            assert!(p1.is_probe());
            let half_open = p1.generation();
            rig.take_transitions();

            let closer = thread::spawn(move || p1.success());
            let breaker = rig.breaker.clone();
            let racer = thread::spawn(move || {
                let permit = breaker.try_acquire_owned().unwrap();
                assert!(breaker.snapshot().probes_in_flight <= 2);
                let kind = permit.kind();
                let generation = permit.generation();
                permit.failure();
                (kind, generation)
            });
            closer.join().unwrap();
            let (kind, generation) = racer.join().unwrap();

            let snapshot = rig.breaker.snapshot();
            let transitions = rig.take_transitions();
            assert_eq!(
                transitions.len(),
                1,
                "exactly one phase change: {transitions:?}"
            );
            assert_eq!(snapshot.generation, half_open + 1);
            assert_eq!(snapshot.probes_in_flight, 0);
            match (kind, snapshot.phase) {
                // The racer came after the close: a closed-phase failure, below the threshold.
                (PermitKind::Normal, Phase::Closed) => {
                    assert_eq!(generation, half_open + 1);
                    assert_eq!(snapshot.consecutive_failures, 1);
                    assert_eq!(snapshot.stale_results, 0);
                    assert_eq!(transitions[0].reason, TransitionReason::ProbesSucceeded);
                }
                // The racer probed; whichever verdict landed first decided, the other is stale.
                (PermitKind::Probe, Phase::Closed) => {
                    assert_eq!(generation, half_open);
                    assert_eq!(snapshot.consecutive_failures, 0);
                    assert_eq!(snapshot.stale_results, 1);
                    assert_eq!(transitions[0].reason, TransitionReason::ProbesSucceeded);
                }
                (PermitKind::Probe, Phase::Open) => {
                    assert_eq!(generation, half_open);
                    assert_eq!(snapshot.stale_results, 1);
                    assert_eq!(transitions[0].reason, TransitionReason::ProbeFailed);
                }
                other => panic!("impossible outcome {other:?}"),
            }
        },
    );
}

#[test]
fn a_closing_probe_success_racing_the_half_open_deadline_ends_the_phase_once() {
    check(
        "a_closing_probe_success_racing_the_half_open_deadline_ends_the_phase_once",
        || {
            let rig = Rig::new(|b| {
                b.consecutive_failures(1)
                    .max_probes(1)
                    .required_successes(1)
            });
            rig.trip_and_wait();
            let p1 = rig.acquire();
            let half_open = p1.generation();
            rig.take_transitions();

            let closer = thread::spawn(move || p1.success());
            let breaker = rig.breaker.clone();
            let clock = rig.clock.clone();
            let late = thread::spawn(move || {
                clock.advance(HALF_OPEN_TIMEOUT);
                breaker
                    .try_acquire_owned()
                    .map(|p| (p.kind(), p.generation()))
            });
            closer.join().unwrap();
            let acquired = late.join().unwrap();

            let snapshot = rig.breaker.snapshot();
            let transitions = rig.take_transitions();
            assert_eq!(
                transitions.len(),
                1,
                "one way out of half-open: {transitions:?}"
            );
            assert_eq!(snapshot.generation, half_open + 1);
            match snapshot.phase {
                Phase::Closed => {
                    assert_eq!(transitions[0].reason, TransitionReason::ProbesSucceeded);
                    assert_eq!(acquired, Ok((PermitKind::Normal, half_open + 1)));
                    assert_eq!(snapshot.stale_results, 0);
                }
                Phase::Open => {
                    assert_eq!(transitions[0].reason, TransitionReason::HalfOpenTimedOut);
                    assert_eq!(acquired.map_err(|open| open.phase()), Err(Phase::Open));
                    assert_eq!(snapshot.stale_results, 1, "the late success is stale");
                    assert_eq!(snapshot.trips, 2);
                }
                other => panic!("impossible phase {other:?}"),
            }
        },
    );
}

#[test]
fn a_probe_result_from_an_ended_half_open_phase_never_ends_the_next_one() {
    check(
        "a_probe_result_from_an_ended_half_open_phase_never_ends_the_next_one",
        || {
            let rig = Rig::new(|b| {
                b.consecutive_failures(1)
                    .max_probes(2)
                    .required_successes(1)
            });
            rig.trip_and_wait();
            let p1 = rig.acquire();
            let p2 = rig.acquire();
            let first = p1.generation();
            rig.take_transitions();

            // One probe fails, the cool-down runs out and a new half-open phase admits a
            // probe, while the other probe's success is on its way.
            let breaker = rig.breaker.clone();
            let clock = rig.clock.clone();
            let reopener = thread::spawn(move || {
                p2.failure();
                clock.advance(RECOVERY);
                breaker
                    .try_acquire_owned()
                    .ok()
                    .map(|p| (p.kind(), p.generation(), p))
            });
            p1.success();
            let next = reopener.join().unwrap();

            let ended_by_success: Vec<_> = rig
                .take_transitions()
                .into_iter()
                .filter(|t| t.reason == TransitionReason::ProbesSucceeded)
                .collect();
            match next {
                // The success came too late: stale, and the new phase is untouched.
                Some((PermitKind::Probe, generation, _permit)) => {
                    assert_eq!(generation, first + 2);
                    assert_eq!(ended_by_success, []);
                    assert_eq!(rig.breaker.phase(), Phase::HalfOpen);
                }
                // The success closed the first phase; the failure was stale.
                Some((PermitKind::Normal, generation, _permit)) => {
                    assert_eq!(generation, first + 1);
                    assert_eq!(ended_by_success.len(), 1);
                    assert_eq!(ended_by_success[0].generation, first + 1);
                }
                other => panic!("impossible acquire {other:?}"),
            }
        },
    );
}

// ----- (c) closed-phase trips ------------------------------------------------------------

#[test]
fn a_trip_racing_a_success_changes_the_generation_exactly_once() {
    check(
        "a_trip_racing_a_success_changes_the_generation_exactly_once",
        || {
            let rig = Rig::new(|b| b.consecutive_failures(2));
            rig.acquire().failure(); // a run of one
            let failing = rig.acquire();
            let succeeding = rig.acquire();
            let closed = failing.generation();

            let a = thread::spawn(move || failing.failure());
            let b = thread::spawn(move || succeeding.success());
            a.join().unwrap();
            b.join().unwrap();

            let snapshot = rig.breaker.snapshot();
            let transitions = rig.take_transitions();
            match snapshot.phase {
                // The failure extended the run to two before the success ended it.
                Phase::Open => {
                    assert_eq!(snapshot.generation, closed + 1);
                    assert_eq!(snapshot.trips, 1);
                    assert_eq!(transitions.len(), 1);
                    assert_eq!(transitions[0].generation, closed + 1);
                    assert!(snapshot.stale_results <= 1);
                    assert!(rig.breaker.try_acquire_owned().is_err());
                }
                // The success ended the run first; the failure started a new one.
                Phase::Closed => {
                    assert_eq!(snapshot.generation, closed);
                    assert_eq!(snapshot.trips, 0);
                    assert!(transitions.is_empty());
                    assert_eq!(snapshot.consecutive_failures, 1);
                    assert_eq!(snapshot.stale_results, 0);
                }
                other => panic!("impossible phase {other:?}"),
            }
        },
    );
}

#[test]
fn two_failures_reaching_the_threshold_together_trip_once() {
    check(
        "two_failures_reaching_the_threshold_together_trip_once",
        || {
            let rig = Rig::new(|b| b.consecutive_failures(2));
            let first = rig.acquire();
            let second = rig.acquire();
            let closed = first.generation();
            let a = thread::spawn(move || first.failure());
            let b = thread::spawn(move || second.failure());
            a.join().unwrap();
            b.join().unwrap();

            let snapshot = rig.breaker.snapshot();
            assert_eq!(snapshot.phase, Phase::Open);
            assert_eq!(
                snapshot.generation,
                closed + 1,
                "one trip, one new generation"
            );
            assert_eq!(snapshot.trips, 1);
            assert_eq!(rig.take_transitions().len(), 1);
        },
    );
}

#[test]
fn two_failures_that_each_trip_open_the_breaker_once() {
    check("two_failures_that_each_trip_open_the_breaker_once", || {
        let rig = Rig::new(|b| b.consecutive_failures(1));
        let first = rig.acquire();
        let second = rig.acquire();
        let closed = first.generation();
        let a = thread::spawn(move || first.failure());
        let b = thread::spawn(move || second.failure());
        a.join().unwrap();
        b.join().unwrap();

        let snapshot = rig.breaker.snapshot();
        assert_eq!(snapshot.phase, Phase::Open);
        assert_eq!(
            snapshot.generation,
            closed + 1,
            "one trip, one new generation"
        );
        assert_eq!(snapshot.trips, 1);
        assert_eq!(rig.take_transitions().len(), 1);
    });
}

#[test]
fn a_trip_racing_an_acquire_hands_out_only_permits_that_are_current_or_stale() {
    check(
        "a_trip_racing_an_acquire_hands_out_only_permits_that_are_current_or_stale",
        || {
            let rig = Rig::new(|b| b.consecutive_failures(1));
            let failing = rig.acquire();
            let closed = failing.generation();
            let a = thread::spawn(move || failing.failure());
            let breaker = rig.breaker.clone();
            let b = thread::spawn(move || breaker.try_acquire_owned());
            a.join().unwrap();
            let acquired = b.join().unwrap();
            assert_eq!(rig.breaker.phase(), Phase::Open);
            match acquired {
                // Admitted before the trip: its verdict is stale and changes nothing.
                Ok(permit) => {
                    assert_eq!(permit.kind(), PermitKind::Normal);
                    assert_eq!(permit.generation(), closed);
                    permit.success();
                    let snapshot = rig.breaker.snapshot();
                    assert_eq!(snapshot.phase, Phase::Open);
                    assert_eq!(snapshot.generation, closed + 1);
                    assert_eq!(snapshot.stale_results, 1);
                }
                Err(open) => assert_eq!(open.phase(), Phase::Open),
            }
        },
    );
}

// ----- (e) windows: plain successes in per-thread lanes, events under the window's lock ----

/// Two permits taken now, recorded on two threads at once: a success and a failure.
fn race_a_success_and_a_failure(rig: &Rig) {
    let success = rig.acquire();
    let failure = rig.acquire();
    let a = thread::spawn(move || success.success());
    let b = thread::spawn(move || failure.failure());
    a.join().unwrap();
    b.join().unwrap();
}

#[test]
fn a_lane_success_racing_a_failure_is_counted_exactly_once() {
    check(
        "a_lane_success_racing_a_failure_is_counted_exactly_once",
        || {
            let rig = Rig::new(|b| b.failure_rate(0.9).count_window(4).min_calls(2));
            // Two successes reach the gate: later plain successes go to the lanes.
            rig.acquire().success();
            rig.acquire().success();
            race_a_success_and_a_failure(&rig);
            let window = rig.breaker.snapshot().window;
            assert_eq!((window.calls, window.failures), (4, 1));
            assert_eq!(rig.breaker.phase(), Phase::Closed);
        },
    );
}

#[test]
fn a_quiet_success_racing_the_failure_that_ends_the_quiet_is_counted_once() {
    check(
        "a_quiet_success_racing_the_failure_that_ends_the_quiet_is_counted_once",
        || {
            // The gate is the size: the second success fills the window and leaves it quiet
            // (full, no failure): plain successes then count nothing until a failure.
            let rig = Rig::new(|b| b.failure_rate(0.9).count_window(2).min_calls(2));
            rig.acquire().success();
            rig.acquire().success();
            race_a_success_and_a_failure(&rig);
            let window = rig.breaker.snapshot().window;
            assert_eq!((window.calls, window.failures), (2, 1));
            // Whichever came first, two successes after the failure slide it out: the quiet
            // ended with it, so they are counted (after one, the failure is still in the
            // window or not, depending on the order of the race).
            rig.acquire().success();
            rig.acquire().success();
            let window = rig.breaker.snapshot().window;
            assert_eq!(
                (window.calls, window.failures),
                (2, 0),
                "slid out after two"
            );
            assert_eq!(rig.breaker.phase(), Phase::Closed);
        },
    );
}

#[test]
fn a_lane_looking_for_quiet_racing_a_failure_never_loses_the_failure() {
    check(
        "a_lane_looking_for_quiet_racing_a_failure_never_loses_the_failure",
        || {
            // Past the gate after one success; under loom a lane looks for quiet at every
            // second success it counts (the window's size).
            let rig = Rig::new(|b| b.failure_rate(0.9).count_window(2).min_calls(1));
            rig.acquire().success();
            rig.acquire().success();
            let success = rig.acquire();
            let failure = rig.acquire();
            let b = thread::spawn(move || failure.failure());
            // This thread's lane counts its second success and looks.
            success.success();
            b.join().unwrap();
            let window = rig.breaker.snapshot().window;
            assert_eq!(
                (window.calls, window.failures),
                (2, 1),
                "the failure was lost"
            );
            rig.acquire().success();
            rig.acquire().success();
            let window = rig.breaker.snapshot().window;
            assert_eq!(
                (window.calls, window.failures),
                (2, 0),
                "slid out after two"
            );
        },
    );
}

#[test]
fn outcomes_racing_a_bucket_edge_are_all_counted() {
    check("outcomes_racing_a_bucket_edge_are_all_counted", || {
        // Buckets of 1 s; a window of 10 s holds both sides of the edge.
        let rig = Rig::new(|b| {
            // Two calls before judging: the failure alone never trips the breaker.
            b.failure_rate(0.9)
                .time_window(Duration::from_secs(10), 10)
                .min_calls(2)
        });
        rig.acquire().success();
        // Period 10 reuses the bucket of period 0: both writers find it stale and race to
        // start it afresh.
        rig.clock.advance(Duration::from_secs(10));
        race_a_success_and_a_failure(&rig);
        let window = rig.breaker.snapshot().window;
        assert_eq!(
            (window.calls, window.failures),
            (2, 1),
            "an outcome was lost at the bucket edge"
        );
    });
}

#[test]
fn a_lane_success_racing_a_reset_never_lands_in_the_new_phase() {
    check(
        "a_lane_success_racing_a_reset_never_lands_in_the_new_phase",
        || {
            let rig = Rig::new(|b| b.failure_rate(0.5).count_window(4).min_calls(1));
            rig.acquire().success();
            let late = rig.acquire();
            let breaker = rig.breaker.clone();
            let a = thread::spawn(move || late.success());
            let b = thread::spawn(move || breaker.reset());
            a.join().unwrap();
            b.join().unwrap();
            // Before the reset it belongs to the old phase; after it, it is stale.
            assert_eq!(rig.breaker.snapshot().window.calls, 0);
            rig.acquire().success();
            assert_eq!(rig.breaker.snapshot().window.calls, 1);
        },
    );
}

// ----- (e) the ramp (rule 23) ---------------------------------------------------------------

/// Trips a `consecutive_failures(1)`, `required_successes(1)` breaker and closes it with
/// one probe success: a ramp of `ramp` begins.
fn ramping(ramp: f64) -> Rig {
    let rig = Rig::new(|b| {
        b.consecutive_failures(1)
            .required_successes(1)
            .ramp(ramp, Duration::from_secs(10))
    });
    rig.trip_and_wait();
    rig.acquire().success();
    assert_eq!(rig.breaker.phase(), Phase::Closed);
    rig.take_transitions();
    rig
}

#[test]
fn racers_during_a_ramp_take_distinct_numbers_and_admit_the_stated_share() {
    check(
        "racers_during_a_ramp_take_distinct_numbers_and_admit_the_stated_share",
        || {
            // At 50%: of the acquires numbered 0, 1 and 2, 0 and 2 pass, whoever gets them.
            let rig = ramping(0.5);
            let racers: Vec<_> = (0..3)
                .map(|_| {
                    let breaker = rig.breaker.clone();
                    thread::spawn(move || breaker.try_acquire_owned())
                })
                .collect();
            let results: Vec<Result<Permit, CircuitOpen>> =
                racers.into_iter().map(|h| h.join().unwrap()).collect();
            let admitted = results.iter().filter(|r| r.is_ok()).count();
            assert_eq!(admitted, 2, "exactly the share of three numbers");
            let rejected = results.iter().find_map(|r| r.as_ref().err()).unwrap();
            assert_eq!(rejected.reason(), breakerbox::RejectReason::Ramp);
            assert!(rig.take_transitions().is_empty());
        },
    );
}

#[test]
fn the_end_of_a_ramp_racing_an_acquire_ends_it_once_and_admits_both() {
    check(
        "the_end_of_a_ramp_racing_an_acquire_ends_it_once_and_admits_both",
        || {
            let rig = ramping(0.1);
            assert_eq!(rig.breaker.snapshot().trips, 1, "kept while ramping");
            rig.clock.advance(Duration::from_secs(10));
            let racers: Vec<_> = (0..2)
                .map(|_| {
                    let breaker = rig.breaker.clone();
                    thread::spawn(move || breaker.try_acquire_owned().is_ok())
                })
                .collect();
            for racer in racers {
                assert!(racer.join().unwrap(), "the ramp is over");
            }
            let snapshot = rig.breaker.snapshot();
            assert_eq!((snapshot.trips, snapshot.ramp), (0, None));
            assert!(rig.take_transitions().is_empty(), "no transition");
        },
    );
}
