//! Permits: the right to make one call, released on drop.

use std::time::Duration;

use crate::breaker::Engine;
use crate::model::PermitKind;
use crate::sync::Arc;
use crate::{Clock, MonotonicClock, Nanos, Stamp, Verdict};

/// The right to make one call, borrowed from a breaker. Record the call's verdict with one
/// of the consuming methods; dropping the permit unrecorded (a panic, a cancelled future)
/// releases it, which frees a probe slot in half-open.
///
/// A permit carries the generation it was issued in: if the breaker has changed phase
/// since, its verdict changes nothing.
///
/// ```
/// use breakerbox::{CircuitBreaker, Phase};
/// let breaker = CircuitBreaker::builder().consecutive_failures(1).build().unwrap();
/// let permit = breaker.try_acquire().unwrap();
/// permit.failure();
/// assert_eq!(breaker.snapshot().phase, Phase::Open);
/// ```
#[must_use = "a permit records nothing unless a verdict is given"]
pub struct Permit<'a, C: Clock = MonotonicClock> {
    engine: &'a Engine<C>,
    generation: u64,
    kind: PermitKind,
    started: Stamp,
    done: bool,
}

/// A permit that owns a handle to its breaker, for futures and tasks that outlive the
/// borrow ([`crate::CircuitBreaker::try_acquire_owned`]).
#[must_use = "a permit records nothing unless a verdict is given"]
pub struct OwnedPermit<C: Clock = MonotonicClock> {
    engine: Arc<Engine<C>>,
    generation: u64,
    kind: PermitKind,
    started: Stamp,
    done: bool,
}

impl<'a, C: Clock> Permit<'a, C> {
    pub(crate) fn new(
        engine: &'a Engine<C>,
        generation: u64,
        kind: PermitKind,
        started: Stamp,
    ) -> Self {
        Permit {
            engine,
            generation,
            kind,
            started,
            done: false,
        }
    }
}

impl<C: Clock> Permit<'_, C> {
    /// When the call started, if the permit was timed at admission.
    #[inline]
    pub(crate) fn started(&self) -> Stamp {
        self.started
    }

    /// Records `verdict` for a call whose `latency` was measured when `timed` (the breaker
    /// or its judge needed it): an untimed call, or a breaker that measures no latency (no
    /// slow-call rule, no deadline), takes the untimed path, as `record_in_place` does.
    /// `timed` is tested first, so an untimed call does not read the engine's flag.
    #[inline(always)]
    pub(crate) fn finish_measured(&mut self, verdict: Verdict, latency: Nanos, timed: bool) {
        if !timed || !self.engine.timed {
            return self.finish_untimed(verdict);
        }
        self.finish(verdict, latency)
    }
}

impl<C: Clock> OwnedPermit<C> {
    pub(crate) fn new(
        engine: Arc<Engine<C>>,
        generation: u64,
        kind: PermitKind,
        started: Stamp,
    ) -> Self {
        OwnedPermit {
            engine,
            generation,
            kind,
            started,
            done: false,
        }
    }
}

macro_rules! permit_methods {
    ($ty:ty) => {
        impl<C: Clock> $ty {
            /// The generation the permit was issued in.
            pub fn generation(&self) -> u64 {
                self.generation
            }

            /// What the permit is for (a normal call, a half-open probe, or a call while
            /// disabled).
            pub fn kind(&self) -> PermitKind {
                self.kind
            }

            /// Whether this call is a half-open probe.
            pub fn is_probe(&self) -> bool {
                self.kind == PermitKind::Probe
            }

            /// Rule 22: how long this call may take before it is a failure with reason
            /// `timeout` ([`Config::deadline`](crate::Config::deadline) of its kind):
            /// an outcome recorded with a longer latency is a failure, whatever its
            /// verdict.
            pub fn deadline(&self) -> Option<Duration> {
                self.engine.config.deadline(self.kind)
            }

            /// Records a success.
            #[inline(always)]
            pub fn success(mut self) {
                self.record_in_place(Verdict::Success)
            }

            /// Records a failure.
            #[inline(always)]
            pub fn failure(mut self) {
                self.record_in_place(Verdict::Failure)
            }

            /// Records a call that says nothing about the dependency (frees a probe slot).
            #[inline]
            pub fn ignore(mut self) {
                self.record_in_place(Verdict::Ignore)
            }

            /// Records `verdict`; when the breaker has a slow-call rule the latency is
            /// measured from the acquire.
            #[inline(always)]
            pub fn record(mut self, verdict: Verdict) {
                self.record_in_place(verdict)
            }

            /// Records `verdict` for a call that took `latency`.
            pub fn record_with_latency(mut self, verdict: Verdict, latency: Duration) {
                self.finish(verdict, Nanos::from_duration(latency))
            }

            /// Records `verdict` for a call that took `latency`, where the dependency asked
            /// to be left alone for `retry_hint` (an HTTP `Retry-After` on a 429 or 503): if
            /// this outcome opens the breaker, it stays open at least that long, capped at
            /// the config's `max_open_duration`.
            ///
            /// ```
            /// use breakerbox::{CircuitBreaker, ManualClock, Verdict};
            /// use std::time::Duration;
            ///
            /// let breaker = CircuitBreaker::builder()
            ///     .consecutive_failures(1)
            ///     .recovery_timeout(Duration::from_secs(5))
            ///     .backoff(2.0, Duration::from_secs(300))
            ///     .clock(ManualClock::new())
            ///     .build()
            ///     .unwrap();
            /// let permit = breaker.try_acquire().unwrap();
            /// permit.record_with_retry_hint(Verdict::Failure, Duration::ZERO, Some(Duration::from_secs(120)));
            /// let open = breaker.try_acquire().unwrap_err();
            /// assert_eq!(open.retry_after(), Some(Duration::from_secs(120)));
            /// ```
            pub fn record_with_retry_hint(
                mut self,
                verdict: Verdict,
                latency: Duration,
                retry_hint: Option<Duration>,
            ) {
                self.finish_hinted(
                    verdict,
                    Nanos::from_duration(latency),
                    retry_hint.map(Nanos::from_duration),
                );
            }

            /// Records `verdict`, timing the call when the breaker has a slow-call rule.
            /// The permit is recorded where it lies, through `&mut self`: moving the
            /// 32-byte permit by value into each step cost a store-forwarding stall.
            /// Without latency to measure there is no deadline either (rule 22), so the
            /// common case tests one flag.
            #[inline(always)]
            fn record_in_place(&mut self, verdict: Verdict) {
                if !self.engine.timed {
                    return self.finish_untimed(verdict);
                }
                let latency = self.engine.clock.elapsed_since(self.started);
                self.finish(verdict, latency)
            }

            /// [`BreakerPermit::record_in_place`](crate::contract::BreakerPermit::record_in_place):
            /// records `verdict` unless the permit is spent, and spends it.
            #[inline(always)]
            pub(crate) fn record_spending(
                &mut self,
                verdict: Verdict,
                latency: Option<Duration>,
                retry_hint: Option<Duration>,
            ) {
                if self.done {
                    return;
                }
                match (latency, retry_hint) {
                    (None, None) => self.record_in_place(verdict),
                    (latency, retry_hint) => {
                        let latency = match latency {
                            Some(latency) => Nanos::from_duration(latency),
                            None if self.engine.timed => {
                                self.engine.clock.elapsed_since(self.started)
                            }
                            None => Nanos::ZERO,
                        };
                        self.finish_hinted(verdict, latency, retry_hint.map(Nanos::from_duration));
                    }
                }
            }

            /// Records `verdict` for a breaker that measures no latency (so has no
            /// deadline) and marks the permit done.
            #[inline(always)]
            pub(crate) fn finish_untimed(&mut self, verdict: Verdict) {
                self.done = true;
                self.engine
                    .record_untimed(self.generation, self.kind, verdict);
            }

            /// Records `verdict` with `latency` and marks the permit done, so that its
            /// drop releases nothing.
            #[inline(always)]
            pub(crate) fn finish(&mut self, verdict: Verdict, latency: Nanos) {
                self.finish_hinted(verdict, latency, None)
            }

            /// [`Self::finish`] with the dependency's retry hint.
            #[inline(always)]
            fn finish_hinted(
                &mut self,
                verdict: Verdict,
                latency: Nanos,
                retry_hint: Option<Nanos>,
            ) {
                self.done = true;
                self.engine
                    .record(self.generation, self.kind, verdict, latency, retry_hint);
            }
        }

        impl<C: Clock> Drop for $ty {
            #[inline(always)]
            fn drop(&mut self) {
                if !self.done {
                    release_unrecorded(&self.engine, self.generation, self.kind);
                }
            }
        }

        impl<C: Clock> std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($ty))
                    .field("breaker", &self.engine.name)
                    .field("generation", &self.generation)
                    .field("kind", &self.kind)
                    .finish()
            }
        }
    };
}

/// Releases a permit dropped without a verdict (a panic, a cancelled future): rare, so out
/// of line, to keep the drop of a recorded permit one test. It takes the permit's fields,
/// not the permit: a call given the permit's address would keep every permit in memory,
/// stored on the stack at each acquire, where it can otherwise live in registers.
#[cold]
#[inline(never)]
fn release_unrecorded<C: Clock>(engine: &Engine<C>, generation: u64, kind: PermitKind) {
    engine.release(generation, kind);
}

permit_methods!(Permit<'_, C>);
permit_methods!(OwnedPermit<C>);
