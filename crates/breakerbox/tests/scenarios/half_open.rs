//! Half-open: probe slots, successes to close, failures and deadlines to re-open, and
//! results that arrive too late.
//!
//! The engine-generic scenarios live in `shared/half_open.rs` (also run against Redis by
//! `breakerbox-redis`); here they run on the in-memory engine, next to the
//! scenarios that only make sense in-process (threads, owned permits, futures).

use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use breakerbox::{CallError, Phase};

use super::support::{one_failure_trips, poll_once, trip};

in_memory_scenarios! {
    half_open:
    half_open_admits_one_probe_when_max_probes_is_one,
    max_probes_caps_concurrent_probes_not_total_probes,
    two_probe_successes_are_required_to_close,
    probe_failure_reopens_and_resets_success_count,
    probe_failure_restarts_the_cooldown,
    open_timeout_leads_to_half_open,
    half_open_timeout_leads_back_to_open,
    a_probe_result_after_the_deadline_reopens_even_if_no_acquire_noticed,
    a_normal_permit_dropped_after_the_deadline_reopens,
    late_result_from_older_generation_changes_nothing,
    dropped_probe_permit_frees_its_slot,
    ignore_only_frees_the_probe_slot,
    slow_probe_success_reopens,
}

#[test]
fn dropped_owned_probe_permit_frees_its_slot_from_another_thread() {
    let (clock, builder) = one_failure_trips();
    let breaker = builder.build().unwrap();
    trip(&breaker);
    clock.advance(Duration::from_secs(10));
    let probe = breaker.try_acquire_owned().unwrap();
    std::thread::spawn(move || drop(probe)).join().unwrap();
    assert_eq!(breaker.snapshot().probes_in_flight, 0);
    assert!(breaker.try_acquire().is_ok());
}

#[test]
fn dropped_call_async_future_frees_its_probe_slot() {
    let (clock, builder) = one_failure_trips();
    let breaker = builder.build().unwrap();
    trip(&breaker);
    clock.advance(Duration::from_secs(10));
    {
        let mut call = pin!(breaker.call_async(std::future::pending::<Result<(), ()>>()));
        assert!(poll_once(call.as_mut()).is_pending());
        assert_eq!(
            breaker.snapshot().probes_in_flight,
            1,
            "the call holds the slot"
        );
        let mut second = pin!(breaker.call_async(async { Ok::<_, ()>(()) }));
        match poll_once(second.as_mut()) {
            Poll::Ready(Err(CallError::Open(open))) => assert_eq!(open.phase(), Phase::HalfOpen),
            other => panic!("expected a rejection, got {other:?}"),
        }
    } // the caller gives up: the pending call is dropped
    let snap = breaker.snapshot();
    assert_eq!((snap.phase, snap.probes_in_flight), (Phase::HalfOpen, 0));
    assert!(breaker.try_acquire().unwrap().is_probe());
}

#[test]
fn concurrent_callers_never_hold_more_than_max_probes() {
    use std::sync::atomic::{AtomicU32, Ordering};
    let (clock, builder) = one_failure_trips();
    // Successes would close it; these callers only ignore or drop, so it stays half-open.
    let breaker = builder.max_probes(3).build().unwrap();
    trip(&breaker);
    clock.advance(Duration::from_secs(10));
    let holding = AtomicU32::new(0);
    let peak = AtomicU32::new(0);
    let admitted = AtomicU32::new(0);
    std::thread::scope(|scope| {
        for _ in 0..8 {
            scope.spawn(|| {
                for i in 0..2_000 {
                    let Ok(probe) = breaker.try_acquire() else {
                        continue;
                    };
                    admitted.fetch_add(1, Ordering::Relaxed);
                    let now = holding.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    std::thread::yield_now();
                    holding.fetch_sub(1, Ordering::SeqCst);
                    if i % 2 == 0 {
                        probe.ignore();
                    } else {
                        drop(probe);
                    }
                }
            });
        }
    });
    assert!(
        peak.load(Ordering::SeqCst) <= 3,
        "peak {}",
        peak.load(Ordering::SeqCst)
    );
    assert!(admitted.load(Ordering::Relaxed) >= 3);
    let snap = breaker.snapshot();
    assert_eq!(
        (snap.phase, snap.probes_in_flight, snap.probe_successes),
        (Phase::HalfOpen, 0, 0)
    );
}
