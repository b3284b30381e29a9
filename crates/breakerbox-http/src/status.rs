//! Status rules: which statuses count as failures, successes or neither.

mod reasons;
mod table;

pub(crate) use reasons::status_reason;
pub(crate) use table::StatusTable;

use std::fmt;
use std::str::FromStr;

use crate::HttpJudgeError;

/// Which statuses a rule applies to: one code (`429`), an inclusive range (`500-599`) or a
/// class (`5xx`). When several rules match a status the most specific wins: a code beats a
/// range, a narrower range beats a wider one, and a range beats a class.
///
/// ```
/// use breakerbox_http::StatusSelector;
///
/// assert_eq!("429".parse::<StatusSelector>()?, StatusSelector::Code(429));
/// assert_eq!("500-599".parse::<StatusSelector>()?, StatusSelector::Range(500, 599));
/// assert_eq!("5xx".parse::<StatusSelector>()?, StatusSelector::Class(5));
/// assert_eq!(StatusSelector::Class(4).to_string(), "4xx");
/// assert!("6xx".parse::<StatusSelector>().is_err());
/// # Ok::<(), breakerbox_http::HttpJudgeError>(())
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StatusSelector {
    /// One status code, 100 to 999.
    Code(u16),
    /// Every code from the first to the second, both included.
    Range(u16, u16),
    /// Every code of a class: `Class(4)` is 400 to 499. Classes 1 to 5 exist.
    Class(u8),
}

impl StatusSelector {
    /// Whether `code` is selected.
    pub fn matches(&self, code: u16) -> bool {
        match *self {
            StatusSelector::Code(c) => c == code,
            StatusSelector::Range(from, to) => (from..=to).contains(&code),
            StatusSelector::Class(class) => code / 100 == u16::from(class),
        }
    }

    /// Parses a selector; the error message quotes the text but names no key.
    pub(crate) fn parse(text: &str) -> Result<StatusSelector, String> {
        let text = text.trim();
        let lower = text.to_ascii_lowercase();
        if let Some(digit) = lower.strip_suffix("xx") {
            return match digit.parse::<u8>() {
                Ok(class @ 1..=5) if digit.len() == 1 => Ok(StatusSelector::Class(class)),
                _ => Err(format!("unknown status class \"{text}\"")),
            };
        }
        if let Some((from, to)) = text.split_once('-') {
            let from = parse_code(from.trim()).ok_or_else(|| invalid(text))?;
            let to = parse_code(to.trim()).ok_or_else(|| invalid(text))?;
            if from > to {
                return Err(format!("empty status range \"{text}\" ({from} > {to})"));
            }
            return Ok(StatusSelector::Range(from, to));
        }
        parse_code(text)
            .map(StatusSelector::Code)
            .ok_or_else(|| invalid(text))
    }
}

fn parse_code(text: &str) -> Option<u16> {
    if text.len() != 3 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<u16>().ok().filter(|c| (100..=999).contains(c))
}

fn invalid(text: &str) -> String {
    format!(
        "invalid status \"{text}\" (expected a code like 429, a range like 500-599 or a class like 5xx)"
    )
}

impl fmt::Display for StatusSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StatusSelector::Code(c) => write!(f, "{c}"),
            StatusSelector::Range(from, to) => write!(f, "{from}-{to}"),
            StatusSelector::Class(class) => write!(f, "{class}xx"),
        }
    }
}

impl FromStr for StatusSelector {
    type Err = HttpJudgeError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        StatusSelector::parse(text)
            .map_err(|message| HttpJudgeError::new(format!("status.\"{text}\""), text, message))
    }
}

impl serde::Serialize for StatusSelector {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for StatusSelector {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = crate::config::StringOrNumber::deserialize(deserializer)?.0;
        StatusSelector::parse(&text).map_err(serde::de::Error::custom)
    }
}
