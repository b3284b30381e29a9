//! The values a breaker answers with when it says no, and configuration errors.

use std::error::Error;
use std::fmt;
use std::time::Duration;

use crate::Phase;

/// A call was rejected without being attempted. Cheap to create and copy: no allocation.
///
/// ```
/// use breakerbox::{CircuitBreaker, Phase};
/// let breaker = CircuitBreaker::builder().build().unwrap();
/// breaker.force_open();
/// let rejected = breaker.try_acquire().unwrap_err();
/// assert_eq!(rejected.phase(), Phase::ForcedOpen);
/// assert_eq!(rejected.retry_after(), None);
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CircuitOpen {
    phase: Phase,
    /// Nanoseconds, `u64::MAX` for none (a `Duration` is built only when asked for).
    retry_after_nanos: u64,
}

impl CircuitOpen {
    /// A rejection in `phase`.
    pub const fn new(phase: Phase, retry_after: Option<Duration>) -> CircuitOpen {
        let retry_after_nanos = match retry_after {
            Some(d) if d.as_nanos() < u64::MAX as u128 => d.as_nanos() as u64,
            Some(_) => u64::MAX - 1,
            None => u64::MAX,
        };
        CircuitOpen {
            phase,
            retry_after_nanos,
        }
    }

    #[inline]
    pub(crate) const fn from_nanos(phase: Phase, retry_after_nanos: Option<u64>) -> CircuitOpen {
        let retry_after_nanos = match retry_after_nanos {
            Some(n) if n == u64::MAX => u64::MAX - 1,
            Some(n) => n,
            None => u64::MAX,
        };
        CircuitOpen {
            phase,
            retry_after_nanos,
        }
    }

    /// The phase the breaker is in after the rejected acquire.
    pub const fn phase(&self) -> Phase {
        self.phase
    }

    /// Why the call was rejected: the phase rejects it, or (rule 23) the breaker is closed
    /// and ramping up after a recovery and this call was not in the admitted fraction. A
    /// ramp rejection is the only one in [`Phase::Closed`], with no `retry_after` (a retry
    /// may be admitted at once; nothing says when).
    ///
    /// ```
    /// use breakerbox::{CircuitOpen, Phase, RejectReason};
    /// assert_eq!(CircuitOpen::new(Phase::Open, None).reason(), RejectReason::Open);
    /// assert_eq!(CircuitOpen::new(Phase::Closed, None).reason(), RejectReason::Ramp);
    /// ```
    pub const fn reason(&self) -> RejectReason {
        match self.phase {
            Phase::Closed => RejectReason::Ramp,
            _ => RejectReason::Open,
        }
    }

    /// When a retry may be admitted, if known: the rest of the open phase, the time left to
    /// the half-open deadline when every probe slot is taken, or the rest of an expiring
    /// manual override.
    pub const fn retry_after(&self) -> Option<Duration> {
        if self.retry_after_nanos == u64::MAX {
            None
        } else {
            Some(Duration::from_nanos(self.retry_after_nanos))
        }
    }
}

impl fmt::Display for CircuitOpen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.reason() == RejectReason::Ramp {
            return f.write_str("circuit breaker rejected the call (ramping up after a recovery)");
        }
        write!(f, "circuit breaker rejected the call ({})", self.phase)?;
        if let Some(after) = self.retry_after() {
            write!(f, "; retry after {after:?}")?;
        }
        Ok(())
    }
}

impl Error for CircuitOpen {}

/// Rule 22 of `docs/RULES.md`: an admitted call ran past its permit's deadline
/// ([`BreakerPermit::deadline`](crate::BreakerPermit::deadline): `probe_timeout` for a
/// half-open probe, `call_timeout` otherwise) and was cancelled: its future was dropped,
/// and the breaker recorded a failure with reason `timeout`. What the async integrations
/// (the tower layer, the reqwest middleware) answer then; `breakerbox_http` classifies it
/// as a timeout.
///
/// ```
/// use breakerbox::DeadlineElapsed;
/// use std::time::Duration;
/// let elapsed = DeadlineElapsed::new(Duration::from_millis(300), true);
/// assert_eq!(elapsed.to_string(), "probe deadline of 300ms elapsed; the call was cancelled");
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DeadlineElapsed {
    deadline: Duration,
    probe: bool,
}

impl DeadlineElapsed {
    /// A call cancelled at `deadline`, a half-open probe's if `probe`.
    pub const fn new(deadline: Duration, probe: bool) -> DeadlineElapsed {
        DeadlineElapsed { deadline, probe }
    }

    /// The deadline that elapsed, counted from the call's admission.
    pub const fn deadline(&self) -> Duration {
        self.deadline
    }

    /// Whether the call was a half-open probe (its deadline is the `probe_timeout`).
    pub const fn is_probe(&self) -> bool {
        self.probe
    }
}

impl fmt::Display for DeadlineElapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = if self.probe { "probe" } else { "call" };
        write!(
            f,
            "{what} deadline of {:?} elapsed; the call was cancelled",
            self.deadline
        )
    }
}

impl Error for DeadlineElapsed {}

/// Why a [`CircuitOpen`] rejected a call.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectReason {
    /// The phase rejects calls: open, forced open, or half-open with every probe slot taken
    /// (or past its deadline).
    Open,
    /// Rule 23: the breaker is closed and ramping up after a recovery, and this call was
    /// not in the fraction admitted now.
    Ramp,
}

impl RejectReason {
    /// A short stable name for logs and metrics (`open`, `ramp`).
    pub const fn as_str(self) -> &'static str {
        match self {
            RejectReason::Open => "open",
            RejectReason::Ramp => "ramp",
        }
    }
}

/// The result of a protected call: rejected by the breaker, or the call's own error.
///
/// # In an error chain
///
/// Following the convention error reporters (`anyhow`, `eyre`, `std`'s `Report`) rely on,
/// an error either shows a wrapped error in its `Display` or returns it from
/// [`Error::source`], never both, so a report that walks the chain prints each message
/// once. `CallError` returns the wrapped error from `source()`:
///
/// - [`CallError::Inner`] displays as "the protected call failed" and its `source()` is
///   the call's own error (match on the variant, or use [`CallError::into_inner`], to get
///   at it directly);
/// - [`CallError::Open`] displays as the [`CircuitOpen`] it holds, which is the whole
///   story: its `source()` is `None`.
///
/// ```
/// use breakerbox::{CallError, CircuitBreaker};
/// use std::error::Error;
///
/// let breaker = CircuitBreaker::builder().build().unwrap();
/// let error = breaker
///     .call(|| Err::<(), _>(std::io::Error::other("connection refused")))
///     .unwrap_err();
/// let mut chain = vec![error.to_string()];
/// let mut source = error.source();
/// while let Some(cause) = source {
///     chain.push(cause.to_string());
///     source = cause.source();
/// }
/// assert_eq!(chain, ["the protected call failed", "connection refused"]);
/// ```
#[derive(Debug, PartialEq, Eq)]
pub enum CallError<E> {
    /// The breaker rejected the call; it was not attempted.
    Open(CircuitOpen),
    /// The call ran and returned this error.
    Inner(E),
}

impl<E> CallError<E> {
    /// The call's own error, if it ran.
    pub fn into_inner(self) -> Option<E> {
        match self {
            CallError::Open(_) => None,
            CallError::Inner(e) => Some(e),
        }
    }

    /// The rejection, if the call was rejected.
    pub fn rejection(&self) -> Option<CircuitOpen> {
        match self {
            CallError::Open(open) => Some(*open),
            CallError::Inner(_) => None,
        }
    }
}

/// The inner error is not displayed: it is the [`Error::source`] (see the
/// [type's docs](CallError#in-an-error-chain)).
impl<E> fmt::Display for CallError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Open(open) => open.fmt(f),
            CallError::Inner(_) => f.write_str("the protected call failed"),
        }
    }
}

impl<E: Error + 'static> Error for CallError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            CallError::Open(_) => None,
            CallError::Inner(e) => Some(e),
        }
    }
}

/// A configuration value was refused. Names the field, the value and what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    field: &'static str,
    value: String,
    expected: &'static str,
}

impl ConfigError {
    /// An error for `field` holding `value`, which should have been `expected`.
    pub fn new(field: &'static str, value: impl fmt::Display, expected: &'static str) -> Self {
        ConfigError {
            field,
            value: value.to_string(),
            expected,
        }
    }

    /// The offending key, as written in a config file: `failure_rate`, `window`,
    /// `max_open_duration`, ... Most keys are also the name of the builder method that
    /// sets them; the exceptions are `window` (set by `count_window` or `time_window`)
    /// and `backoff_multiplier` and `max_open_duration` (both set by `backoff`).
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// The offending value, as given.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// What would have been accepted.
    pub fn expected(&self) -> &'static str {
        self.expected
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid value {} for `{}`: expected {}",
            self.value, self.field, self.expected
        )
    }
}

impl Error for ConfigError {}
