//! A Redis breaker's options as a config file table (feature `serde`).

use std::fmt;
use std::time::Duration;

use breakerbox::config::{serde_duration, HumanDuration};
use serde::de::{self, Deserializer, Visitor};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};

use super::{Backoff, Fallback, LocalView, Mode};
use crate::store::{process_node_id, StoreOptions};

/// Everything a [`RedisBreaker`](crate::RedisBreaker) takes besides its name, URL and
/// breaker [`Config`](breakerbox::Config), as one table of a config file; apply it with
/// [`RedisBreakerBuilder::options`](crate::RedisBreakerBuilder::options). Every key is
/// optional (the builder's defaults), unknown keys are refused and every error names its
/// key; durations are text with a unit, as in the core's config files:
///
/// ```toml
/// prefix = "bb:"                 # keys live at {prefix}{name}
/// ttl = "24h"                    # an abandoned breaker's hash expires after this
/// timeout = "100ms"              # bound on every Redis operation
/// probe_lease = "2s"             # how long a half-open probe slot stays reserved
/// mode = "local_view"            # or "strict" (every decision in Redis)
/// node_id = "web-3"              # rule 21's node identity: a name (hashed) or an integer
///                                # above 0; default: random per process
/// fallback = "local_breaker"     # or "fail_open", "fail_closed", while Redis is away
///
/// [local_view]                   # only with mode = "local_view"
/// flush_interval = "1s"
/// failure_flush_interval = "0s"
/// batch_size = 2000
/// refresh_interval = "1s"
///
/// [backoff]                      # reconnection delays while Redis is away
/// min = "50ms"
/// max = "2s"
/// ```
///
/// ```
/// use breakerbox_redis::{Fallback, Mode, RedisOptions};
/// use std::time::Duration;
///
/// let options: RedisOptions = toml::from_str(r#"
///     timeout = "250ms"
///     fallback = "fail_open"
///     [local_view]
///     flush_interval = "200ms"
/// "#)?;
/// assert_eq!(options.store.timeout, Duration::from_millis(250));
/// assert_eq!(options.fallback, Fallback::FailOpen);
/// let Mode::LocalView(view) = options.mode else { panic!("local view is the default") };
/// assert_eq!(view.flush_interval, Duration::from_millis(200));
///
/// let err = toml::from_str::<RedisOptions>("timeout = 100").unwrap_err();
/// assert!(err.message().starts_with("timeout: invalid duration 100"), "{err}");
/// # Ok::<(), toml::de::Error>(())
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisOptions {
    /// `prefix`, `ttl`, `timeout` and `probe_lease`.
    pub store: StoreOptions,
    /// `mode`, and the `[local_view]` table.
    pub mode: Mode,
    /// `fallback`.
    pub fallback: Fallback,
    /// The `[backoff]` table.
    pub backoff: Backoff,
}

/// The table as written; turned into [`RedisOptions`] (and checked) after reading.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Table {
    prefix: String,
    #[serde(serialize_with = "serde_duration::serialize", deserialize_with = "ttl")]
    ttl: Duration,
    #[serde(
        serialize_with = "serde_duration::serialize",
        deserialize_with = "timeout"
    )]
    timeout: Duration,
    #[serde(
        serialize_with = "serde_duration::serialize",
        deserialize_with = "probe_lease"
    )]
    probe_lease: Duration,
    mode: ModeName,
    fallback: Fallback,
    #[serde(skip_serializing_if = "Option::is_none")]
    local_view: Option<LocalView>,
    backoff: Backoff,
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "node_id")]
    node_id: Option<u64>,
}

impl Default for Table {
    fn default() -> Table {
        let store = StoreOptions::default();
        Table {
            prefix: store.prefix,
            ttl: store.ttl,
            timeout: store.timeout,
            probe_lease: store.probe_lease,
            mode: ModeName::LocalView,
            fallback: Fallback::default(),
            local_view: None,
            backoff: Backoff::default(),
            node_id: None,
        }
    }
}

duration_keys!(ttl => "ttl", timeout => "timeout", probe_lease => "probe_lease");

impl Serialize for RedisOptions {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (mode, local_view) = match self.mode {
            Mode::Strict => (ModeName::Strict, None),
            Mode::LocalView(view) => (ModeName::LocalView, Some(view)),
        };
        Table {
            prefix: self.store.prefix.clone(),
            ttl: self.store.ttl,
            timeout: self.store.timeout,
            probe_lease: self.store.probe_lease,
            mode,
            fallback: self.fallback,
            local_view,
            backoff: self.backoff,
            // The process's own random id is the default: written only when chosen.
            node_id: (self.store.node_id != process_node_id()).then_some(self.store.node_id),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RedisOptions {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<RedisOptions, D::Error> {
        let table = Table::deserialize(deserializer)?;
        for (key, value) in [
            ("ttl", table.ttl),
            ("timeout", table.timeout),
            ("probe_lease", table.probe_lease),
        ] {
            if value.is_zero() {
                return Err(de::Error::custom(format!(
                    "{key}: invalid value 0s (expected a duration above zero)"
                )));
            }
        }
        let mode =
            match (table.mode, table.local_view) {
                (ModeName::Strict, Some(_)) => return Err(de::Error::custom(
                    "local_view: set with mode = \"strict\" (it configures mode = \"local_view\")",
                )),
                (ModeName::Strict, None) => Mode::Strict,
                (ModeName::LocalView, view) => Mode::LocalView(view.unwrap_or_default()),
            };
        if let Mode::LocalView(view) = mode {
            if view.batch_size == 0 {
                return Err(de::Error::custom(
                    "local_view.batch_size: invalid value 0 (expected at least 1)",
                ));
            }
        }
        if table.backoff.min > table.backoff.max {
            return Err(de::Error::custom(format!(
                "backoff.min: invalid value {:#} (expected at most backoff.max, {:#})",
                HumanDuration(table.backoff.min),
                HumanDuration(table.backoff.max)
            )));
        }
        Ok(RedisOptions {
            store: StoreOptions {
                prefix: table.prefix,
                ttl: table.ttl,
                timeout: table.timeout,
                probe_lease: table.probe_lease,
                node_id: table.node_id.unwrap_or_else(process_node_id),
            },
            mode,
            fallback: table.fallback,
            backoff: table.backoff,
        })
    }
}

/// `node_id`: an integer above 0, or a non-empty name, which stands for its 64-bit FNV-1a
/// hash (so `node_id = "web-3"` names the same node in every process that says so).
fn node_id<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    struct NodeId;
    impl Visitor<'_> for NodeId {
        type Value = Option<u64>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("node_id: an integer above 0 or a non-empty name")
        }
        fn visit_i64<E: de::Error>(self, n: i64) -> Result<Option<u64>, E> {
            match u64::try_from(n) {
                Ok(id) if id > 0 => Ok(Some(id)),
                _ => Err(E::custom(format!(
                    "node_id: invalid value {n} (expected an integer above 0 or a name)"
                ))),
            }
        }
        fn visit_u64<E: de::Error>(self, n: u64) -> Result<Option<u64>, E> {
            if n == 0 {
                return self.visit_i64(0);
            }
            Ok(Some(n))
        }
        fn visit_f64<E: de::Error>(self, n: f64) -> Result<Option<u64>, E> {
            Err(E::custom(format!(
                "node_id: invalid value {n} (expected an integer above 0 or a name)"
            )))
        }
        fn visit_bool<E: de::Error>(self, b: bool) -> Result<Option<u64>, E> {
            Err(E::custom(format!(
                "node_id: invalid value {b} (expected an integer above 0 or a name)"
            )))
        }
        fn visit_str<E: de::Error>(self, name: &str) -> Result<Option<u64>, E> {
            if name.trim().is_empty() {
                return Err(E::custom(
                    "node_id: invalid value \"\" (expected an integer above 0 or a name)",
                ));
            }
            Ok(Some(node_id_of_name(name)))
        }
    }
    deserializer.deserialize_any(NodeId)
}

/// The node id a name in a config file stands for: its 64-bit FNV-1a hash, never 0.
pub(crate) fn node_id_of_name(name: &str) -> u64 {
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    hash.max(1)
}

/// `mode = "strict"` or `"local_view"`.
#[derive(Copy, Clone)]
enum ModeName {
    Strict,
    LocalView,
}

/// Reads one of a few names for key `key`; the error names the key and the choices.
fn named<'de, D: Deserializer<'de>, T: Copy>(
    key: &'static str,
    choices: &'static [(&'static str, T)],
    deserializer: D,
) -> Result<T, D::Error> {
    struct Names<T: 'static>(&'static str, &'static [(&'static str, T)]);
    impl<T: Copy> Visitor<'_> for Names<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "{}: one of {}", self.0, list(self.1))
        }
        fn visit_str<E: de::Error>(self, text: &str) -> Result<T, E> {
            match self.1.iter().find(|(name, _)| *name == text) {
                Some((_, value)) => Ok(*value),
                None => Err(E::custom(format!(
                    "{}: invalid value \"{text}\" (expected {})",
                    self.0,
                    list(self.1)
                ))),
            }
        }
    }
    deserializer.deserialize_str(Names(key, choices))
}

fn list<T>(choices: &[(&str, T)]) -> String {
    let names: Vec<String> = choices.iter().map(|(n, _)| format!("\"{n}\"")).collect();
    names.join(", ")
}

const MODES: &[(&str, ModeName)] = &[
    ("local_view", ModeName::LocalView),
    ("strict", ModeName::Strict),
];

const FALLBACKS: &[(&str, Fallback)] = &[
    ("local_breaker", Fallback::LocalBreaker),
    ("fail_open", Fallback::FailOpen),
    ("fail_closed", Fallback::FailClosed),
];

fn name_of<T: Copy + PartialEq>(choices: &'static [(&'static str, T)], value: T) -> &'static str {
    choices
        .iter()
        .find(|(_, v)| *v == value)
        .map_or("", |(name, _)| name)
}

impl Serialize for ModeName {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(match self {
            ModeName::Strict => "strict",
            ModeName::LocalView => "local_view",
        })
    }
}

impl<'de> Deserialize<'de> for ModeName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ModeName, D::Error> {
        named("mode", MODES, deserializer)
    }
}

/// Written `"local_breaker"`, `"fail_open"` or `"fail_closed"` (the `fallback` key).
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl Serialize for Fallback {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(name_of(FALLBACKS, *self))
    }
}

/// Reads `"local_breaker"`, `"fail_open"` or `"fail_closed"`; errors name the `fallback`
/// key.
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl<'de> Deserialize<'de> for Fallback {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Fallback, D::Error> {
        named("fallback", FALLBACKS, deserializer)
    }
}
