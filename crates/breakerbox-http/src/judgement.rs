//! The judge's answer: a verdict, why, and an optional hint from the server.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use breakerbox::Verdict;

/// How one HTTP exchange counts for the breaker, and why.
///
/// ```
/// use breakerbox_http::HttpJudge;
/// use breakerbox::Verdict;
/// use http::{HeaderMap, StatusCode};
/// use std::time::Duration;
///
/// let judge = HttpJudge::default();
/// let judgement = judge.judge_status(StatusCode::SERVICE_UNAVAILABLE, &HeaderMap::new(), Duration::ZERO, false);
/// assert_eq!(judgement.verdict, Verdict::Failure);
/// assert_eq!(judgement.reason, "status 503");
/// assert_eq!(judgement.to_string(), "failure (status 503)");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judgement {
    /// How the call counts.
    pub verdict: Verdict,
    /// A short reason for events, logs and metrics: `status 503`, `business code E001`,
    /// `slow 1.2s > 800ms`, `transport: connect failed`, `timeout`.
    pub reason: Cow<'static, str>,
    /// How long the server asked us to wait (`Retry-After` on a 429 or 503), when the judge
    /// honours that header and the value was given in seconds.
    pub retry_after: Option<Duration>,
}

impl Judgement {
    /// A judgement with no `retry_after`.
    pub fn new(verdict: Verdict, reason: impl Into<Cow<'static, str>>) -> Self {
        Judgement {
            verdict,
            reason: reason.into(),
            retry_after: None,
        }
    }

    /// Whether the verdict is [`Verdict::Failure`].
    pub fn is_failure(&self) -> bool {
        self.verdict == Verdict::Failure
    }
}

impl fmt::Display for Judgement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.verdict, self.reason)?;
        if let Some(after) = self.retry_after {
            write!(f, "; retry after {}", crate::HumanDuration(after))?;
        }
        Ok(())
    }
}
