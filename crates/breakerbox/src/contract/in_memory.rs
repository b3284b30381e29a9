//! The in-memory engine under the contract: every answer is local and immediate.

use std::convert::Infallible;
use std::future::{ready, Future, Ready};
use std::time::Duration;

use super::{Breaker, BreakerPermit, LocalAdmission, RecordedNow};
use crate::model::PermitKind;
use crate::{
    CircuitBreaker, CircuitOpen, Clock, Config, OwnedPermit, Permit, Phase, Snapshot, Verdict,
};

impl<C: Clock + Clone> Breaker for CircuitBreaker<C> {
    type Clock = C;
    type Permit<'a>
        = Permit<'a, C>
    where
        C: 'a;
    type OwnedPermit = OwnedPermit<C>;
    type Acquire = Ready<Result<OwnedPermit<C>, CircuitOpen>>;
    type Error = Infallible;

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
        match self.try_acquire() {
            Ok(permit) => LocalAdmission::Admitted(permit),
            Err(open) => LocalAdmission::Rejected(open),
        }
    }

    #[inline]
    fn try_acquire_local_owned(&self) -> LocalAdmission<OwnedPermit<C>> {
        match self.try_acquire_owned() {
            Ok(permit) => LocalAdmission::Admitted(permit),
            Err(open) => LocalAdmission::Rejected(open),
        }
    }

    fn acquire(&self) -> Self::Acquire {
        ready(self.try_acquire_owned())
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

            #[inline]
            fn record(self, verdict: Verdict) -> RecordedNow {
                <$ty>::record(self, verdict);
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
