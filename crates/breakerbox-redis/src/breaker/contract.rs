//! The Redis engine under the core's contract ([`breakerbox::contract`]): what lets the
//! tower layer, the reqwest middleware, the registry and the CLI use it like the
//! in-memory engine.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use breakerbox::contract::{Breaker, BreakerPermit, LocalAdmission};
use breakerbox::model::PermitKind;
use breakerbox::{CircuitOpen, Clock, Config, Phase, Snapshot, Verdict};

use super::{Recorded, RedisBreaker, RedisPermit};
use crate::store::StoreError;

/// The future of [`RedisBreaker`]'s contract `acquire`.
pub type AcquireFuture<C> =
    Pin<Box<dyn Future<Output = Result<RedisPermit<C>, CircuitOpen>> + Send + 'static>>;

impl<C: Clock + Clone> Breaker for RedisBreaker<C> {
    type Clock = C;
    type Permit<'a>
        = RedisPermit<C>
    where
        C: 'a;
    type OwnedPermit = RedisPermit<C>;
    type Acquire = AcquireFuture<C>;
    type Error = StoreError;

    fn name(&self) -> &str {
        RedisBreaker::name(self)
    }

    fn config(&self) -> &Config {
        RedisBreaker::config(self)
    }

    fn clock(&self) -> &C {
        &self.inner.clock
    }

    fn phase(&self) -> Phase {
        RedisBreaker::phase(self)
    }

    fn check(&self) -> Result<(), CircuitOpen> {
        RedisBreaker::check(self)
    }

    #[inline]
    fn try_acquire_local(&self) -> LocalAdmission<RedisPermit<C>> {
        RedisBreaker::try_acquire_local(self)
    }

    #[inline]
    fn try_acquire_local_owned(&self) -> LocalAdmission<RedisPermit<C>> {
        RedisBreaker::try_acquire_local(self)
    }

    fn acquire(&self) -> AcquireFuture<C> {
        let this = self.clone();
        Box::pin(async move { RedisBreaker::acquire(&this).await })
    }

    fn snapshot(&self) -> impl Future<Output = Result<Snapshot, StoreError>> + Send + 'static {
        let this = self.clone();
        async move { RedisBreaker::snapshot(&this).await }
    }

    fn force_open(&self) -> impl Future<Output = Result<(), StoreError>> + Send + 'static {
        let this = self.clone();
        async move { RedisBreaker::force_open(&this).await }
    }

    fn force_open_for(
        &self,
        duration: Duration,
    ) -> impl Future<Output = Result<(), StoreError>> + Send + 'static {
        let this = self.clone();
        async move { RedisBreaker::force_open_for(&this, duration).await }
    }

    fn disable(&self) -> impl Future<Output = Result<(), StoreError>> + Send + 'static {
        let this = self.clone();
        async move { RedisBreaker::disable(&this).await }
    }

    fn disable_for(
        &self,
        duration: Duration,
    ) -> impl Future<Output = Result<(), StoreError>> + Send + 'static {
        let this = self.clone();
        async move { RedisBreaker::disable_for(&this, duration).await }
    }

    fn reset(&self) -> impl Future<Output = Result<(), StoreError>> + Send + 'static {
        let this = self.clone();
        async move { RedisBreaker::reset(&this).await }
    }

    fn set_shadow(
        &self,
        on: bool,
    ) -> impl Future<Output = Result<(), StoreError>> + Send + 'static {
        let this = self.clone();
        async move { RedisBreaker::set_shadow(&this, on).await }
    }

    fn flush(&self) -> impl Future<Output = ()> + Send + 'static {
        let this = self.clone();
        async move { RedisBreaker::flush(&this).await }
    }

    fn is_idle(&self) -> bool {
        RedisBreaker::is_idle(self)
    }
}

impl<C: Clock + Clone> BreakerPermit for RedisPermit<C> {
    type Recorded = Recorded;

    fn generation(&self) -> u64 {
        RedisPermit::generation(self)
    }

    fn kind(&self) -> PermitKind {
        RedisPermit::kind(self)
    }

    fn deadline(&self) -> Option<Duration> {
        RedisPermit::deadline(self)
    }

    fn record(self, verdict: Verdict) -> Recorded {
        RedisPermit::record(self, verdict)
    }

    fn record_with_retry_hint(
        self,
        verdict: Verdict,
        latency: Duration,
        retry_hint: Option<Duration>,
    ) -> Recorded {
        RedisPermit::record_with_retry_hint(self, verdict, latency, retry_hint)
    }

    fn record_in_place(
        &mut self,
        verdict: Verdict,
        latency: Option<Duration>,
        retry_hint: Option<Duration>,
    ) -> Recorded {
        RedisPermit::record_in_place(self, verdict, latency, retry_hint)
    }
}
