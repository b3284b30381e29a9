//! Criterion benches of the breaker's steady state: every breaker is built once, outside
//! the measured loop, and brought to the phase under test; the loop measures one protected
//! no-op call, either `try_acquire()` then `permit.success()` or `breaker.call(..)`.
//!
//! Run: `cargo bench -p breakerbox --bench breaker -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::time::Duration;

use breakerbox::{CircuitBreaker, Clock, Phase};
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion};

type Group<'a> = BenchmarkGroup<'a, criterion::measurement::WallTime>;

/// A recovery timeout no bench outlives, so an open breaker stays open.
const LONG: Duration = Duration::from_secs(3600);

/// Benches the two ways to make a protected no-op call on `breaker`.
fn protected_no_op<C: Clock>(group: &mut Group<'_>, name: &str, breaker: &CircuitBreaker<C>) {
    group.bench_function(format!("{name}/try_acquire+success"), |b| {
        b.iter(|| match breaker.try_acquire() {
            Ok(permit) => permit.success(),
            Err(open) => {
                black_box(open);
            }
        })
    });
    group.bench_function(format!("{name}/call"), |b| {
        b.iter(|| black_box(breaker.call(|| Ok::<u8, ()>(black_box(0)))).is_ok())
    });
}

fn expect_phase<C: Clock>(breaker: &CircuitBreaker<C>, phase: Phase, what: &str) {
    assert_eq!(breaker.phase(), phase, "{what}: the breaker left {phase:?}");
}

fn closed_success(c: &mut Criterion) {
    let mut group = c.benchmark_group("closed_success");

    let consecutive = CircuitBreaker::builder()
        .consecutive_failures(5)
        .build()
        .expect("valid config");
    protected_no_op(&mut group, "consecutive(5)", &consecutive);
    expect_phase(&consecutive, Phase::Closed, "consecutive");

    let count = CircuitBreaker::builder()
        .failure_rate(0.5)
        .count_window(100)
        .build()
        .expect("valid config");
    protected_no_op(&mut group, "count_window(100)@0.5", &count);
    expect_phase(&count, Phase::Closed, "count window");

    let time = CircuitBreaker::builder()
        .failure_rate(0.5)
        .time_window(Duration::from_secs(10), 10)
        .build()
        .expect("valid config");
    protected_no_op(&mut group, "time_window(10s,10)@0.5", &time);
    expect_phase(&time, Phase::Closed, "time window");

    // Rule 22: what a configured deadline costs (two clock readings per call); the rows
    // above have none and pay one branch.
    let deadline = CircuitBreaker::builder()
        .consecutive_failures(5)
        .call_timeout(Duration::from_secs(1))
        .build()
        .expect("valid config");
    protected_no_op(&mut group, "consecutive(5)+call_timeout(1s)", &deadline);
    expect_phase(&deadline, Phase::Closed, "call timeout");

    group.finish();
}

fn open_rejection(c: &mut Criterion) {
    let mut group = c.benchmark_group("open_rejection");

    // Tripped by a real failure: the rejection compares the coarse clock with `until`.
    let tripped = CircuitBreaker::builder()
        .consecutive_failures(1)
        .recovery_timeout(LONG)
        .build()
        .expect("valid config");
    let _ = tripped.call(|| Err::<(), _>("down"));
    expect_phase(&tripped, Phase::Open, "tripping by a failure");
    protected_no_op(&mut group, "tripped", &tripped);
    expect_phase(&tripped, Phase::Open, "tripped");

    // Forced open with no expiry: no clock read at all.
    let forced = CircuitBreaker::builder().build().expect("valid config");
    forced.force_open();
    protected_no_op(&mut group, "force_open", &forced);
    expect_phase(&forced, Phase::ForcedOpen, "force_open");

    group.finish();
}

fn half_open_rejection(c: &mut Criterion) {
    let mut group = c.benchmark_group("half_open_rejection");

    // One probe slot, taken by a permit held for the whole bench.
    let breaker = CircuitBreaker::builder()
        .consecutive_failures(1)
        .recovery_timeout(Duration::from_millis(1))
        .half_open_timeout(LONG)
        .max_probes(1)
        .build()
        .expect("valid config");
    let _ = breaker.call(|| Err::<(), _>("down"));
    expect_phase(&breaker, Phase::Open, "tripping by a failure");
    // The coarse clock may lag by a tick (a few ms): retry for a bounded while.
    let mut probe = None;
    for _ in 0..200 {
        std::thread::sleep(Duration::from_millis(5));
        if let Ok(permit) = breaker.try_acquire() {
            probe = Some(permit);
            break;
        }
    }
    let probe = probe.expect("the breaker admits a probe after its recovery timeout");
    assert!(probe.is_probe(), "the first call after open is a probe");
    protected_no_op(&mut group, "probe_slot_taken", &breaker);
    expect_phase(&breaker, Phase::HalfOpen, "half-open");
    probe.success();

    group.finish();
}

criterion_group!(benches, closed_success, open_rejection, half_open_rejection);
criterion_main!(benches);
