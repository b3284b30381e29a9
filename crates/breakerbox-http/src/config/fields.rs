//! Serde helpers for the config's fields, each of which names its key in its errors.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use breakerbox::Verdict;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::Deserialize;

use breakerbox::config::serde_duration;

use crate::{HumanDuration, StatusSelector};

/// A scalar read as text: YAML keys like `429:` are numbers, TOML keys are strings, and
/// business codes may be either in a config file.
pub(crate) struct StringOrNumber(pub(crate) String);

impl<'de> Deserialize<'de> for StringOrNumber {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = StringOrNumber;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or a number")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<StringOrNumber, E> {
                Ok(StringOrNumber(v.to_owned()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<StringOrNumber, E> {
                Ok(StringOrNumber(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<StringOrNumber, E> {
                Ok(StringOrNumber(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<StringOrNumber, E> {
                Ok(StringOrNumber(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<StringOrNumber, E> {
                Ok(StringOrNumber(v.to_string()))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// Parses `failure`, `ignore` or `success`.
pub(crate) fn parse_verdict(text: &str) -> Result<Verdict, String> {
    match text {
        "failure" => Ok(Verdict::Failure),
        "ignore" => Ok(Verdict::Ignore),
        "success" => Ok(Verdict::Success),
        _ => Err(format!(
            "unknown verdict \"{text}\" (expected failure, ignore or success)"
        )),
    }
}

fn verdict_for<'de, D: Deserializer<'de>>(key: &str, d: D) -> Result<Option<Verdict>, D::Error> {
    let text = StringOrNumber::deserialize(d)?.0;
    parse_verdict(&text)
        .map(Some)
        .map_err(|m| de::Error::custom(format!("{key}: {m}")))
}

/// A duration key, read as every breakerbox config file reads one: text with a unit,
/// a bare number refused.
fn duration_for<'de, D: Deserializer<'de>>(
    key: &'static str,
    d: D,
) -> Result<Option<Duration>, D::Error> {
    serde_duration::deserialize(key, d).map(Some)
}

/// A duration written so that it reads back the same.
fn exact_duration(d: Duration) -> String {
    format!("{:#}", HumanDuration(d))
}

macro_rules! keyed {
    ($name:ident, $key:literal, $ty:ty, $parse:ident, $show:expr) => {
        pub(crate) mod $name {
            use super::*;
            pub(crate) fn serialize<S: Serializer>(
                value: &Option<$ty>,
                s: S,
            ) -> Result<S::Ok, S::Error> {
                match value {
                    Some(v) => s.collect_str(&($show)(*v)),
                    None => s.serialize_none(),
                }
            }
            pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
                d: D,
            ) -> Result<Option<$ty>, D::Error> {
                $parse($key, d)
            }
        }
    };
}

keyed!(
    client_errors,
    "client_errors",
    Verdict,
    verdict_for,
    |v: Verdict| v
);
keyed!(
    server_errors,
    "server_errors",
    Verdict,
    verdict_for,
    |v: Verdict| v
);
keyed!(
    other_codes,
    "business.other_codes",
    Verdict,
    verdict_for,
    |v: Verdict| v
);
keyed!(
    slow_threshold,
    "slow_threshold",
    Duration,
    duration_for,
    exact_duration
);
keyed!(
    probe_slow_threshold,
    "probe_slow_threshold",
    Duration,
    duration_for,
    exact_duration
);

/// `status` as a map from selector to verdict; errors name the entry: `status."6xx": ...`.
pub(crate) mod status_map {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(
        map: &BTreeMap<StatusSelector, Verdict>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let mut out = s.serialize_map(Some(map.len()))?;
        for (selector, verdict) in map {
            out.serialize_entry(&selector.to_string(), verdict.as_str())?;
        }
        out.end()
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<StatusSelector, Verdict>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = BTreeMap<StatusSelector, Verdict>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map from status (429, 500-599, 5xx) to verdict")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
                let mut map = BTreeMap::new();
                while let Some(key) = access.next_key::<StringOrNumber>()? {
                    let key = key.0;
                    let value = access.next_value::<StringOrNumber>()?.0;
                    let selector = StatusSelector::parse(&key)
                        .map_err(|m| de::Error::custom(format!("status.\"{key}\": {m}")))?;
                    let verdict = parse_verdict(&value)
                        .map_err(|m| de::Error::custom(format!("status.\"{key}\": {m}")))?;
                    if map.insert(selector, verdict).is_some() {
                        return Err(de::Error::custom(format!(
                            "status.\"{key}\": {selector} is given twice"
                        )));
                    }
                }
                Ok(map)
            }
        }
        d.deserialize_map(V)
    }
}

/// A list of business codes, each a string or a number.
pub(crate) mod code_list {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(codes: &[String], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(codes)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        Ok(Vec::<StringOrNumber>::deserialize(d)?
            .into_iter()
            .map(|c| c.0)
            .collect())
    }
}
