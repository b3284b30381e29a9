//! One JSON Lines event: `{"timestamp":..,"status":..,"latency_ms":..,"error_code":..}`.
//! Timestamps are numbers (or numeric strings) in the trace's unit, or RFC 3339 strings;
//! other keys are ignored.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

use super::{check_status, TraceEvent};
use crate::replay::time::{parse_decimal, parse_timestamp, TimeUnit};

/// A JSON scalar, borrowed when it can be.
#[derive(Debug)]
enum Scalar<'a> {
    Null,
    Int(i128),
    Float(f64),
    Text(Cow<'a, str>),
}

impl<'de: 'a, 'a> Deserialize<'de> for Scalar<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Scalar<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number, a string or null")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Scalar<'a>, E> {
                Ok(Scalar::Null)
            }
            fn visit_none<E: de::Error>(self) -> Result<Scalar<'a>, E> {
                Ok(Scalar::Null)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar<'a>, E> {
                Ok(Scalar::Int(i128::from(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar<'a>, E> {
                Ok(Scalar::Int(i128::from(v)))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scalar<'a>, E> {
                Ok(Scalar::Float(v))
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Scalar<'a>, E> {
                Ok(Scalar::Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar<'a>, E> {
                Ok(Scalar::Text(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(borrow)]
    timestamp: Option<Scalar<'a>>,
    #[serde(borrow, default)]
    status: Option<Scalar<'a>>,
    #[serde(borrow, default)]
    latency_ms: Option<Scalar<'a>>,
    #[serde(borrow, default)]
    error_code: Option<Scalar<'a>>,
}

/// Parses one JSON line.
pub(super) fn parse_json(line: &[u8], unit: TimeUnit) -> Result<TraceEvent<'_>, String> {
    let parsed: Line<'_> =
        serde_json::from_slice(line).map_err(|e| format!("invalid JSON: {e}"))?;
    let scale = match unit {
        TimeUnit::Ms => 1_000_000i128,
        TimeUnit::S => 1_000_000_000,
    };
    let timestamp = match parsed.timestamp {
        Some(Scalar::Int(v)) => v
            .checked_mul(scale)
            .ok_or_else(|| format!("invalid timestamp {v}"))?,
        Some(Scalar::Float(v)) if v.is_finite() => (v * scale as f64) as i128,
        Some(Scalar::Text(t)) => parse_timestamp(t.as_bytes(), unit)
            .ok_or_else(|| format!("invalid timestamp \"{t}\""))?,
        Some(other) => return Err(format!("invalid timestamp {other:?}")),
        None => return Err("missing field `timestamp`".to_owned()),
    };
    let status = match parsed.status {
        None | Some(Scalar::Null) => 0,
        Some(Scalar::Int(v)) => check_status(u32::try_from(v).unwrap_or(u32::MAX))?,
        Some(Scalar::Text(t)) if t.is_empty() => 0,
        Some(Scalar::Text(t)) => match t.parse::<u32>() {
            Ok(v) => check_status(v)?,
            Err(_) => return Err(format!("invalid status \"{t}\"")),
        },
        Some(Scalar::Float(v)) => return Err(format!("invalid status {v}")),
    };
    let latency = match parsed.latency_ms {
        None | Some(Scalar::Null) => 0,
        Some(Scalar::Int(v)) if v >= 0 => {
            u64::try_from(v * 1_000_000).map_err(|_| format!("invalid latency_ms {v}"))?
        }
        Some(Scalar::Float(v)) if v >= 0.0 && v.is_finite() => (v * 1e6) as u64,
        Some(Scalar::Text(t)) => match parse_decimal(t.as_bytes(), 1_000_000) {
            Some(n) if n >= 0 => u64::try_from(n).map_err(|_| format!("invalid latency_ms {t}"))?,
            _ => return Err(format!("invalid latency_ms \"{t}\"")),
        },
        Some(other) => return Err(format!("invalid latency_ms {other:?}")),
    };
    let error_code = match parsed.error_code {
        None | Some(Scalar::Null) => None,
        Some(Scalar::Text(t)) if t.is_empty() => None,
        Some(Scalar::Text(t)) => Some(t),
        Some(Scalar::Int(v)) => Some(Cow::Owned(v.to_string())),
        Some(Scalar::Float(v)) => Some(Cow::Owned(v.to_string())),
    };
    Ok(TraceEvent {
        timestamp,
        status,
        latency,
        error_code,
    })
}
