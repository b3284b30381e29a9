//! The one contract every engine implements, and every integration is written against.
//!
//! An engine is a [`Breaker`]: the in-memory [`CircuitBreaker`](crate::CircuitBreaker) of
//! this crate, the Redis-backed `RedisBreaker` of `breakerbox-redis`, or your own. Its
//! permits are [`BreakerPermit`]s. The tower layer, the reqwest middleware, the keyed
//! [`Registry`](crate::Registry) and the CLI take any `Breaker`, so moving a dependency
//! from a per-process breaker to one shared by a whole fleet changes one line.
//!
//! - **Admission** comes in two steps. [`Breaker::try_acquire_local`] answers at once
//!   wherever the engine can decide without a round trip (the in-memory engine always
//!   can; the Redis engine can in closed and open, from its local view). When it answers
//!   [`LocalAdmission::Remote`], [`Breaker::acquire`] asks the engine's store (a half-open
//!   probe reservation, strict mode). `acquire` alone is always correct; the two steps
//!   only spare a hot path the cost of a future.
//! - **Recording**: a permit records its verdict, latency and the dependency's retry hint
//!   (an HTTP `Retry-After`). The record is committed when the method is called; the
//!   returned future ([`BreakerPermit::Recorded`]) only waits until it took effect, so it
//!   may be dropped where nothing can be awaited. A permit dropped unrecorded is released
//!   (a half-open probe slot is freed).
//! - **State**: [`Breaker::phase`] and [`Breaker::check`] answer from what this process
//!   knows, without I/O; [`Breaker::snapshot`] and the manual operations may ask the
//!   store, hence futures and an engine-specific [`Breaker::Error`].
//! - **Events** go to the core's [`Listener`](crate::Listener) with the core's
//!   [`EventKind`](crate::EventKind), whatever the engine.
//!
//! ```
//! use breakerbox::contract::{Breaker, BreakerPermit};
//! use breakerbox::{CircuitBreaker, CircuitOpen, Verdict};
//!
//! /// Works the same with an in-memory breaker or a Redis one.
//! async fn fetch<B: Breaker>(breaker: &B) -> Result<&'static str, CircuitOpen> {
//!     let permit = breaker.acquire_now_or_later().await?;
//!     permit.record(Verdict::Success).await;
//!     Ok("fetched")
//! }
//!
//! let breaker = CircuitBreaker::builder().build().unwrap();
//! let answer = futures_executor_block_on(fetch(&breaker));
//! assert_eq!(answer, Ok("fetched"));
//! # fn futures_executor_block_on<F: std::future::Future>(f: F) -> F::Output {
//! #     let waker = std::task::Waker::noop();
//! #     let mut cx = std::task::Context::from_waker(&waker);
//! #     let mut f = std::pin::pin!(f);
//! #     loop {
//! #         if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; }
//! #     }
//! # }
//! ```

mod dynamic;
mod in_memory;

pub use dynamic::{DynBreaker, DynClock, DynError, DynPermit, DynRecorded};

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::model::PermitKind;
use crate::{CircuitOpen, Clock, Config, Phase, Snapshot, Verdict};

/// What an engine answers without a round trip to its store.
#[derive(Debug)]
pub enum LocalAdmission<P> {
    /// Admitted: make the call and record its outcome through the permit.
    Admitted(P),
    /// Rejected without being attempted.
    Rejected(CircuitOpen),
    /// Only the engine's store can answer (a half-open probe reservation, a strict mode,
    /// a state this process does not know yet): call [`Breaker::acquire`].
    Remote,
}

/// A circuit breaker engine. Cloning is cheap and clones share state.
///
/// Implemented by [`CircuitBreaker`](crate::CircuitBreaker) (always local) and by
/// `breakerbox_redis::RedisBreaker` (local in closed and open, a Redis round trip for
/// half-open probes and in strict mode). See the [module docs](self) for the contract.
pub trait Breaker: Clone + Debug + Send + Sync + 'static {
    /// The engine's clock (latency, timeouts).
    type Clock: Clock + Clone;
    /// The right to make one call, borrowed from the breaker: for a call made within the
    /// borrow, the fastest path (the in-memory engine touches no reference count). Engines
    /// whose permits own a handle anyway use their owned permit.
    type Permit<'a>: BreakerPermit
    where
        Self: 'a;
    /// The right to make one call, owning a handle on the breaker: what futures and tasks
    /// hold (the tower layer, the reqwest middleware).
    type OwnedPermit: BreakerPermit + 'static;
    /// The future of [`Breaker::acquire`].
    type Acquire: Future<Output = Result<Self::OwnedPermit, CircuitOpen>> + Send + 'static;
    /// Why a snapshot or a manual operation did not reach the engine's state
    /// ([`std::convert::Infallible`] for the in-memory engine).
    type Error: std::error::Error + Send + Sync + 'static;

    /// The breaker's name (a dependency, a host).
    fn name(&self) -> &str;

    /// The breaker's config.
    fn config(&self) -> &Config;

    /// The breaker's clock.
    fn clock(&self) -> &Self::Clock;

    /// The phase as this process knows it, without I/O.
    fn phase(&self) -> Phase;

    /// Whether an acquire now would be rejected as far as this process knows, without
    /// taking a permit, making a transition, emitting an event or doing I/O: `Err` while
    /// open with time left, or half-open with every probe slot taken. For readiness checks
    /// (tower's `poll_ready`).
    fn check(&self) -> Result<(), CircuitOpen>;

    /// Asks to make one call, answering at once where the engine can decide locally, with
    /// a permit borrowed from the breaker.
    fn try_acquire_local(&self) -> LocalAdmission<Self::Permit<'_>>;

    /// Like [`Breaker::try_acquire_local`], with a permit that owns a handle on the
    /// breaker, to move into a future or another thread.
    fn try_acquire_local_owned(&self) -> LocalAdmission<Self::OwnedPermit>;

    /// Asks to make one call, with a round trip to the engine's store when one is needed
    /// (bounded by the engine's own timeout). Always correct on its own.
    fn acquire(&self) -> Self::Acquire;

    /// Admits or rejects at once when the engine can, or awaits [`Breaker::acquire`]:
    /// what integrations use.
    fn acquire_now_or_later(&self) -> AcquireNowOrLater<Self> {
        match self.try_acquire_local_owned() {
            LocalAdmission::Admitted(permit) => AcquireNowOrLater::Ready(Some(Ok(permit))),
            LocalAdmission::Rejected(open) => AcquireNowOrLater::Ready(Some(Err(open))),
            LocalAdmission::Remote => AcquireNowOrLater::Remote(Box::pin(self.acquire())),
        }
    }

    /// The breaker's state now (from the store for a shared engine). Changes nothing.
    fn snapshot(&self) -> impl Future<Output = Result<Snapshot, Self::Error>> + Send + 'static;

    /// Opens the breaker until [`Breaker::reset`].
    fn force_open(&self) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static;

    /// Opens the breaker for `duration`; then it probes, as after an open phase.
    fn force_open_for(
        &self,
        duration: Duration,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static;

    /// Admits every call and records nothing, until [`Breaker::reset`].
    fn disable(&self) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static;

    /// Disables the breaker for `duration`; then it closes afresh.
    fn disable_for(
        &self,
        duration: Duration,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static;

    /// Back to a fresh closed phase: new generation, empty window, no trips, no override.
    fn reset(&self) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static;

    /// Switches shadow mode on or off (rule 20 of `docs/RULES.md`): every rule and
    /// transition runs as usual, but an acquire that would be rejected admits a
    /// passthrough permit (recording nothing) and counts a would-be rejection
    /// ([`Snapshot::shadow_rejections`]), reported as
    /// [`EventKind::ShadowRejected`](crate::EventKind::ShadowRejected). A shared engine
    /// switches the whole fleet. Changes no phase and no generation.
    fn set_shadow(
        &self,
        on: bool,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static;

    /// Sends what the engine still holds for its store (a Redis breaker's batched
    /// outcomes) now: before a graceful shutdown, or to read a shared state that
    /// includes them. Nothing to do for an engine that records in place.
    fn flush(&self) -> impl Future<Output = ()> + Send + 'static {
        std::future::ready(())
    }

    /// Whether a registry may forget this breaker: closed, nothing waiting to be sent,
    /// and no other handle or permit held.
    fn is_idle(&self) -> bool;
}

/// The right to make one call, from any [`Breaker`]. Dropping it unrecorded releases it
/// (a half-open probe slot is freed). Its generation ties it to the phase it was issued
/// in: a verdict recorded after the breaker moved on changes nothing.
pub trait BreakerPermit: Debug + Send {
    /// Waits until a recorded outcome took effect. The record is committed when the
    /// recording method is called: dropping this future does not lose it.
    type Recorded: Future<Output = ()> + Send + 'static;

    /// The generation the permit was issued in.
    fn generation(&self) -> u64;

    /// What the permit is for (a normal call, a half-open probe, a call while disabled).
    fn kind(&self) -> PermitKind;

    /// Whether this call is a half-open probe.
    fn is_probe(&self) -> bool {
        self.kind() == PermitKind::Probe
    }

    /// Rule 22 of `docs/RULES.md`: how long this call may take, from its acquire, before
    /// it is a failure with reason `timeout`: [`Config::deadline`] of the permit's kind
    /// under its breaker's config (`probe_timeout`, or else `call_timeout`, for a probe;
    /// `call_timeout` for a normal call; none for a passthrough). An outcome recorded
    /// with a longer latency is a failure whatever its verdict, in every engine; the
    /// async integrations (the tower layer, the reqwest middleware, the proxy) drop the
    /// call's future at this deadline and record it as a timeout failure.
    fn deadline(&self) -> Option<Duration>;

    /// Records `verdict`, the latency measured since the acquire through the breaker's
    /// clock.
    fn record(self, verdict: Verdict) -> Self::Recorded;

    /// Records `verdict` for a call that took `latency`, where the dependency asked to be
    /// left alone for `retry_hint` (an HTTP `Retry-After` on a 429 or 503): if this
    /// outcome opens the breaker, it stays open at least that long, capped at the
    /// config's `max_open_duration`.
    fn record_with_retry_hint(
        self,
        verdict: Verdict,
        latency: Duration,
        retry_hint: Option<Duration>,
    ) -> Self::Recorded;

    /// Records `verdict` where the permit lies, for a permit kept inside a future: as
    /// [`BreakerPermit::record_with_retry_hint`] with `latency`, or, when `latency` is
    /// `None`, as [`BreakerPermit::record`] (measured since the acquire when the breaker
    /// measures latency) with `retry_hint`. The permit is spent afterwards: recording it
    /// again records nothing, and dropping it releases nothing.
    ///
    /// A future that moves its permit out by value to record it reads the permit back
    /// moments after storing it, when it completes at once (an answer from a cache, an
    /// in-process service): the wide load of the move stalls until those stores are done
    /// (store forwarding fails), which cost the tower layer about 10 ns a call.
    ///
    /// ```
    /// use breakerbox::contract::{Breaker, BreakerPermit, LocalAdmission};
    /// use breakerbox::{CircuitBreaker, Phase, Verdict};
    ///
    /// let breaker = CircuitBreaker::builder().consecutive_failures(2).build().unwrap();
    /// let LocalAdmission::Admitted(mut permit) = breaker.try_acquire_local_owned() else {
    ///     panic!("a closed breaker admits");
    /// };
    /// drop(permit.record_in_place(Verdict::Failure, None, None));
    /// assert_eq!(breaker.snapshot().consecutive_failures, 1);
    /// // Spent: a second verdict records nothing (two failures would trip).
    /// drop(permit.record_in_place(Verdict::Failure, None, None));
    /// drop(permit);
    /// assert_eq!(breaker.snapshot().consecutive_failures, 1);
    /// assert_eq!(breaker.phase(), Phase::Closed);
    /// ```
    fn record_in_place(
        &mut self,
        verdict: Verdict,
        latency: Option<Duration>,
        retry_hint: Option<Duration>,
    ) -> Self::Recorded;

    /// Records `verdict` for a call that took `latency`.
    fn record_with_latency(self, verdict: Verdict, latency: Duration) -> Self::Recorded
    where
        Self: Sized,
    {
        self.record_with_retry_hint(verdict, latency, None)
    }

    /// Records a success.
    fn success(self) -> Self::Recorded
    where
        Self: Sized,
    {
        self.record(Verdict::Success)
    }

    /// Records a failure.
    fn failure(self) -> Self::Recorded
    where
        Self: Sized,
    {
        self.record(Verdict::Failure)
    }

    /// Records a call that says nothing about the dependency (frees a probe slot).
    fn ignore(self) -> Self::Recorded
    where
        Self: Sized,
    {
        self.record(Verdict::Ignore)
    }
}

/// The future of [`Breaker::acquire_now_or_later`]: ready at once for a local answer,
/// the engine's [`Breaker::acquire`] otherwise.
pub enum AcquireNowOrLater<B: Breaker> {
    /// Answered locally (taken by the first poll).
    Ready(Option<Result<B::OwnedPermit, CircuitOpen>>),
    /// Waiting on the engine's store.
    Remote(Pin<Box<B::Acquire>>),
}

impl<B: Breaker> AcquireNowOrLater<B> {
    /// The local answer, if there was one (then this future must not be polled).
    pub fn take_ready(&mut self) -> Option<Result<B::OwnedPermit, CircuitOpen>> {
        match self {
            AcquireNowOrLater::Ready(answer) => answer.take(),
            AcquireNowOrLater::Remote(_) => None,
        }
    }
}

// The answer is only ever moved out, never pinned, and the remote future is boxed.
impl<B: Breaker> Unpin for AcquireNowOrLater<B> {}

impl<B: Breaker> Future for AcquireNowOrLater<B> {
    type Output = Result<B::OwnedPermit, CircuitOpen>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            AcquireNowOrLater::Ready(answer) => match answer.take() {
                Some(answer) => Poll::Ready(answer),
                None => Poll::Ready(Err(CircuitOpen::new(Phase::Closed, Some(Duration::ZERO)))),
            },
            AcquireNowOrLater::Remote(future) => future.as_mut().poll(cx),
        }
    }
}

impl<B: Breaker> Debug for AcquireNowOrLater<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AcquireNowOrLater::Ready(answer) => f.debug_tuple("Ready").field(answer).finish(),
            AcquireNowOrLater::Remote(_) => f.write_str("Remote"),
        }
    }
}

/// A [`BreakerPermit::Recorded`] that is complete at once (engines that record in
/// place).
#[derive(Debug, Default)]
pub struct RecordedNow;

impl Future for RecordedNow {
    type Output = ();

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        Poll::Ready(())
    }
}
