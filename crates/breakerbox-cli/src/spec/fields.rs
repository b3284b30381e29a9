//! Serde helpers for duration keys; each names its key in its errors.

use std::time::Duration;

use breakerbox_http::{parse_duration, HumanDuration};
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serializer};

/// A duration key's text, accepting a bare number only to refuse it with a clear message.
#[derive(Deserialize)]
#[serde(untagged)]
enum Raw {
    Text(String),
    Number(f64),
}

fn duration_for<'de, D: Deserializer<'de>>(key: &str, d: D) -> Result<Option<Duration>, D::Error> {
    let text = match Raw::deserialize(d)? {
        Raw::Text(t) => t,
        Raw::Number(n) => {
            return Err(de::Error::custom(format!(
                "{key}: invalid duration {n} (a duration needs a unit, e.g. \"800ms\", \"1.5s\", \"2m\")"
            )))
        }
    };
    parse_duration(&text).map(Some).ok_or_else(|| {
        de::Error::custom(format!(
            "{key}: invalid duration \"{text}\" (expected e.g. \"800ms\", \"1.5s\", \"2m\")"
        ))
    })
}

macro_rules! duration_key {
    ($name:ident) => {
        pub(crate) mod $name {
            use super::*;
            pub(crate) fn serialize<S: Serializer>(
                value: &Option<Duration>,
                s: S,
            ) -> Result<S::Ok, S::Error> {
                match value {
                    Some(v) => s.collect_str(&HumanDuration(*v)),
                    None => s.serialize_none(),
                }
            }
            pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
                d: D,
            ) -> Result<Option<Duration>, D::Error> {
                duration_for(stringify!($name), d)
            }
        }
    };
}

duration_key!(slow_call_threshold);
duration_key!(recovery_timeout);
duration_key!(max_open_duration);
duration_key!(half_open_timeout);
