//! [`DynBreaker`]: any engine behind one type, for programs that choose the engine at run
//! time (from a config file: in memory, or shared through Redis).

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use super::{Breaker, BreakerPermit, LocalAdmission};
use crate::model::PermitKind;
use crate::{CircuitOpen, Clock, Config, Nanos, Phase, Snapshot, Stamp, Verdict};

/// A boxed, sendable future.
type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// A manual operation, for the erased engine.
#[derive(Copy, Clone)]
enum Manual {
    ForceOpen(Option<Duration>),
    Disable(Option<Duration>),
    Reset,
    Shadow(bool),
}

/// What every engine offers, object-safe.
trait ErasedBreaker: Send + Sync + fmt::Debug + 'static {
    fn name(&self) -> &str;
    fn config(&self) -> &Config;
    fn now(&self) -> Nanos;
    fn now_coarse(&self) -> Nanos;
    fn stamp(&self) -> Stamp;
    fn elapsed_since(&self, since: Stamp) -> Nanos;
    fn phase(&self) -> Phase;
    fn check(&self) -> Result<(), CircuitOpen>;
    fn try_acquire_local(&self) -> LocalAdmission<DynPermit>;
    fn acquire(&self) -> BoxFuture<Result<DynPermit, CircuitOpen>>;
    fn snapshot(&self) -> BoxFuture<Result<Snapshot, DynError>>;
    fn manual(&self, op: Manual) -> BoxFuture<Result<(), DynError>>;
    fn flush(&self) -> BoxFuture<()>;
    fn is_idle(&self) -> bool;
}

impl<B: Breaker> ErasedBreaker for B {
    fn name(&self) -> &str {
        Breaker::name(self)
    }

    fn config(&self) -> &Config {
        Breaker::config(self)
    }

    fn now(&self) -> Nanos {
        Breaker::clock(self).now()
    }

    fn now_coarse(&self) -> Nanos {
        Breaker::clock(self).now_coarse()
    }

    fn stamp(&self) -> Stamp {
        Breaker::clock(self).stamp()
    }

    fn elapsed_since(&self, since: Stamp) -> Nanos {
        Breaker::clock(self).elapsed_since(since)
    }

    fn phase(&self) -> Phase {
        Breaker::phase(self)
    }

    fn check(&self) -> Result<(), CircuitOpen> {
        Breaker::check(self)
    }

    fn try_acquire_local(&self) -> LocalAdmission<DynPermit> {
        match Breaker::try_acquire_local_owned(self) {
            LocalAdmission::Admitted(permit) => LocalAdmission::Admitted(DynPermit::new(permit)),
            LocalAdmission::Rejected(open) => LocalAdmission::Rejected(open),
            LocalAdmission::Remote => LocalAdmission::Remote,
        }
    }

    fn acquire(&self) -> BoxFuture<Result<DynPermit, CircuitOpen>> {
        let acquire = Breaker::acquire(self);
        Box::pin(async move { acquire.await.map(DynPermit::new) })
    }

    fn snapshot(&self) -> BoxFuture<Result<Snapshot, DynError>> {
        let snapshot = Breaker::snapshot(self);
        Box::pin(async move { snapshot.await.map_err(DynError::new) })
    }

    fn manual(&self, op: Manual) -> BoxFuture<Result<(), DynError>> {
        fn boxed<E: Error + Send + Sync + 'static>(
            f: impl Future<Output = Result<(), E>> + Send + 'static,
        ) -> BoxFuture<Result<(), DynError>> {
            Box::pin(async move { f.await.map_err(DynError::new) })
        }
        match op {
            Manual::ForceOpen(None) => boxed(Breaker::force_open(self)),
            Manual::ForceOpen(Some(d)) => boxed(Breaker::force_open_for(self, d)),
            Manual::Disable(None) => boxed(Breaker::disable(self)),
            Manual::Disable(Some(d)) => boxed(Breaker::disable_for(self, d)),
            Manual::Reset => boxed(Breaker::reset(self)),
            Manual::Shadow(on) => boxed(Breaker::set_shadow(self, on)),
        }
    }

    fn flush(&self) -> BoxFuture<()> {
        Box::pin(Breaker::flush(self))
    }

    fn is_idle(&self) -> bool {
        Breaker::is_idle(self)
    }
}

/// Any [`Breaker`] behind one type: the engine is chosen at run time, at the cost of a
/// virtual call per operation and an allocation per permit. Cloning is cheap; clones
/// share the breaker.
///
/// ```
/// use breakerbox::contract::{Breaker, BreakerPermit, DynBreaker};
/// use breakerbox::{CircuitBreaker, Phase};
///
/// let engine = CircuitBreaker::builder().name("payments").consecutive_failures(1).build()?;
/// let breaker = DynBreaker::new(engine); // or a `breakerbox_redis::RedisBreaker`
/// let permit = match breaker.try_acquire_local() {
///     breakerbox::contract::LocalAdmission::Admitted(permit) => permit,
///     other => panic!("closed admits at once: {other:?}"),
/// };
/// drop(permit.failure());
/// assert_eq!(breaker.phase(), Phase::Open);
/// # Ok::<(), breakerbox::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct DynBreaker {
    engine: Arc<dyn ErasedBreaker>,
    clock: DynClock,
}

impl DynBreaker {
    /// Erases `engine`'s type.
    pub fn new<B: Breaker>(engine: B) -> DynBreaker {
        let engine: Arc<dyn ErasedBreaker> = Arc::new(engine);
        DynBreaker {
            clock: DynClock {
                engine: engine.clone(),
            },
            engine,
        }
    }
}

impl fmt::Debug for DynBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("DynBreaker").field(&self.engine).finish()
    }
}

/// The clock of a [`DynBreaker`]: its engine's.
#[derive(Clone)]
pub struct DynClock {
    engine: Arc<dyn ErasedBreaker>,
}

impl fmt::Debug for DynClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DynClock")
    }
}

impl Clock for DynClock {
    fn now(&self) -> Nanos {
        self.engine.now()
    }

    fn now_coarse(&self) -> Nanos {
        self.engine.now_coarse()
    }

    fn stamp(&self) -> Stamp {
        self.engine.stamp()
    }

    fn elapsed_since(&self, since: Stamp) -> Nanos {
        self.engine.elapsed_since(since)
    }
}

/// Why a [`DynBreaker`]'s snapshot or manual operation failed: its engine's error.
#[derive(Debug)]
pub struct DynError(Box<dyn Error + Send + Sync>);

impl DynError {
    fn new<E: Error + Send + Sync + 'static>(error: E) -> DynError {
        DynError(Box::new(error))
    }

    /// The engine's own error.
    pub fn into_inner(self) -> Box<dyn Error + Send + Sync> {
        self.0
    }
}

impl fmt::Display for DynError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl Error for DynError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.0.source()
    }
}

impl Breaker for DynBreaker {
    type Clock = DynClock;
    type Permit<'a> = DynPermit;
    type OwnedPermit = DynPermit;
    type Acquire = BoxFuture<Result<DynPermit, CircuitOpen>>;
    type Error = DynError;

    fn name(&self) -> &str {
        self.engine.name()
    }

    fn config(&self) -> &Config {
        self.engine.config()
    }

    fn clock(&self) -> &DynClock {
        &self.clock
    }

    fn phase(&self) -> Phase {
        self.engine.phase()
    }

    fn check(&self) -> Result<(), CircuitOpen> {
        self.engine.check()
    }

    fn try_acquire_local(&self) -> LocalAdmission<DynPermit> {
        self.engine.try_acquire_local()
    }

    fn try_acquire_local_owned(&self) -> LocalAdmission<DynPermit> {
        self.engine.try_acquire_local()
    }

    fn acquire(&self) -> Self::Acquire {
        self.engine.acquire()
    }

    fn snapshot(&self) -> impl Future<Output = Result<Snapshot, DynError>> + Send + 'static {
        self.engine.snapshot()
    }

    fn force_open(&self) -> impl Future<Output = Result<(), DynError>> + Send + 'static {
        self.engine.manual(Manual::ForceOpen(None))
    }

    fn force_open_for(
        &self,
        duration: Duration,
    ) -> impl Future<Output = Result<(), DynError>> + Send + 'static {
        self.engine.manual(Manual::ForceOpen(Some(duration)))
    }

    fn disable(&self) -> impl Future<Output = Result<(), DynError>> + Send + 'static {
        self.engine.manual(Manual::Disable(None))
    }

    fn disable_for(
        &self,
        duration: Duration,
    ) -> impl Future<Output = Result<(), DynError>> + Send + 'static {
        self.engine.manual(Manual::Disable(Some(duration)))
    }

    fn reset(&self) -> impl Future<Output = Result<(), DynError>> + Send + 'static {
        self.engine.manual(Manual::Reset)
    }

    fn set_shadow(&self, on: bool) -> impl Future<Output = Result<(), DynError>> + Send + 'static {
        self.engine.manual(Manual::Shadow(on))
    }

    fn flush(&self) -> impl Future<Output = ()> + Send + 'static {
        self.engine.flush()
    }

    fn is_idle(&self) -> bool {
        // Other handles on this erased breaker count, as well as the engine's own.
        Arc::strong_count(&self.engine) == 2 && self.engine.is_idle()
    }
}

/// What every permit offers, object-safe.
trait ErasedPermit: Send + fmt::Debug + 'static {
    fn generation(&self) -> u64;
    fn kind(&self) -> PermitKind;
    fn deadline(&self) -> Option<Duration>;
    fn record(self: Box<Self>, verdict: Verdict) -> DynRecorded;
    fn record_with_retry_hint(
        self: Box<Self>,
        verdict: Verdict,
        latency: Duration,
        retry_hint: Option<Duration>,
    ) -> DynRecorded;
    fn record_in_place(
        &mut self,
        verdict: Verdict,
        latency: Option<Duration>,
        retry_hint: Option<Duration>,
    ) -> DynRecorded;
}

impl<P: BreakerPermit + 'static> ErasedPermit for P {
    fn generation(&self) -> u64 {
        BreakerPermit::generation(self)
    }

    fn kind(&self) -> PermitKind {
        BreakerPermit::kind(self)
    }

    fn deadline(&self) -> Option<Duration> {
        BreakerPermit::deadline(self)
    }

    fn record(self: Box<Self>, verdict: Verdict) -> DynRecorded {
        DynRecorded::of((*self).record(verdict))
    }

    fn record_with_retry_hint(
        self: Box<Self>,
        verdict: Verdict,
        latency: Duration,
        retry_hint: Option<Duration>,
    ) -> DynRecorded {
        DynRecorded::of((*self).record_with_retry_hint(verdict, latency, retry_hint))
    }

    fn record_in_place(
        &mut self,
        verdict: Verdict,
        latency: Option<Duration>,
        retry_hint: Option<Duration>,
    ) -> DynRecorded {
        DynRecorded::of(BreakerPermit::record_in_place(
            self, verdict, latency, retry_hint,
        ))
    }
}

/// A permit of a [`DynBreaker`]: its engine's permit, boxed. Dropped unrecorded, it is
/// released as its engine's would be.
#[derive(Debug)]
#[must_use = "a permit records nothing unless a verdict is given"]
pub struct DynPermit {
    inner: Box<dyn ErasedPermit>,
}

impl DynPermit {
    fn new<P: BreakerPermit + 'static>(permit: P) -> DynPermit {
        DynPermit {
            inner: Box::new(permit),
        }
    }
}

impl BreakerPermit for DynPermit {
    type Recorded = DynRecorded;

    fn generation(&self) -> u64 {
        self.inner.generation()
    }

    fn kind(&self) -> PermitKind {
        self.inner.kind()
    }

    fn deadline(&self) -> Option<Duration> {
        self.inner.deadline()
    }

    fn record(self, verdict: Verdict) -> DynRecorded {
        self.inner.record(verdict)
    }

    fn record_with_retry_hint(
        self,
        verdict: Verdict,
        latency: Duration,
        retry_hint: Option<Duration>,
    ) -> DynRecorded {
        self.inner
            .record_with_retry_hint(verdict, latency, retry_hint)
    }

    fn record_in_place(
        &mut self,
        verdict: Verdict,
        latency: Option<Duration>,
        retry_hint: Option<Duration>,
    ) -> DynRecorded {
        self.inner.record_in_place(verdict, latency, retry_hint)
    }
}

/// Waits until a [`DynPermit`]'s outcome took effect (already done for engines that record
/// in place; nothing is allocated then). Dropping it does not lose the outcome.
pub struct DynRecorded {
    pending: Option<BoxFuture<()>>,
}

impl DynRecorded {
    /// Polls `recorded` once: an engine that recorded in place is done, and nothing is
    /// boxed; otherwise the rest is kept to await (or to drop: the engine sends it anyway).
    fn of<F: Future<Output = ()> + Send + 'static>(recorded: F) -> DynRecorded {
        let mut recorded = Box::pin(recorded);
        let mut cx = Context::from_waker(Waker::noop());
        match recorded.as_mut().poll(&mut cx) {
            Poll::Ready(()) => DynRecorded { pending: None },
            Poll::Pending => DynRecorded {
                pending: Some(recorded),
            },
        }
    }
}

impl Future for DynRecorded {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match self.pending.as_mut() {
            Some(pending) => {
                let poll = pending.as_mut().poll(cx);
                if poll.is_ready() {
                    self.pending = None;
                }
                poll
            }
            None => Poll::Ready(()),
        }
    }
}

impl fmt::Debug for DynRecorded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynRecorded")
            .field("pending", &self.pending.is_some())
            .finish()
    }
}
