//! The judge's configuration as data: build it in code or read it from TOML, YAML or any
//! serde format.

mod fields;

pub(crate) use fields::{parse_verdict, StringOrNumber};

use std::collections::BTreeMap;
use std::time::Duration;

use breakerbox::Verdict;
use serde::{Deserialize, Serialize};

use crate::{GrpcConfig, StatusSelector};

/// Everything an [`crate::HttpJudge`] can be told, as plain data with serde support.
/// Durations are written like `800ms` or `1.5s`; verdicts as `failure`, `ignore` or
/// `success`; status keys as `429`, `500-599` or `5xx`. Unknown keys are refused.
///
/// ```
/// use breakerbox_http::{HttpJudge, HttpJudgeConfig};
/// use breakerbox::Verdict;
/// use std::time::Duration;
///
/// let config: HttpJudgeConfig = serde_json::from_str(r#"{
///     "client_errors": "failure",
///     "status": { "404": "ignore" },
///     "slow_threshold": "800ms",
///     "business": { "pointers": ["/error_code"], "failure_codes": ["E001"] }
/// }"#)?;
/// assert_eq!(config.slow_threshold, Some(Duration::from_millis(800)));
/// let judge = HttpJudge::from_config(config)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// The same in TOML:
///
/// ```toml
/// client_errors = "failure"          # every 4xx fails (408 and 429 fail anyway)
/// slow_threshold = "800ms"           # a slower response fails, even a 200
/// probe_slow_threshold = "300ms"     # stricter, for half-open probes only
/// honor_retry_after = true           # read Retry-After on 429 and 503 (and gRPC's
///                                     # grpc-retry-pushback-ms on failed gRPC answers)
/// body_cap = 65536                   # bytes of body read for business codes
///
/// [status]
/// "404" = "ignore"                   # a code beats a range, a range beats a class
/// "500-504" = "failure"
///
/// [business]
/// pointers = ["/error_code", "/error/code"]
/// failure_codes = ["E001", "E002", "E003"]
/// success_codes = ["OK"]
/// other_codes = "failure"            # a code in neither list fails
/// statuses = ["2xx"]                 # bodies of which responses are read (default 2xx)
///
/// [grpc.codes]                       # judge gRPC responses by grpc-status (or: grpc = true)
/// NOT_FOUND = "failure"              # by name in any case, or by number ("5")
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpJudgeConfig {
    /// Rules per code, range or class, over the defaults (5xx, 408 and 429 fail; other
    /// 4xx and other 1xx are ignored; 2xx, 3xx and 101 succeed).
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        with = "fields::status_map"
    )]
    pub status: BTreeMap<StatusSelector, Verdict>,
    /// Shorthand for `status."4xx"`: how 4xx responses count (codes and ranges still win).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "fields::client_errors"
    )]
    pub client_errors: Option<Verdict>,
    /// Shorthand for `status."5xx"`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "fields::server_errors"
    )]
    pub server_errors: Option<Verdict>,
    /// Business error codes read from the body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub business: Option<BusinessConfig>,
    /// A response slower than this (strictly) fails, even a 200.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "fields::slow_threshold"
    )]
    pub slow_threshold: Option<Duration>,
    /// A stricter threshold for half-open probes; must not exceed `slow_threshold`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "fields::probe_slow_threshold"
    )]
    pub probe_slow_threshold: Option<Duration>,
    /// Read `Retry-After` (in seconds) on 429 and 503 into [`crate::Judgement::retry_after`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub honor_retry_after: bool,
    /// How many bytes of a body are read for business codes (default 64 KiB). A bigger
    /// body is judged without its content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_cap: Option<usize>,
    /// Judge gRPC responses by their `grpc-status` ([`GrpcConfig`]): `grpc = true` for the
    /// defaults (UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, INTERNAL, UNKNOWN and
    /// DATA_LOSS fail, OK succeeds, the rest is ignored), or a table with per-code rules
    /// (`[grpc.codes]`, `NOT_FOUND = "failure"`). Off when left out.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::grpc::switch"
    )]
    pub grpc: Option<GrpcConfig>,
}

/// Business error codes in a JSON body: where to look and which codes mean what.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BusinessConfig {
    /// JSON pointers tried in order (`/error_code`, `/error/code`); the first that holds a
    /// string or a number gives the code. Numbers compare by their string form.
    pub pointers: Vec<String>,
    /// Codes that make the response a failure.
    #[serde(default, with = "fields::code_list")]
    pub failure_codes: Vec<String>,
    /// Codes that make the response a success.
    #[serde(default, with = "fields::code_list")]
    pub success_codes: Vec<String>,
    /// How a code found in neither list counts; unset, the status decides.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "fields::other_codes"
    )]
    pub other_codes: Option<Verdict>,
    /// The responses whose bodies are read (default `["2xx"]`).
    #[serde(default = "default_business_statuses")]
    pub statuses: Vec<StatusSelector>,
}

impl Default for BusinessConfig {
    fn default() -> Self {
        BusinessConfig {
            pointers: Vec::new(),
            failure_codes: Vec::new(),
            success_codes: Vec::new(),
            other_codes: None,
            statuses: default_business_statuses(),
        }
    }
}

fn default_business_statuses() -> Vec<StatusSelector> {
    vec![StatusSelector::Class(2)]
}
