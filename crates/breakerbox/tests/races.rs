//! The engine's race paths, replayed deterministically: one interleaving each, chosen by
//! hand, where another caller acts between the moment a call reads the breaker's state and
//! the moment it acts on what it read.
//!
//! The other caller runs inside the breaker's next reading of its clock ([`HookClock`]):
//! every hot path reads the clock after loading the state word and before acting on it, so
//! an action run there lands exactly where a thread preempted at that point would have
//! let another one in. The loom models (`tests/loom.rs`) explore every interleaving of a
//! few threads; these pin down the ones whose answer is easy to get subtly wrong (a stale
//! decision, a slot taken in the wrong phase, a retry time from an earlier phase), in
//! milliseconds and on every test run.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use breakerbox::model::{PermitKind, TransitionReason};
use breakerbox::{
    Builder, CircuitBreaker, Clock, Event, EventKind, ManualClock, Nanos, OwnedPermit, Phase,
};

const RECOVERY: Duration = Duration::from_secs(1);
const HALF_OPEN_TIMEOUT: Duration = Duration::from_secs(60);

type Action = Box<dyn FnOnce() + Send>;

/// Which reading of the clock runs the armed action.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Reading {
    /// [`Clock::now`].
    Precise,
    /// [`Clock::now_coarse`].
    Coarse,
}

/// A manual clock that runs an action, once, during its next reading of the armed kind.
/// The reading returns the time from before the action: the breaker read its clock, then
/// the other caller acted.
#[derive(Clone, Default)]
struct HookClock {
    time: ManualClock,
    armed: Arc<Mutex<Option<(Reading, Action)>>>,
}

impl HookClock {
    fn arm(&self, reading: Reading, action: impl FnOnce() + Send + 'static) {
        *self.armed.lock().expect("hook lock") = Some((reading, Box::new(action)));
    }

    fn fire(&self, reading: Reading) {
        let action = {
            let mut armed = self.armed.lock().expect("hook lock");
            match armed.take() {
                Some((armed_for, action)) if armed_for == reading => Some(action),
                other => {
                    *armed = other;
                    None
                }
            }
        };
        if let Some(action) = action {
            action();
        }
    }

    fn fired(&self) -> bool {
        self.armed.lock().expect("hook lock").is_none()
    }
}

impl Clock for HookClock {
    fn now(&self) -> Nanos {
        let now = self.time.now();
        self.fire(Reading::Precise);
        now
    }

    fn now_coarse(&self) -> Nanos {
        let now = self.time.now_coarse();
        self.fire(Reading::Coarse);
        now
    }
}

/// A breaker that opens on its first failure, on a [`HookClock`], with the transitions it
/// announced, and a place for the permits the other caller keeps.
struct Rig {
    breaker: CircuitBreaker<HookClock>,
    clock: HookClock,
    transitions: Arc<Mutex<Vec<(Phase, Phase, TransitionReason)>>>,
    kept: Arc<Mutex<Vec<OwnedPermit<HookClock>>>>,
}

impl Rig {
    fn new(max_probes: u32) -> Rig {
        Rig::with(|builder| builder.max_probes(max_probes))
    }

    fn with(configure: impl FnOnce(Builder<HookClock>) -> Builder<HookClock>) -> Rig {
        let clock = HookClock::default();
        let transitions = Arc::new(Mutex::new(Vec::new()));
        let log = transitions.clone();
        let builder = CircuitBreaker::builder()
            .clock(clock.clone())
            .consecutive_failures(1)
            .recovery_timeout(RECOVERY)
            .half_open_timeout(HALF_OPEN_TIMEOUT)
            .listener(move |event: &Event<'_>| {
                if let EventKind::Transition(t) = event.kind {
                    log.lock().expect("log lock").push((t.from, t.to, t.reason));
                }
            });
        Rig {
            breaker: configure(builder).build().expect("a valid config"),
            clock,
            transitions,
            kept: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Trips the breaker and lets its cool-down run out (it is still open until the next
    /// acquire).
    fn open_and_expire(&self) {
        self.breaker.try_acquire().expect("closed admits").failure();
        assert_eq!(self.breaker.phase(), Phase::Open);
        self.clock.time.advance(RECOVERY);
    }

    /// The breaker in half-open, with one probe held.
    fn half_open_with_a_probe(&self) -> OwnedPermit<HookClock> {
        self.open_and_expire();
        let probe = self.breaker.try_acquire_owned().expect("a probe");
        assert!(probe.is_probe());
        probe
    }

    /// Arms `action` (given a handle to the breaker and the place for kept permits) for
    /// the next reading of the clock of kind `reading`.
    fn between(
        &self,
        reading: Reading,
        action: impl FnOnce(&CircuitBreaker<HookClock>, &HookClock, &Mutex<Vec<OwnedPermit<HookClock>>>)
            + Send
            + 'static,
    ) {
        let breaker = self.breaker.clone();
        let clock = self.clock.clone();
        let kept = self.kept.clone();
        self.clock
            .arm(reading, move || action(&breaker, &clock, &kept));
    }

    fn take_transitions(&self) -> Vec<(Phase, Phase, TransitionReason)> {
        std::mem::take(&mut *self.transitions.lock().expect("log lock"))
    }
}

// ----- acquire in half-open --------------------------------------------------------------------

#[test]
fn an_acquire_whose_half_open_phase_is_reset_under_it_gets_a_permit_of_the_new_closed_phase() {
    let rig = Rig::new(2);
    let _probe = rig.half_open_with_a_probe();
    rig.between(Reading::Coarse, |breaker, _, _| breaker.reset());

    let permit = rig.breaker.try_acquire().expect("the closed phase admits");
    assert!(rig.clock.fired());
    let snapshot = rig.breaker.snapshot();
    assert_eq!(snapshot.phase, Phase::Closed);
    assert_eq!(
        (permit.kind(), permit.generation()),
        (PermitKind::Normal, snapshot.generation),
        "the acquire decided again in the phase it found, not in the one it had read"
    );
}

#[test]
fn an_acquire_whose_half_open_phase_is_replaced_by_a_new_one_takes_its_probe_in_the_new_one() {
    let rig = Rig::new(2);
    let probe = rig.half_open_with_a_probe();
    // The other caller: the probe fails (re-open), the cool-down runs out, and a new
    // half-open phase hands it a probe. The acquire read the old half-open phase.
    rig.between(Reading::Coarse, move |breaker, clock, kept| {
        probe.failure();
        clock.time.advance(RECOVERY);
        let other = breaker
            .try_acquire_owned()
            .expect("a probe of the new phase");
        kept.lock().expect("kept lock").push(other);
    });

    let permit = rig
        .breaker
        .try_acquire()
        .expect("the new phase has a free slot");
    assert!(rig.clock.fired());
    let snapshot = rig.breaker.snapshot();
    assert_eq!(snapshot.phase, Phase::HalfOpen);
    assert_eq!(
        (permit.kind(), permit.generation()),
        (PermitKind::Probe, snapshot.generation),
        "a probe slot of the new phase is held by a permit of that phase"
    );
    assert_eq!(snapshot.probes_in_flight, 2);
    drop(permit);
    assert_eq!(
        rig.breaker.snapshot().probes_in_flight,
        1,
        "dropping that probe gives its slot back"
    );
}

// ----- acquire when the open phase has run out -------------------------------------------------

#[test]
fn an_acquire_that_finds_the_breaker_forced_open_under_it_rejects_with_no_retry_time() {
    let rig = Rig::new(1);
    rig.open_and_expire();
    rig.between(Reading::Coarse, |breaker, _, _| breaker.force_open());

    let open = rig
        .breaker
        .try_acquire()
        .map(drop)
        .expect_err("forced open");
    assert!(rig.clock.fired());
    assert_eq!(
        (open.phase(), open.retry_after()),
        (Phase::ForcedOpen, None)
    );
    assert_eq!(rig.breaker.phase(), Phase::ForcedOpen);
}

#[test]
fn an_acquire_that_finds_the_breaker_forced_open_for_a_while_under_it_rejects_until_then() {
    let rig = Rig::new(1);
    rig.open_and_expire();
    rig.between(Reading::Coarse, |breaker, _, _| {
        breaker.force_open_for(Duration::from_secs(10))
    });

    let open = rig
        .breaker
        .try_acquire()
        .map(drop)
        .expect_err("forced open");
    assert!(rig.clock.fired());
    assert_eq!(
        (open.phase(), open.retry_after()),
        (Phase::ForcedOpen, Some(Duration::from_secs(10)))
    );
}

#[test]
fn an_acquire_that_finds_the_breaker_disabled_under_it_passes_through() {
    let rig = Rig::new(1);
    rig.open_and_expire();
    rig.between(Reading::Coarse, |breaker, _, _| breaker.disable());

    let permit = rig.breaker.try_acquire().expect("disabled admits");
    assert!(rig.clock.fired());
    assert_eq!(permit.kind(), PermitKind::Passthrough);
    drop(permit);
    assert_eq!(rig.breaker.phase(), Phase::Disabled);
    let reasons: Vec<_> = rig.take_transitions().into_iter().map(|t| t.2).collect();
    assert_eq!(
        reasons,
        [
            TransitionReason::Tripped(breakerbox::model::TripReason::ConsecutiveFailures),
            TransitionReason::Disabled
        ],
        "the override is not taken for an expired one"
    );
}

#[test]
fn an_acquire_that_finds_the_half_open_phase_begun_under_it_takes_the_next_probe() {
    let rig = Rig::new(2);
    rig.open_and_expire();
    rig.between(Reading::Coarse, |breaker, _, kept| {
        let first = breaker.try_acquire_owned().expect("the first probe");
        kept.lock().expect("kept lock").push(first);
    });

    let permit = rig.breaker.try_acquire().expect("a second slot is free");
    assert!(rig.clock.fired());
    let snapshot = rig.breaker.snapshot();
    assert_eq!(
        (permit.kind(), permit.generation(), snapshot.phase),
        (PermitKind::Probe, snapshot.generation, Phase::HalfOpen)
    );
    assert_eq!(snapshot.probes_in_flight, 2);
}

#[test]
fn an_acquire_that_finds_the_half_open_phase_begun_and_full_under_it_rejects_until_its_deadline() {
    let rig = Rig::new(1);
    rig.open_and_expire();
    rig.between(Reading::Coarse, |breaker, _, kept| {
        let first = breaker.try_acquire_owned().expect("the only probe");
        kept.lock().expect("kept lock").push(first);
    });

    let open = rig
        .breaker
        .try_acquire()
        .map(drop)
        .expect_err("no free slot");
    assert!(rig.clock.fired());
    assert_eq!(
        (open.phase(), open.retry_after()),
        (Phase::HalfOpen, Some(HALF_OPEN_TIMEOUT))
    );
    assert_eq!(rig.breaker.snapshot().probes_in_flight, 1);
}

// ----- acquire when an override has run out ----------------------------------------------------

#[test]
fn an_acquire_that_ends_an_override_is_admitted_in_the_closed_phase_whatever_a_listener_does() {
    // A listener that forces the breaker open on hearing that the override expired: it
    // runs after the acquire that ended the override decided, before that acquire returns.
    let handle: Arc<Mutex<Option<CircuitBreaker<HookClock>>>> = Arc::new(Mutex::new(None));
    let slot = handle.clone();
    let rig = Rig::with(|builder| {
        builder.listener(move |event: &Event<'_>| {
            if let EventKind::Transition(t) = event.kind {
                if t.reason == TransitionReason::OverrideExpired {
                    // Taken out, so the breaker does not keep itself alive.
                    let breaker = slot.lock().expect("slot lock").take();
                    if let Some(breaker) = breaker {
                        breaker.force_open();
                    }
                }
            }
        })
    });
    *handle.lock().expect("slot lock") = Some(rig.breaker.clone());
    rig.breaker.disable_for(Duration::from_secs(10));
    rig.clock.time.advance(Duration::from_secs(10));

    let permit = rig
        .breaker
        .try_acquire()
        .expect("the closed phase the override expired into admits");
    assert!(
        handle.lock().expect("slot lock").is_none(),
        "the listener ran"
    );
    let snapshot = rig.breaker.snapshot();
    assert_eq!(snapshot.phase, Phase::ForcedOpen);
    assert_eq!(
        (permit.kind(), permit.generation()),
        (PermitKind::Normal, snapshot.generation - 1),
        "the acquire was decided under the lock, in the closed phase it began, not again \
         after the news of it"
    );
    let reasons: Vec<_> = rig.take_transitions().into_iter().map(|t| t.2).collect();
    assert_eq!(
        reasons,
        [
            TransitionReason::Disabled,
            TransitionReason::OverrideExpired,
            TransitionReason::ForcedOpen
        ]
    );
    permit.success();
    assert_eq!(
        rig.breaker.snapshot().stale_results,
        1,
        "its phase had ended"
    );
}

// ----- outcomes --------------------------------------------------------------------------------

#[test]
fn a_trip_decided_in_a_closed_phase_that_a_reset_ended_leaves_the_new_phase_closed() {
    let rig = Rig::new(1);
    let permit = rig.breaker.try_acquire().expect("closed admits");
    // The failure decides to trip, then reads the clock for the open phase's start: the
    // reset lands there.
    rig.between(Reading::Precise, |breaker, _, _| breaker.reset());
    permit.failure();
    assert!(rig.clock.fired());

    assert_eq!(rig.breaker.phase(), Phase::Closed);
    let reasons: Vec<_> = rig.take_transitions().into_iter().map(|t| t.2).collect();
    assert_eq!(reasons, [TransitionReason::Reset]);
}

#[test]
fn dropping_a_shadow_passthrough_permit_in_half_open_frees_no_probe_slot() {
    let rig = Rig::with(|builder| builder.max_probes(1).shadow(true));
    let _probe = rig.half_open_with_a_probe();
    // Half-open and full: shadow mode admits what it would have rejected, as a passthrough
    // permit of the half-open generation.
    let passthrough = rig.breaker.try_acquire().expect("shadow mode admits");
    assert_eq!(
        (passthrough.kind(), passthrough.generation()),
        (PermitKind::Passthrough, rig.breaker.snapshot().generation)
    );
    drop(passthrough);
    assert_eq!(rig.breaker.snapshot().probes_in_flight, 1);
    let again = rig.breaker.try_acquire().expect("shadow mode admits");
    assert_eq!(
        again.kind(),
        PermitKind::Passthrough,
        "the only slot is still taken"
    );
    again.success();
    assert_eq!(rig.breaker.snapshot().probes_in_flight, 1);
    assert_eq!(rig.breaker.phase(), Phase::HalfOpen);
}

// ----- the ramp (rule 23) ----------------------------------------------------------------------

#[test]
fn an_acquire_that_finds_a_ramp_begun_under_it_takes_its_number_in_the_ramp() {
    let rig = Rig::with(|builder| {
        builder
            .required_successes(1)
            .ramp(0.5, Duration::from_secs(100))
    });
    rig.open_and_expire();
    // Inside this acquire's reading of the clock, another caller's probe closes the
    // breaker: a ramp begins, admitting half of its acquires (the 0th, not the 1st).
    rig.between(Reading::Coarse, |breaker, _, _| {
        breaker.try_acquire().expect("the probe").success();
    });
    let permit = rig
        .breaker
        .try_acquire()
        .expect("the ramp's 0th acquire passes");
    assert!(rig.clock.fired());
    assert_eq!(permit.kind(), PermitKind::Normal);
    assert_eq!(rig.breaker.phase(), Phase::Closed);
    // It took number 0, so the next acquire is the ramp's 1st: rejected.
    let next = rig.breaker.try_acquire().map(drop);
    assert_eq!(
        next.map_err(|open| open.phase()),
        Err(Phase::Closed),
        "the acquire decided in the ramp it found"
    );
}
