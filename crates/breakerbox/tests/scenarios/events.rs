//! Events: what is announced, in what order, and that listeners run outside the breaker's
//! lock (a listener may call back into the breaker).

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use breakerbox::model::{TransitionReason, TripReason};
use breakerbox::{CircuitBreaker, Event, EventKind, ManualClock, Phase};

use super::support::{one_failure_trips, Recorder};

#[test]
fn every_transition_is_announced_once_with_its_reason() {
    let recorder = Recorder::default();
    let (clock, builder) = one_failure_trips();
    let breaker = builder
        .name("payments")
        .required_successes(1)
        .listener(recorder.listener())
        .build()
        .unwrap();
    breaker.try_acquire().unwrap().failure();
    clock.advance(Duration::from_secs(10));
    breaker.try_acquire().unwrap().failure();
    clock.advance(Duration::from_secs(10));
    let _hung = breaker.try_acquire().unwrap();
    clock.advance(Duration::from_secs(30));
    let _ = breaker.try_acquire();
    clock.advance(Duration::from_secs(10));
    breaker.try_acquire().unwrap().success();
    breaker.force_open();
    breaker.disable();
    breaker.reset();
    let reasons: Vec<_> = recorder
        .take()
        .into_iter()
        .filter_map(|kind| match kind {
            EventKind::Transition(t) => Some((t.from, t.to, t.reason, t.generation)),
            _ => None,
        })
        .collect();
    use Phase::{Closed, HalfOpen, Open};
    use TransitionReason as R;
    assert_eq!(
        reasons,
        [
            (Closed, Open, R::Tripped(TripReason::ConsecutiveFailures), 1),
            (Open, HalfOpen, R::CooldownElapsed, 2),
            (HalfOpen, Open, R::ProbeFailed, 3),
            (Open, HalfOpen, R::CooldownElapsed, 4),
            (HalfOpen, Open, R::HalfOpenTimedOut, 5),
            (Open, HalfOpen, R::CooldownElapsed, 6),
            (HalfOpen, Closed, R::ProbesSucceeded, 7),
            (Closed, Phase::ForcedOpen, R::ForcedOpen, 8),
            (Phase::ForcedOpen, Phase::Disabled, R::Disabled, 9),
            (Phase::Disabled, Closed, R::Reset, 10),
        ]
    );
}

#[test]
fn stale_results_and_rejections_are_announced() {
    let recorder = Recorder::default();
    let (_clock, builder) = one_failure_trips();
    let breaker = builder.listener(recorder.listener()).build().unwrap();
    let old = breaker.try_acquire().unwrap();
    breaker.force_open();
    recorder.take();
    old.success();
    let _ = breaker.try_acquire();
    assert_eq!(
        recorder.take(),
        [
            EventKind::StaleResult { generation: 0 },
            EventKind::Rejected(breakerbox::CircuitOpen::new(Phase::ForcedOpen, None)),
        ]
    );
}

thread_local! {
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// Runs `scenario` on its own thread and fails if it does not finish in 10 s (a deadlock).
fn finishes_in_time(scenario: impl FnOnce() + Send + 'static) {
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        scenario();
        let _ = done.send(());
    });
    match finished.recv_timeout(Duration::from_secs(10)) {
        Ok(()) => {}
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("deadlock: a listener calling back into the breaker never returned")
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the scenario panicked"),
    }
}

#[test]
fn events_fire_outside_the_lock() {
    finishes_in_time(|| {
        let slot: Arc<OnceLock<CircuitBreaker<ManualClock>>> = Arc::new(OnceLock::new());
        let reentered = Arc::new(AtomicUsize::new(0));
        let (listener_slot, count) = (slot.clone(), reentered.clone());
        let (clock, builder) = one_failure_trips();
        let breaker = builder
            .required_successes(1)
            .listener(move |event: &Event<'_>| {
                if INSIDE.with(Cell::get) {
                    return; // the listener's own calls cause events too
                }
                let Some(breaker) = listener_slot.get() else {
                    return;
                };
                INSIDE.with(|inside| inside.set(true));
                let snap = breaker.snapshot();
                if let EventKind::Transition(t) = event.kind {
                    assert_eq!(snap.generation, t.generation, "announced after it happened");
                }
                // try_acquire may take the lock too (an open phase that is due).
                drop(breaker.try_acquire());
                let _ = breaker.phase();
                INSIDE.with(|inside| inside.set(false));
                count.fetch_add(1, Ordering::SeqCst);
            })
            .build()
            .unwrap();
        assert!(slot.set(breaker.clone()).is_ok());

        breaker.try_acquire().unwrap().failure(); // trip from a recorded outcome
        let _ = breaker.try_acquire(); // a rejection
        clock.advance(Duration::from_secs(10));
        let probe = breaker.try_acquire().unwrap(); // open -> half-open under the lock
        clock.advance(Duration::from_secs(30));
        probe.success(); // half-open deadline settled by an outcome, and a stale result
        clock.advance(Duration::from_secs(10));
        if let Ok(probe) = breaker.try_acquire() {
            probe.success(); // the last success closes
        }
        breaker.force_open();
        breaker.force_open_for(Duration::from_secs(1));
        breaker.disable_for(Duration::from_secs(1));
        clock.advance(Duration::from_secs(1));
        let _ = breaker.try_acquire(); // disable expiry
        breaker.reset();
        assert!(
            reentered.load(Ordering::SeqCst) >= 8,
            "{}",
            reentered.load(Ordering::SeqCst)
        );
    });
}
