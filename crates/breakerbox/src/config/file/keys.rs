//! Serde for the keys whose values are text: durations and the window. Each error names
//! its key.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::ser::Serializer;

use super::keyed_message;
use crate::config::{serde_duration, WindowKind};

macro_rules! duration_key {
    ($name:ident) => {
        pub(super) mod $name {
            use super::*;

            pub(crate) fn serialize<S: Serializer>(
                value: &Option<Duration>,
                s: S,
            ) -> Result<S::Ok, S::Error> {
                match value {
                    Some(v) => serde_duration::serialize(v, s),
                    None => s.serialize_none(),
                }
            }

            pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
                d: D,
            ) -> Result<Option<Duration>, D::Error> {
                serde_duration::deserialize(stringify!($name), d).map(Some)
            }
        }
    };
}

duration_key!(slow_call_threshold);
duration_key!(recovery_timeout);
duration_key!(max_open_duration);
duration_key!(half_open_timeout);
duration_key!(call_timeout);
duration_key!(probe_timeout);
duration_key!(ramp_duration);

/// The `window` key: `count:N`, `time:DURATION` or `time:DURATION/BUCKETS`.
pub(super) mod window {
    use super::*;

    struct WindowText;

    impl Visitor<'_> for WindowText {
        type Value = Option<WindowKind>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("window: text such as \"count:100\" or \"time:10s/20\"")
        }

        fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
            text.parse()
                .map(Some)
                .map_err(|e| E::custom(keyed_message(&e)))
        }
    }

    pub(crate) fn serialize<S: Serializer>(
        value: &Option<WindowKind>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(w) => s.collect_str(w),
            None => s.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<WindowKind>, D::Error> {
        d.deserialize_str(WindowText)
    }
}
