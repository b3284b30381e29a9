//! The judge configured from TOML and YAML, and bad configs.
#![allow(clippy::unwrap_used)] // tests and their helpers unwrap

use std::time::Duration;

use breakerbox::Verdict;
use breakerbox_http::{parse_duration, HttpJudge, HttpJudgeConfig, HumanDuration, StatusSelector};
use http::{HeaderMap, StatusCode};

const TOML: &str = r#"
client_errors = "failure"
slow_threshold = "800ms"
probe_slow_threshold = "300ms"
honor_retry_after = true
body_cap = 1024

[status]
"404" = "ignore"
"500-504" = "failure"
"5xx" = "ignore"

[business]
pointers = ["/error_code", "/error/code"]
failure_codes = ["E001", "E002", 3]
success_codes = ["OK"]
statuses = ["2xx", "409"]
"#;

const YAML: &str = r#"
client_errors: failure
slow_threshold: 800ms
probe_slow_threshold: 300ms
honor_retry_after: true
body_cap: 1024
status:
  404: ignore
  "500-504": failure
  5xx: ignore
business:
  pointers: [/error_code, /error/code]
  failure_codes: [E001, E002, 3]
  success_codes: [OK]
  statuses: [2xx, 409]
"#;

fn check_full_config(config: HttpJudgeConfig) {
    assert_eq!(config.slow_threshold, Some(Duration::from_millis(800)));
    assert_eq!(
        config.status.get(&StatusSelector::Code(404)),
        Some(&Verdict::Ignore)
    );
    assert_eq!(
        config.status.get(&StatusSelector::Range(500, 504)),
        Some(&Verdict::Failure)
    );
    let judge = HttpJudge::from_config(config).unwrap();
    let h = HeaderMap::new();
    let fast = Duration::from_millis(5);
    let v = |code: u16| {
        judge
            .judge_status(StatusCode::from_u16(code).unwrap(), &h, fast, false)
            .verdict
    };
    assert_eq!(v(400), Verdict::Failure);
    assert_eq!(v(404), Verdict::Ignore);
    assert_eq!(v(503), Verdict::Failure);
    assert_eq!(v(505), Verdict::Ignore);
    assert_eq!(judge.body_cap(), 1024);
    assert!(judge.wants_body(StatusCode::CONFLICT));
    let body = |b: &[u8], code: u16| {
        judge
            .judge_response(
                StatusCode::from_u16(code).unwrap(),
                &h,
                Some(b),
                fast,
                false,
            )
            .verdict
    };
    assert_eq!(body(br#"{"error":{"code":3}}"#, 200), Verdict::Failure);
    assert_eq!(body(br#"{"error_code":"OK"}"#, 409), Verdict::Success);
    let probe = judge.judge_status(StatusCode::OK, &h, Duration::from_millis(400), true);
    assert_eq!(probe.reason, "slow 400ms > 300ms");
    let mut limited = HeaderMap::new();
    limited.insert(http::header::RETRY_AFTER, "7".parse().unwrap());
    let j = judge.judge_status(StatusCode::TOO_MANY_REQUESTS, &limited, fast, false);
    assert_eq!(j.retry_after, Some(Duration::from_secs(7)));
}

#[test]
fn a_toml_config_sets_every_rule() {
    check_full_config(toml::from_str(TOML).unwrap());
}

#[test]
fn a_yaml_config_sets_every_rule() {
    check_full_config(serde_yaml::from_str(YAML).unwrap());
}

#[test]
fn toml_and_yaml_give_the_same_config() {
    let a: HttpJudgeConfig = toml::from_str(TOML).unwrap();
    let b: HttpJudgeConfig = serde_yaml::from_str(YAML).unwrap();
    assert_eq!(a, b);
}

#[test]
fn a_config_survives_a_round_trip_through_toml_and_yaml() {
    let config: HttpJudgeConfig = toml::from_str(TOML).unwrap();
    let text = toml::to_string(&config).unwrap();
    assert!(text.contains("slow_threshold = \"800ms\""), "{text}");
    assert_eq!(toml::from_str::<HttpJudgeConfig>(&text).unwrap(), config);
    let text = serde_yaml::to_string(&config).unwrap();
    assert_eq!(
        serde_yaml::from_str::<HttpJudgeConfig>(&text).unwrap(),
        config
    );
}

#[test]
fn an_empty_config_is_the_default_judge() {
    let config: HttpJudgeConfig = toml::from_str("").unwrap();
    assert_eq!(config, HttpJudgeConfig::default());
    let judge = HttpJudge::from_config(config).unwrap();
    let v = judge.status_verdict(StatusCode::BAD_REQUEST);
    assert_eq!(v, Verdict::Ignore);
}

#[test]
fn one_line_of_toml_makes_every_4xx_a_failure() {
    let config: HttpJudgeConfig = toml::from_str(r#"client_errors = "failure""#).unwrap();
    let judge = HttpJudge::from_config(config).unwrap();
    assert_eq!(
        judge.status_verdict(StatusCode::NOT_FOUND),
        Verdict::Failure
    );
    assert_eq!(
        judge.status_verdict(StatusCode::IM_A_TEAPOT),
        Verdict::Failure
    );
}

#[test]
fn the_builder_and_the_config_agree() {
    let built = HttpJudge::builder()
        .client_errors(Verdict::Failure)
        .status("404", Verdict::Ignore)
        .slow_threshold(Duration::from_millis(800))
        .to_config();
    let read: HttpJudgeConfig = toml::from_str(
        "client_errors = \"failure\"\nslow_threshold = \"800ms\"\n[status]\n\"404\" = \"ignore\"\n",
    )
    .unwrap();
    assert_eq!(built, read);
}

/// Each bad TOML config and the text its error must contain.
const BAD_TOML: &[(&str, &str)] = &[
    (
        "[status]\n\"6xx\" = \"failure\"",
        "status.\"6xx\": unknown status class \"6xx\"",
    ),
    (
        "[status]\n\"404\" = \"fail\"",
        "status.\"404\": unknown verdict \"fail\"",
    ),
    (
        "[status]\n\"599-500\" = \"failure\"",
        "status.\"599-500\": empty status range",
    ),
    (
        "slow_threshold = \"fast\"",
        "slow_threshold: invalid duration \"fast\"",
    ),
    (
        "slow_threshold = \"800\"",
        "slow_threshold: invalid duration \"800\"",
    ),
    (
        "slow_threshold = 800",
        "slow_threshold: invalid duration 800",
    ),
    (
        "probe_slow_threshold = \"1y\"",
        "probe_slow_threshold: invalid duration \"1y\"",
    ),
    (
        "client_errors = \"maybe\"",
        "client_errors: unknown verdict \"maybe\"",
    ),
    (
        "server_errors = true",
        "server_errors: unknown verdict \"true\"",
    ),
    ("slow_treshold = \"800ms\"", "unknown field `slow_treshold`"),
    ("body_cap = -1", "body_cap"),
    (
        "[business]\npointers = [\"/c\"]\nfailure_codes = [\"E1\"]\nstatus = [\"2xx\"]",
        "unknown field `status`",
    ),
    (
        "[business]\npointers = [\"/c\"]\nfailure_codes = [\"E1\"]\nstatuses = [\"9xx\"]",
        "unknown status class \"9xx\"",
    ),
    (
        "[business]\npointers = [\"/c\"]\nfailure_codes = [\"E1\"]\nother_codes = \"nope\"",
        "business.other_codes: unknown verdict \"nope\"",
    ),
];

#[test]
fn bad_toml_configs_name_the_key_and_the_value() {
    for (text, expected) in BAD_TOML {
        let error = toml::from_str::<HttpJudgeConfig>(text)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(expected),
            "{text:?}: expected {expected:?} in {error}"
        );
    }
}

#[test]
fn bad_yaml_configs_name_the_key_and_the_value() {
    let cases = [
        (
            "status:\n  6xx: failure",
            "status.\"6xx\": unknown status class \"6xx\"",
        ),
        (
            "status:\n  404: nope",
            "status.\"404\": unknown verdict \"nope\"",
        ),
        (
            "slow_threshold: fast",
            "slow_threshold: invalid duration \"fast\"",
        ),
        (
            "client_errors: faillure",
            "client_errors: unknown verdict \"faillure\"",
        ),
        (
            "honour_retry_after: true",
            "unknown field `honour_retry_after`",
        ),
    ];
    for (text, expected) in cases {
        let error = serde_yaml::from_str::<HttpJudgeConfig>(text)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(expected),
            "{text:?}: expected {expected:?} in {error}"
        );
    }
}

#[test]
fn configs_that_parse_but_make_no_sense_are_refused_by_the_judge() {
    let cases = [
        (
            "slow_threshold = \"300ms\"\nprobe_slow_threshold = \"1s\"",
            "probe_slow_threshold: 1s is more lenient",
        ),
        (
            "slow_threshold = \"0s\"",
            "slow_threshold: must be more than zero",
        ),
        ("body_cap = 0", "body_cap: must be at least 1 byte"),
        (
            "[business]\npointers = []\nfailure_codes = [\"E1\"]",
            "business.pointers: at least one",
        ),
        (
            "[business]\npointers = [\"/a\", \"b\"]\nfailure_codes = [\"E1\"]",
            "business.pointers[1]: invalid JSON pointer \"b\"",
        ),
        (
            "[business]\npointers = [\"/a\"]",
            "business.failure_codes: no business codes",
        ),
    ];
    for (text, expected) in cases {
        let config: HttpJudgeConfig = toml::from_str(text).unwrap();
        let error = HttpJudge::from_config(config).unwrap_err().to_string();
        assert!(
            error.starts_with(expected),
            "{text:?}: expected {expected:?}, got {error}"
        );
    }
}

#[test]
fn durations_parse_in_every_unit_and_print_short() {
    let cases = [
        ("10ns", Duration::from_nanos(10)),
        ("250us", Duration::from_micros(250)),
        ("250µs", Duration::from_micros(250)),
        ("800ms", Duration::from_millis(800)),
        ("1.5s", Duration::from_millis(1500)),
        (".5s", Duration::from_millis(500)),
        ("2m", Duration::from_secs(120)),
        ("1h", Duration::from_secs(3600)),
        ("1m30s", Duration::from_secs(90)),
        (" 1m 30s ", Duration::from_secs(90)),
        ("0s", Duration::ZERO),
    ];
    for (text, expected) in cases {
        assert_eq!(parse_duration(text), Some(expected), "{text}");
    }
    for bad in [
        "",
        "fast",
        "10",
        "ms",
        "1.2.3s",
        "-1s",
        "1d",
        "1 s",
        "99999999999999999999h",
    ] {
        assert_eq!(parse_duration(bad), None, "{bad:?}");
    }
    let shown = [
        (Duration::from_millis(1200), "1.2s"),
        (Duration::from_millis(800), "800ms"),
        (Duration::from_micros(1500), "1.5ms"),
        (Duration::from_secs(90), "90s"),
        (Duration::from_nanos(10), "10ns"),
        (Duration::from_micros(250), "250us"),
        (Duration::from_millis(1234), "1.234s"),
    ];
    for (duration, text) in shown {
        assert_eq!(HumanDuration(duration).to_string(), text);
        assert_eq!(parse_duration(text), Some(duration));
    }
}

#[test]
fn a_probe_threshold_equal_to_the_slow_threshold_is_accepted() {
    let config: HttpJudgeConfig =
        toml::from_str("slow_threshold = \"300ms\"\nprobe_slow_threshold = \"300ms\"").unwrap();
    let judge = HttpJudge::from_config(config).unwrap();
    assert_eq!(
        judge.slow_threshold_for(true),
        Some(Duration::from_millis(300))
    );
}
