//! Business error codes: a code read from a JSON body with JSON pointers.

use std::borrow::Cow;
use std::collections::HashSet;

use breakerbox::Verdict;
use serde_json::Value;

use crate::{BusinessConfig, HttpJudgeError, StatusSelector};

/// A validated [`BusinessConfig`].
#[derive(Clone, Debug)]
pub(crate) struct BusinessRule {
    pointers: Vec<String>,
    failure: HashSet<String>,
    success: HashSet<String>,
    other: Option<Verdict>,
    statuses: Vec<StatusSelector>,
}

impl BusinessRule {
    pub(crate) fn new(config: BusinessConfig) -> Result<BusinessRule, HttpJudgeError> {
        if config.pointers.is_empty() {
            return Err(HttpJudgeError::new(
                "business.pointers",
                "[]",
                "at least one JSON pointer is needed (e.g. \"/error_code\")",
            ));
        }
        for (i, pointer) in config.pointers.iter().enumerate() {
            if !pointer.starts_with('/') {
                return Err(HttpJudgeError::new(
                    format!("business.pointers[{i}]"),
                    pointer.as_str(),
                    format!("invalid JSON pointer \"{pointer}\" (must start with \"/\")"),
                ));
            }
        }
        if config.failure_codes.is_empty() && config.success_codes.is_empty() {
            return Err(HttpJudgeError::new(
                "business.failure_codes",
                "[]",
                "no business codes: give failure_codes, success_codes or both",
            ));
        }
        if config.statuses.is_empty() {
            return Err(HttpJudgeError::new(
                "business.statuses",
                "[]",
                "no statuses: business codes would never be read (the default is [\"2xx\"])",
            ));
        }
        let failure: HashSet<String> = config.failure_codes.into_iter().collect();
        let success: HashSet<String> = config.success_codes.into_iter().collect();
        if let Some(both) = failure.intersection(&success).min() {
            return Err(HttpJudgeError::new(
                "business.success_codes",
                both.as_str(),
                format!("code \"{both}\" is also a failure code"),
            ));
        }
        Ok(BusinessRule {
            pointers: config.pointers,
            failure,
            success,
            other: config.other_codes,
            statuses: config.statuses,
        })
    }

    /// Whether bodies of responses with `code` are read.
    pub(crate) fn applies_to(&self, code: u16) -> bool {
        self.statuses.iter().any(|s| s.matches(code))
    }

    /// The verdict the body's code calls for, if the body is JSON, holds a code at one of
    /// the pointers, and that code has a verdict.
    pub(crate) fn judge(&self, body: &[u8]) -> Option<(Verdict, Cow<'static, str>)> {
        let document: Value = serde_json::from_slice(body).ok()?;
        let code = self
            .pointers
            .iter()
            .find_map(|p| match document.pointer(p)? {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            })?;
        if self.failure.contains(&code) {
            Some((Verdict::Failure, format!("business code {code}").into()))
        } else if self.success.contains(&code) {
            Some((Verdict::Success, format!("business code {code}").into()))
        } else {
            self.other
                .map(|verdict| (verdict, format!("business code {code} (unlisted)").into()))
        }
    }
}
