//! The in-memory engine under the contract: every answer is local and immediate.

use std::convert::Infallible;
use std::future::{ready, Future, Ready};
use std::time::Duration;

use super::{Breaker, BreakerPermit, LocalAdmission, RecordedNow};
use crate::model::PermitKind;
use crate::{
    CircuitBreaker, CircuitOpen, Clock, Config, OwnedPermit, Permit, Phase, Snapshot, Verdict,
};

/// The methods both in-memory engines (an owned handle, a program-long reference) answer the
/// same way: through [`CircuitBreaker`]'s own methods, at once.
macro_rules! in_memory_answers {
    () => {
        fn name(&self) -> &str {
            CircuitBreaker::name(self)
        }

        fn config(&self) -> &Config {
            CircuitBreaker::config(self)
        }

        fn clock(&self) -> &C {
            CircuitBreaker::clock(self)
        }

        fn phase(&self) -> Phase {
            CircuitBreaker::phase(self)
        }

        #[inline]
        fn check(&self) -> Result<(), CircuitOpen> {
            CircuitBreaker::check(self)
        }

        #[inline]
        fn try_acquire_local(&self) -> LocalAdmission<Permit<'_, C>> {
            match CircuitBreaker::try_acquire(self) {
                Ok(permit) => LocalAdmission::Admitted(permit),
                Err(open) => LocalAdmission::Rejected(open),
            }
        }

        fn snapshot(&self) -> impl Future<Output = Result<Snapshot, Infallible>> + Send + 'static {
            ready(Ok(CircuitBreaker::snapshot(self)))
        }

        fn force_open(&self) -> impl Future<Output = Result<(), Infallible>> + Send + 'static {
            CircuitBreaker::force_open(self);
            ready(Ok(()))
        }

        fn force_open_for(
            &self,
            duration: Duration,
        ) -> impl Future<Output = Result<(), Infallible>> + Send + 'static {
            CircuitBreaker::force_open_for(self, duration);
            ready(Ok(()))
        }

        fn disable(&self) -> impl Future<Output = Result<(), Infallible>> + Send + 'static {
            CircuitBreaker::disable(self);
            ready(Ok(()))
        }

        fn disable_for(
            &self,
            duration: Duration,
        ) -> impl Future<Output = Result<(), Infallible>> + Send + 'static {
            CircuitBreaker::disable_for(self, duration);
            ready(Ok(()))
        }

        fn reset(&self) -> impl Future<Output = Result<(), Infallible>> + Send + 'static {
            CircuitBreaker::reset(self);
            ready(Ok(()))
        }

        fn set_shadow(
            &self,
            on: bool,
        ) -> impl Future<Output = Result<(), Infallible>> + Send + 'static {
            CircuitBreaker::set_shadow(self, on);
            ready(Ok(()))
        }
    };
}

impl<C: Clock + Clone> Breaker for CircuitBreaker<C> {
    type Clock = C;
    type Permit<'a>
        = Permit<'a, C>
    where
        C: 'a;
    type OwnedPermit = OwnedPermit<C>;
    type Acquire = Ready<Result<OwnedPermit<C>, CircuitOpen>>;
    type Error = Infallible;

    in_memory_answers!();

    #[inline(always)]
    fn try_acquire_local_owned(&self) -> LocalAdmission<OwnedPermit<C>> {
        match self.try_acquire_owned() {
            Ok(permit) => LocalAdmission::Admitted(permit),
            Err(open) => LocalAdmission::Rejected(open),
        }
    }

    fn acquire(&self) -> Self::Acquire {
        ready(self.try_acquire_owned())
    }

    fn is_idle(&self) -> bool {
        CircuitBreaker::phase(self) == Phase::Closed && self.handles() == 1
    }
}

/// The permit methods of the contract, for both permits of the in-memory engine.
macro_rules! contract_permit {
    ($ty:ty) => {
        impl<C: Clock + Clone> BreakerPermit for $ty {
            type Recorded = RecordedNow;

            fn generation(&self) -> u64 {
                <$ty>::generation(self)
            }

            fn kind(&self) -> PermitKind {
                <$ty>::kind(self)
            }

            fn deadline(&self) -> Option<Duration> {
                <$ty>::deadline(self)
            }

            #[inline(always)]
            fn record(self, verdict: Verdict) -> RecordedNow {
                <$ty>::record(self, verdict);
                RecordedNow
            }

            #[inline(always)]
            fn record_in_place(
                &mut self,
                verdict: Verdict,
                latency: Option<Duration>,
                retry_hint: Option<Duration>,
            ) -> RecordedNow {
                <$ty>::record_spending(self, verdict, latency, retry_hint);
                RecordedNow
            }

            #[inline]
            fn record_with_retry_hint(
                self,
                verdict: Verdict,
                latency: Duration,
                retry_hint: Option<Duration>,
            ) -> RecordedNow {
                <$ty>::record_with_retry_hint(self, verdict, latency, retry_hint);
                RecordedNow
            }
        }
    };
}

contract_permit!(Permit<'_, C>);
contract_permit!(OwnedPermit<C>);

/// A breaker that lives for the whole program (a `static`, or one leaked at start-up) under
/// the contract. Its owned permit is the borrowed [`Permit`]: an integration that holds a
/// permit in a future (the tower layer, the reqwest middleware) pays no reference count
/// per call, which on some machines costs more than the rest of the call together.
///
/// ```
/// use breakerbox::contract::{Breaker, BreakerPermit, LocalAdmission};
/// use breakerbox::CircuitBreaker;
/// use std::sync::LazyLock;
///
/// static PAYMENTS: LazyLock<CircuitBreaker> = LazyLock::new(|| {
///     CircuitBreaker::builder()
///         .name("payments")
///         .consecutive_failures(5)
///         .build()
///         .expect("a valid config")
/// });
///
/// let breaker: &'static CircuitBreaker = &PAYMENTS;
/// match Breaker::try_acquire_local_owned(&breaker) {
///     LocalAdmission::Admitted(permit) => {
///         permit.success();
///     }
///     other => panic!("closed breakers admit: {other:?}"),
/// }
/// ```
impl<C: Clock + Clone> Breaker for &'static CircuitBreaker<C> {
    type Clock = C;
    type Permit<'a>
        = Permit<'a, C>
    where
        Self: 'a;
    type OwnedPermit = Permit<'static, C>;
    type Acquire = Ready<Result<Permit<'static, C>, CircuitOpen>>;
    type Error = Infallible;

    in_memory_answers!();

    #[inline(always)]
    fn try_acquire_local_owned(&self) -> LocalAdmission<Permit<'static, C>> {
        let breaker: &'static CircuitBreaker<C> = self;
        match breaker.try_acquire() {
            Ok(permit) => LocalAdmission::Admitted(permit),
            Err(open) => LocalAdmission::Rejected(open),
        }
    }

    fn acquire(&self) -> Self::Acquire {
        let breaker: &'static CircuitBreaker<C> = self;
        ready(breaker.try_acquire())
    }

    /// A program-long breaker frees nothing when dropped from a registry: idle when closed.
    fn is_idle(&self) -> bool {
        CircuitBreaker::phase(self) == Phase::Closed
    }
}
