//! The error for a refused HTTP judge configuration.

use std::fmt;

/// A judge configuration was refused. Names the key (as in a config file, e.g.
/// `status."6xx"` or `slow_threshold`), the offending value and what is wrong with it.
///
/// ```
/// use breakerbox_http::HttpJudge;
/// use breakerbox::Verdict;
///
/// let error = HttpJudge::builder().status("6xx", Verdict::Failure).build().unwrap_err();
/// assert_eq!(error.key(), "status.\"6xx\"");
/// assert_eq!(error.value(), "6xx");
/// assert_eq!(error.to_string(), "status.\"6xx\": unknown status class \"6xx\"");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpJudgeError {
    key: String,
    value: String,
    message: String,
}

impl HttpJudgeError {
    /// An error for `key` holding `value`; `message` says what is wrong and should quote the
    /// value.
    pub fn new(
        key: impl Into<String>,
        value: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        HttpJudgeError {
            key: key.into(),
            value: value.into(),
            message: message.into(),
        }
    }

    /// The offending key, spelt as in a config file (`status."6xx"`, `business.pointers[0]`).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The offending value, as given.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// What is wrong, without the key.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for HttpJudgeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

impl std::error::Error for HttpJudgeError {}
