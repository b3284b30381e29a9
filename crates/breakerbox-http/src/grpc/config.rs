//! The gRPC rules as data, with serde: per-code verdicts over the defaults.

use std::collections::BTreeMap;
use std::fmt;

use breakerbox::Verdict;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

use super::GrpcCode;
use crate::config::{parse_verdict, StringOrNumber};

/// How gRPC responses are judged ([`crate::HttpJudgeConfig::grpc`]): a verdict per code,
/// over the defaults ([`crate::grpc_default_verdict`]). Codes are written by name in any
/// case (`UNAVAILABLE`, `not_found`) or by number (`14`); an unknown code or verdict is an
/// error naming the key (`grpc.codes."NOPE"`).
///
/// ```
/// use breakerbox_http::{GrpcCode, HttpJudgeConfig};
/// use breakerbox::Verdict;
///
/// let config: HttpJudgeConfig = toml::from_str(r#"
///     [grpc.codes]
///     NOT_FOUND = "failure"
///     "2" = "ignore"
/// "#)?;
/// let grpc = config.grpc.expect("gRPC judging is on");
/// assert_eq!(grpc.codes[&GrpcCode::NotFound], Verdict::Failure);
/// assert_eq!(grpc.codes[&GrpcCode::Unknown], Verdict::Ignore);
///
/// // `grpc = true` turns it on with the defaults.
/// let config: HttpJudgeConfig = toml::from_str("grpc = true")?;
/// assert_eq!(config.grpc, Some(Default::default()));
///
/// let error = toml::from_str::<HttpJudgeConfig>("[grpc.codes]\nNOPE = \"failure\"").unwrap_err();
/// assert!(error.to_string().contains("grpc.codes.\"NOPE\": unknown gRPC code"), "{error}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrpcConfig {
    /// A verdict per code, over the defaults.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        with = "codes_map"
    )]
    pub codes: BTreeMap<GrpcCode, Verdict>,
}

/// `grpc.codes` as a map from code to verdict; errors name the entry.
mod codes_map {
    use super::*;

    pub(super) fn serialize<S: Serializer>(
        map: &BTreeMap<GrpcCode, Verdict>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let mut out = s.serialize_map(Some(map.len()))?;
        for (code, verdict) in map {
            out.serialize_entry(code.name(), verdict.as_str())?;
        }
        out.end()
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<GrpcCode, Verdict>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = BTreeMap<GrpcCode, Verdict>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map from gRPC code (UNAVAILABLE, 14) to verdict")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
                let mut map = BTreeMap::new();
                while let Some(key) = access.next_key::<StringOrNumber>()? {
                    let key = key.0;
                    let value = access.next_value::<StringOrNumber>()?.0;
                    let at = |m: String| de::Error::custom(format!("grpc.codes.\"{key}\": {m}"));
                    let code = GrpcCode::parse(&key).map_err(at)?;
                    let verdict = parse_verdict(&value).map_err(at)?;
                    if map.insert(code, verdict).is_some() {
                        return Err(at(format!("{code} is given twice")));
                    }
                }
                Ok(map)
            }
        }
        d.deserialize_map(V)
    }
}

/// The `grpc` key of a judge config: `true` (the defaults), `false` (off, as when left
/// out) or a table ([`GrpcConfig`]).
pub(crate) mod switch {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(
        value: &Option<GrpcConfig>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(config) if config.codes.is_empty() => s.serialize_bool(true),
            Some(config) => config.serialize(s),
            None => s.serialize_bool(false),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<GrpcConfig>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Option<GrpcConfig>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("true, false or a table of gRPC rules")
            }
            fn visit_bool<E: de::Error>(self, on: bool) -> Result<Self::Value, E> {
                Ok(on.then(GrpcConfig::default))
            }
            fn visit_map<A: MapAccess<'de>>(self, access: A) -> Result<Self::Value, A::Error> {
                GrpcConfig::deserialize(de::value::MapAccessDeserializer::new(access)).map(Some)
            }
        }
        d.deserialize_any(V)
            .map_err(|e| de::Error::custom(prefixed(e.to_string())))
    }

    /// Errors from inside name the whole key; others get `grpc: ` before them.
    fn prefixed(message: String) -> String {
        if message.starts_with("grpc.") {
            message
        } else {
            format!("grpc: {message}")
        }
    }
}
