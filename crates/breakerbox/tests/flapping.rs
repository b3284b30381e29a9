//! A breaker that flaps a million times keeps its memory flat (recloser leaked the replaced
//! state on every transition: +281 MB after 3 M calls).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use breakerbox::{CircuitBreaker, Event, EventKind, ManualClock, Phase};
use cap::Cap;

/// Counts the heap bytes live in this test binary. The workspace forbids `unsafe`, so the
/// counting `GlobalAlloc` wrapper around `System` comes from the `cap` crate.
#[global_allocator]
static HEAP: Cap<std::alloc::System> = Cap::new(std::alloc::System, usize::MAX);

const TRANSITIONS: u64 = 1_000_000;
const WARM_UP: u64 = 10_000;
const GROWTH_BOUND: isize = 64 * 1024;
const RECOVERY: Duration = Duration::from_millis(100);

fn live_bytes() -> isize {
    isize::try_from(HEAP.allocated()).expect("live bytes fit in isize")
}

#[derive(Default)]
struct Counts {
    transitions: AtomicU64,
    to_open: AtomicU64,
    to_half_open: AtomicU64,
    to_closed: AtomicU64,
}

#[test]
fn a_million_transitions_keep_live_heap_flat() {
    // The gauge works: a 1 MiB block shows. (One test per binary, so no other test's
    // allocations land between the two readings below.)
    let before = live_bytes();
    let block = vec![1u8; 1 << 20];
    assert!(live_bytes() - before >= 1 << 20);
    drop(block);

    let clock = ManualClock::new();
    let counts = Arc::new(Counts::default());
    let sink = counts.clone();
    let breaker = CircuitBreaker::builder()
        .name("flapping")
        .consecutive_failures(1)
        .required_successes(1)
        .max_probes(1)
        .recovery_timeout(RECOVERY)
        .clock(clock.clone())
        .listener(move |event: &Event<'_>| {
            if let EventKind::Transition(t) = event.kind {
                sink.transitions.fetch_add(1, Ordering::Relaxed);
                let to = match t.to {
                    Phase::Open => &sink.to_open,
                    Phase::HalfOpen => &sink.to_half_open,
                    Phase::Closed => &sink.to_closed,
                    other => panic!("unexpected transition to {other}"),
                };
                to.fetch_add(1, Ordering::Relaxed);
            }
        })
        .build()
        .unwrap();

    // One cycle is three transitions: closed -> open -> half-open -> closed.
    let cycle = || {
        let call = breaker.try_acquire().unwrap();
        assert!(!call.is_probe());
        call.failure();
        clock.advance(RECOVERY);
        let probe = breaker.try_acquire().unwrap();
        assert!(probe.is_probe());
        probe.success();
    };
    let transitions = || counts.transitions.load(Ordering::Relaxed);

    while transitions() < WARM_UP {
        cycle();
    }
    let baseline = live_bytes();
    let started_at = transitions();
    while transitions() < TRANSITIONS {
        cycle();
    }
    let after = live_bytes();

    let total = transitions();
    eprintln!(
        "{total} transitions; live heap {baseline} bytes after {started_at}, {after} bytes after {total}"
    );
    assert!(total >= TRANSITIONS, "only {total} transitions");
    assert!(total - started_at >= TRANSITIONS - WARM_UP - 3);
    let third = total / 3;
    assert_eq!(counts.to_open.load(Ordering::Relaxed), third);
    assert_eq!(counts.to_half_open.load(Ordering::Relaxed), third);
    assert_eq!(counts.to_closed.load(Ordering::Relaxed), third);
    let snapshot = breaker.snapshot();
    assert_eq!(snapshot.phase, Phase::Closed);
    assert_eq!(snapshot.generation, total);
    assert_eq!(snapshot.stale_results, 0);
    assert!(
        after - baseline < GROWTH_BOUND,
        "live heap grew by {} bytes over {} transitions (from {baseline} to {after})",
        after - baseline,
        total - started_at
    );
}
