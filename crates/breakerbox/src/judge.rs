//! Judges: how a call's outcome and latency become a [`Verdict`].

use std::marker::PhantomData;
use std::time::Duration;

use crate::Verdict;

/// Maps an outcome and its latency to a [`Verdict`]. Judges are values: build one, keep it,
/// share it between breakers.
///
/// ```
/// use breakerbox::{DefaultJudge, Judge, Verdict};
/// use std::time::Duration;
///
/// let judge = DefaultJudge.slower_than(Duration::from_millis(800));
/// let ok: Result<u32, ()> = Ok(7);
/// assert_eq!(judge.judge(&ok, Duration::from_millis(10)), Verdict::Success);
/// assert_eq!(judge.judge(&ok, Duration::from_secs(2)), Verdict::Failure);
/// ```
pub trait Judge<T, E> {
    /// Judges one call.
    fn judge(&self, outcome: &Result<T, E>, latency: Duration) -> Verdict;

    /// Whether [`Judge::judge`] looks at the latency. When it does not (and the breaker has
    /// no slow-call rule), calls skip the two clock readings that measure it.
    fn uses_latency(&self) -> bool {
        true
    }

    /// Wraps this judge: a call slower than `threshold` (strictly) is a failure whatever
    /// this judge says, unless it says [`Verdict::Ignore`].
    fn slower_than(self, threshold: Duration) -> SlowerThan<Self>
    where
        Self: Sized,
    {
        SlowerThan {
            inner: self,
            threshold,
        }
    }
}

impl<T, E, J: Judge<T, E> + ?Sized> Judge<T, E> for &J {
    fn judge(&self, outcome: &Result<T, E>, latency: Duration) -> Verdict {
        (**self).judge(outcome, latency)
    }
    fn uses_latency(&self) -> bool {
        (**self).uses_latency()
    }
}

impl<T, E, J: Judge<T, E> + ?Sized> Judge<T, E> for std::sync::Arc<J> {
    fn judge(&self, outcome: &Result<T, E>, latency: Duration) -> Verdict {
        (**self).judge(outcome, latency)
    }
    fn uses_latency(&self) -> bool {
        (**self).uses_latency()
    }
}

/// `Ok` is a success, `Err` a failure; latency does not matter.
#[derive(Copy, Clone, Debug, Default)]
pub struct DefaultJudge;

impl<T, E> Judge<T, E> for DefaultJudge {
    fn judge(&self, outcome: &Result<T, E>, _latency: Duration) -> Verdict {
        match outcome {
            Ok(_) => Verdict::Success,
            Err(_) => Verdict::Failure,
        }
    }
    fn uses_latency(&self) -> bool {
        false
    }
}

impl DefaultJudge {
    /// The default judge, failing calls slower than `threshold` (strictly).
    pub fn slower_than(self, threshold: Duration) -> SlowerThan<DefaultJudge> {
        SlowerThan::new(self, threshold)
    }
}

/// A judge that fails calls slower than a threshold; see [`Judge::slower_than`].
#[derive(Clone, Debug)]
pub struct SlowerThan<J> {
    inner: J,
    threshold: Duration,
}

impl<J> SlowerThan<J> {
    /// Wraps `inner`: calls slower than `threshold` (strictly) fail unless ignored.
    pub fn new(inner: J, threshold: Duration) -> Self {
        SlowerThan { inner, threshold }
    }

    /// The latency above which a call fails.
    pub fn threshold(&self) -> Duration {
        self.threshold
    }
}

impl<T, E, J: Judge<T, E>> Judge<T, E> for SlowerThan<J> {
    fn judge(&self, outcome: &Result<T, E>, latency: Duration) -> Verdict {
        match self.inner.judge(outcome, latency) {
            Verdict::Ignore => Verdict::Ignore,
            _ if latency > self.threshold => Verdict::Failure,
            verdict => verdict,
        }
    }
}

/// A judge made from a function, for one-off rules.
///
/// ```
/// use breakerbox::{FnJudge, Judge, Verdict};
/// use std::time::Duration;
///
/// // Errors that say "not found" are the caller's problem, not the dependency's.
/// let judge = FnJudge::new(|outcome: &Result<(), String>, _latency: Duration| match outcome {
///     Ok(()) => Verdict::Success,
///     Err(e) if e.contains("not found") => Verdict::Ignore,
///     Err(_) => Verdict::Failure,
/// });
/// assert_eq!(judge.judge(&Err("not found".into()), Duration::ZERO), Verdict::Ignore);
/// ```
pub struct FnJudge<F, T, E> {
    f: F,
    _types: PhantomData<fn(&Result<T, E>)>,
}

impl<F, T, E> std::fmt::Debug for FnJudge<F, T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnJudge").finish_non_exhaustive()
    }
}

impl<F, T, E> FnJudge<F, T, E>
where
    F: Fn(&Result<T, E>, Duration) -> Verdict,
{
    /// Wraps `f`.
    pub fn new(f: F) -> Self {
        FnJudge {
            f,
            _types: PhantomData,
        }
    }
}

impl<F: Clone, T, E> Clone for FnJudge<F, T, E> {
    fn clone(&self) -> Self {
        FnJudge {
            f: self.f.clone(),
            _types: PhantomData,
        }
    }
}

impl<F, T, E> Judge<T, E> for FnJudge<F, T, E>
where
    F: Fn(&Result<T, E>, Duration) -> Verdict,
{
    fn judge(&self, outcome: &Result<T, E>, latency: Duration) -> Verdict {
        (self.f)(outcome, latency)
    }
}
