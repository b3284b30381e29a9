//! The in-process circuit breaker.

mod builder;
mod count_window;
mod engine;
mod lanes;
pub(crate) mod layout;
mod padded;
mod ramp;
mod streak;
mod thread_slot;
mod time_window;
mod transitions;
mod word;

pub use builder::Builder;
pub(crate) use engine::Engine;

use std::future::Future;
use std::time::Duration;

use crate::judge::{DefaultJudge, Judge};
use crate::sync::{Arc, Ordering};
use crate::{
    CallError, CircuitOpen, Clock, Config, MonotonicClock, Nanos, OwnedPermit, Permit, Phase,
    Snapshot, Stamp, Verdict,
};
use engine::EngineWindow;
use layout::epoch_tag;

/// A circuit breaker shared by every thread that calls one dependency. Cloning is cheap and
/// clones share state.
///
/// The closed path is an atomic load to admit and, for a success, one or two more loads to
/// record: no lock, no allocation, no clock read unless a rule needs latency. Phase changes
/// follow the [pure model](crate::model) and take a short lock; half-open probe slots are
/// reserved by compare-and-swap, so no more than `max_probes` are ever in flight.
///
/// ```
/// use breakerbox::{CallError, CircuitBreaker, ManualClock, Phase};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let breaker = CircuitBreaker::builder()
///     .consecutive_failures(3)
///     .recovery_timeout(Duration::from_secs(10))
///     .clock(clock.clone())
///     .build()?;
///
/// for _ in 0..3 {
///     let _ = breaker.call(|| Err::<(), _>("connection refused"));
/// }
/// match breaker.call(|| Ok::<_, &str>("not attempted")) {
///     Err(CallError::Open(open)) => assert_eq!(open.retry_after(), Some(Duration::from_secs(10))),
///     other => panic!("expected a rejection, got {other:?}"),
/// }
///
/// clock.advance(Duration::from_secs(10));
/// let probe = breaker.try_acquire().expect("the first probe is admitted");
/// assert!(probe.is_probe());
/// assert_eq!(breaker.snapshot().phase, Phase::HalfOpen);
/// # Ok::<(), breakerbox::ConfigError>(())
/// ```
pub struct CircuitBreaker<C: Clock = MonotonicClock> {
    engine: Arc<Engine<C>>,
}

impl<C: Clock> Clone for CircuitBreaker<C> {
    fn clone(&self) -> Self {
        CircuitBreaker {
            engine: self.engine.clone(),
        }
    }
}

impl<C: Clock> std::fmt::Debug for CircuitBreaker<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let w = self.engine.load();
        f.debug_struct("CircuitBreaker")
            .field("name", &self.engine.name)
            .field("phase", &w.phase())
            .field("generation", &w.generation())
            .finish()
    }
}

impl CircuitBreaker<MonotonicClock> {
    /// A builder with the defaults (see [`Config::builder`]) and the monotonic clock.
    pub fn builder() -> Builder<MonotonicClock> {
        Builder::new()
    }

    /// A breaker from a ready config, with the monotonic clock.
    pub fn from_config(config: Config) -> Result<Self, crate::ConfigError> {
        Builder::new().config(config).build()
    }
}

impl<C: Clock> CircuitBreaker<C> {
    pub(crate) fn from_engine(engine: Engine<C>) -> Self {
        CircuitBreaker {
            engine: Arc::new(engine),
        }
    }

    /// How many handles share this breaker's state (clones and owned permits).
    #[cfg(not(loom))]
    pub(crate) fn handles(&self) -> usize {
        Arc::strong_count(&self.engine)
    }

    /// Asks to make one call. Closed admits; open rejects with [`CircuitOpen`] until the
    /// recovery timeout is over; half-open admits at most `max_probes` probes at once.
    #[inline(always)]
    pub fn try_acquire(&self) -> Result<Permit<'_, C>, CircuitOpen> {
        let (generation, kind) = self.engine.acquire()?;
        Ok(Permit::new(&self.engine, generation, kind, self.start()))
    }

    /// Like [`CircuitBreaker::try_acquire`], with a permit that owns a handle to the
    /// breaker, to move into a future or another thread.
    #[inline(always)]
    pub fn try_acquire_owned(&self) -> Result<OwnedPermit<C>, CircuitOpen> {
        let (generation, kind) = self.engine.acquire()?;
        Ok(OwnedPermit::new(
            self.engine.clone(),
            generation,
            kind,
            self.start(),
        ))
    }

    #[inline(always)]
    fn start(&self) -> Stamp {
        if self.engine.timed {
            self.engine.clock.stamp()
        } else {
            Stamp::default()
        }
    }

    /// Runs `f` if admitted; `Ok` is a success and `Err` a failure.
    ///
    /// With a `call_timeout` (or a `probe_timeout`, for a half-open probe) configured, a
    /// synchronous call cannot be cancelled: `f` runs to the end, and a result that came
    /// later than the permit's deadline is recorded as a failure with reason `timeout`,
    /// whatever it was (rule 22); the result itself is still returned.
    ///
    /// ```
    /// use breakerbox::{CircuitBreaker, ManualClock, Phase};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let breaker = CircuitBreaker::builder()
    ///     .consecutive_failures(1)
    ///     .call_timeout(Duration::from_secs(1))
    ///     .clock(clock.clone())
    ///     .build()
    ///     .unwrap();
    /// let late = breaker.call(|| {
    ///     clock.advance(Duration::from_secs(2));
    ///     Ok::<_, ()>("too late")
    /// });
    /// assert_eq!(late.unwrap(), "too late");
    /// assert_eq!(breaker.phase(), Phase::Open);
    /// ```
    ///
    /// ```
    /// use breakerbox::CircuitBreaker;
    /// let breaker = CircuitBreaker::builder().build().unwrap();
    /// assert_eq!(breaker.call(|| Ok::<_, ()>(42)).unwrap(), 42);
    /// ```
    #[inline]
    pub fn call<T, E, F>(&self, f: F) -> Result<T, CallError<E>>
    where
        F: FnOnce() -> Result<T, E>,
    {
        self.call_with(&DefaultJudge, f)
    }

    /// Runs `f` if admitted and records what `judge` makes of its result and latency
    /// (measured through the breaker's clock).
    #[inline]
    pub fn call_with<T, E, F, J>(&self, judge: &J, f: F) -> Result<T, CallError<E>>
    where
        F: FnOnce() -> Result<T, E>,
        J: Judge<T, E> + ?Sized,
    {
        let (permit, timed) = self.begin(judge).map_err(CallError::Open)?;
        let result = f();
        self.end(permit, timed, judge, result)
    }

    /// Awaits `future` if admitted; `Ok` is a success and `Err` a failure. Dropping the
    /// returned future before it completes releases the permit (and a probe's slot).
    ///
    /// The core has no timer (no async runtime), so this does not cancel `future` at the
    /// permit's deadline: like [`CircuitBreaker::call`], it records a result that came
    /// later than `call_timeout` (`probe_timeout` for a probe) as a failure with reason
    /// `timeout` (rule 22). The tower layer, the reqwest middleware and the proxy cancel
    /// at the deadline (they drop the call's future and record a timeout failure). Beware
    /// that wrapping this future in a runtime's own timeout only releases the permit when
    /// it fires: a release is not a failure.
    pub async fn call_async<T, E, F>(&self, future: F) -> Result<T, CallError<E>>
    where
        F: Future<Output = Result<T, E>>,
    {
        self.call_async_with(&DefaultJudge, future).await
    }

    /// Awaits `future` if admitted and records what `judge` makes of it.
    pub async fn call_async_with<T, E, F, J>(&self, judge: &J, future: F) -> Result<T, CallError<E>>
    where
        F: Future<Output = Result<T, E>>,
        J: Judge<T, E> + ?Sized,
    {
        let (permit, timed) = self.begin(judge).map_err(CallError::Open)?;
        let result = future.await;
        self.end(permit, timed, judge, result)
    }

    /// Whether an acquire now would be rejected, without taking a permit, making a
    /// transition or emitting an event: `Ok` exactly when [`CircuitBreaker::try_acquire`]
    /// would admit, else the rejection it would give. `Err` while open (or forced open)
    /// with time left; half-open with every probe slot taken before its deadline; and
    /// half-open past its deadline, which the next acquire re-opens: then the phase is
    /// `Open` and `retry_after` the open duration that re-open would start (with jitter,
    /// its shortest). Costs a few atomic loads and at most one coarse clock reading (and a
    /// short lock past a half-open deadline); allocates nothing. Useful for a readiness
    /// check such as tower's `poll_ready`.
    ///
    /// ```
    /// use breakerbox::{CircuitBreaker, Phase};
    /// let breaker = CircuitBreaker::builder().build().unwrap();
    /// assert!(breaker.check().is_ok());
    /// breaker.force_open();
    /// assert_eq!(breaker.check().unwrap_err().phase(), Phase::ForcedOpen);
    /// ```
    #[inline]
    pub fn check(&self) -> Result<(), CircuitOpen> {
        self.engine.check()
    }

    /// Admits a protected call and starts its clock when the judge or a slow-call rule
    /// needs the latency.
    #[inline]
    fn begin<T, E, J>(&self, judge: &J) -> Result<(Permit<'_, C>, bool), CircuitOpen>
    where
        J: Judge<T, E> + ?Sized,
    {
        let (generation, kind) = self.engine.acquire()?;
        let timed = judge.uses_latency() || self.engine.timed;
        let started = if timed {
            self.engine.clock.stamp()
        } else {
            Stamp::default()
        };
        Ok((Permit::new(&self.engine, generation, kind, started), timed))
    }

    /// Judges a protected call's result and records the verdict.
    ///
    /// Each verdict gets its own call of the (inlined) record path, so that in each arm the
    /// verdict is a constant and the record path folds as it does for
    /// [`Permit::success`]: the common success of `call` costs what `try_acquire` and
    /// `success` cost. The `timed` flag `begin` took picks the untimed record path, so
    /// the engine's own flag is not read (and tested) a second time.
    #[inline(always)]
    fn end<T, E, J>(
        &self,
        mut permit: Permit<'_, C>,
        timed: bool,
        judge: &J,
        result: Result<T, E>,
    ) -> Result<T, CallError<E>>
    where
        J: Judge<T, E> + ?Sized,
    {
        let latency = if timed {
            self.engine.clock.elapsed_since(permit.started())
        } else {
            Nanos::ZERO
        };
        match judge.judge(&result, latency.as_duration()) {
            Verdict::Success => permit.finish_measured(Verdict::Success, latency, timed),
            Verdict::Failure => permit.finish_measured(Verdict::Failure, latency, timed),
            Verdict::Ignore => permit.finish_measured(Verdict::Ignore, latency, timed),
        }
        result.map_err(CallError::Inner)
    }

    /// The stored phase (changes nothing; see [`Snapshot`]).
    pub fn phase(&self) -> Phase {
        self.engine.load().phase()
    }

    /// The breaker's name.
    pub fn name(&self) -> &str {
        &self.engine.name
    }

    /// The breaker's config.
    pub fn config(&self) -> &Config {
        &self.engine.config
    }

    /// The breaker's clock.
    pub fn clock(&self) -> &C {
        &self.engine.clock
    }

    /// A view of the breaker now. Changes nothing.
    pub fn snapshot(&self) -> Snapshot {
        let engine = &*self.engine;
        let now = engine.clock.now();
        let w = engine.load();
        let tag = epoch_tag(w.generation());
        let closed = w.phase() == Phase::Closed;
        let window = match (&engine.window, closed) {
            (EngineWindow::Count(window), true) => window.counts(w.generation()),
            (EngineWindow::Time(window), true) => window.counts(w.generation(), now),
            _ => Default::default(),
        };
        let (failure_rate, slow_call_rate) = Snapshot::rates(window);
        let until = engine.until.load(Ordering::Acquire);
        let retry_after = match w.phase() {
            Phase::Open => Some(Nanos(until).saturating_sub(now)),
            Phase::HalfOpen => {
                Some(Nanos(engine.deadline.load(Ordering::Acquire)).saturating_sub(now))
            }
            Phase::ForcedOpen if until != u64::MAX => Some(Nanos(until).saturating_sub(now)),
            _ => None,
        };
        let override_left = match w.phase() {
            Phase::ForcedOpen | Phase::Disabled if until != u64::MAX => {
                Some(Nanos(until).saturating_sub(now).as_duration())
            }
            _ => None,
        };
        Snapshot {
            name: engine.name.to_string(),
            phase: w.phase(),
            generation: w.generation(),
            window,
            failure_rate,
            slow_call_rate,
            consecutive_failures: if closed { engine.streak.get(tag) } else { 0 },
            probes_in_flight: w.in_flight(),
            probe_successes: w.probe_successes(),
            trips: engine.trips(),
            retry_after: retry_after.map(Nanos::as_duration),
            override_left,
            stale_results: engine.stale.load(Ordering::Relaxed),
            shadow: engine.shadow.load(Ordering::Relaxed),
            shadow_rejections: engine.shadow_rejections.load(Ordering::Relaxed),
            local_open: None,
            ramp: engine.ramp_now(w, now),
        }
    }

    /// Opens the breaker until [`CircuitBreaker::reset`].
    pub fn force_open(&self) {
        self.engine.manual(Phase::ForcedOpen, None);
    }

    /// Opens the breaker for `duration`; then it probes, as after an open phase.
    pub fn force_open_for(&self, duration: Duration) {
        let until = self.engine.clock.now().saturating_add(duration.into());
        self.engine.manual(Phase::ForcedOpen, Some(until));
    }

    /// Admits every call and records nothing, until [`CircuitBreaker::reset`].
    pub fn disable(&self) {
        self.engine.manual(Phase::Disabled, None);
    }

    /// Disables the breaker for `duration`; then it closes afresh.
    pub fn disable_for(&self, duration: Duration) {
        let until = self.engine.clock.now().saturating_add(duration.into());
        self.engine.manual(Phase::Disabled, Some(until));
    }

    /// Back to a fresh closed phase: new generation, empty window, no trips, no override.
    /// Shadow mode and its count are kept.
    pub fn reset(&self) {
        self.engine.reset();
    }

    /// Switches shadow mode on or off (rule 20). In shadow mode every rule and transition
    /// runs as usual, but an acquire that would be rejected admits a passthrough permit
    /// (its outcome records nothing), counts a would-be rejection
    /// ([`Snapshot::shadow_rejections`]) and emits
    /// [`EventKind::ShadowRejected`](crate::EventKind::ShadowRejected). Changes no phase
    /// and no generation.
    ///
    /// ```
    /// use breakerbox::CircuitBreaker;
    /// let breaker = CircuitBreaker::builder().build().unwrap();
    /// breaker.set_shadow(true);
    /// breaker.force_open();
    /// assert!(breaker.try_acquire().is_ok());
    /// assert_eq!(breaker.snapshot().shadow_rejections, 1);
    /// breaker.set_shadow(false);
    /// assert!(breaker.try_acquire().is_err());
    /// ```
    pub fn set_shadow(&self, on: bool) {
        self.engine.set_shadow(on);
    }

    /// Whether the breaker is in shadow mode (rule 20).
    pub fn is_shadow(&self) -> bool {
        self.engine.shadow.load(Ordering::Relaxed)
    }
}
