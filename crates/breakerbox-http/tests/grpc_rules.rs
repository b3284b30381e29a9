//! The gRPC judge: every code's default, names and numbers, overrides from code and from
//! config files, missing and malformed statuses, latency, and the exchange's wait for the
//! trailers.
#![allow(clippy::unwrap_used)] // tests unwrap

use std::collections::BTreeMap;
use std::time::Duration;

use breakerbox::Verdict;
use breakerbox_http::{
    grpc_default_verdict, AfterHead, GrpcCode, GrpcConfig, GrpcJudge, GrpcStatus, HttpJudge,
    HttpJudgeConfig, TransportError,
};
use http::{HeaderMap, HeaderValue, StatusCode};
use proptest::prelude::*;

const FAST: Duration = Duration::from_millis(5);

fn status(code: &str) -> HeaderMap {
    let mut map = HeaderMap::new();
    map.insert("grpc-status", HeaderValue::from_str(code).unwrap());
    map
}

fn grpc_head() -> HeaderMap {
    let mut map = HeaderMap::new();
    map.insert("content-type", HeaderValue::from_static("application/grpc"));
    map
}

/// The table of the defaults, as the issue and the docs state it.
const DEFAULTS: [(u8, &str, Verdict); 17] = [
    (0, "OK", Verdict::Success),
    (1, "CANCELLED", Verdict::Ignore),
    (2, "UNKNOWN", Verdict::Failure),
    (3, "INVALID_ARGUMENT", Verdict::Ignore),
    (4, "DEADLINE_EXCEEDED", Verdict::Failure),
    (5, "NOT_FOUND", Verdict::Ignore),
    (6, "ALREADY_EXISTS", Verdict::Ignore),
    (7, "PERMISSION_DENIED", Verdict::Ignore),
    (8, "RESOURCE_EXHAUSTED", Verdict::Failure),
    (9, "FAILED_PRECONDITION", Verdict::Ignore),
    (10, "ABORTED", Verdict::Ignore),
    (11, "OUT_OF_RANGE", Verdict::Ignore),
    (12, "UNIMPLEMENTED", Verdict::Ignore),
    (13, "INTERNAL", Verdict::Failure),
    (14, "UNAVAILABLE", Verdict::Failure),
    (15, "DATA_LOSS", Verdict::Failure),
    (16, "UNAUTHENTICATED", Verdict::Ignore),
];

#[test]
fn every_code_has_its_documented_default_by_number_and_by_name() {
    let judge = HttpJudge::builder().grpc(true).build().unwrap();
    for (number, name, verdict) in DEFAULTS {
        let code = GrpcCode::from_number(u32::from(number)).unwrap();
        assert_eq!(code.name(), name);
        assert_eq!(grpc_default_verdict(code), verdict, "{name}");
        assert_eq!(GrpcJudge::default().verdict(code), verdict, "{name}");
        let j = judge.judge_grpc(Some(&status(&number.to_string())), FAST, false);
        assert_eq!(j.verdict, verdict, "{name}");
        assert_eq!(j.reason, format!("grpc {name}"));
        assert_eq!(name.parse::<GrpcCode>().unwrap(), code);
        assert_eq!(name.to_lowercase().parse::<GrpcCode>().unwrap(), code);
    }
}

#[test]
fn a_missing_or_malformed_status_at_the_end_of_the_stream_is_a_failure() {
    let judge = HttpJudge::builder().grpc(true).build().unwrap();
    let j = judge.judge_grpc(None, FAST, false);
    assert_eq!(
        (j.verdict, j.reason.as_ref()),
        (Verdict::Failure, "grpc-status missing")
    );
    let j = judge.judge_grpc(Some(&HeaderMap::new()), FAST, false);
    assert_eq!(
        (j.verdict, j.reason.as_ref()),
        (Verdict::Failure, "grpc-status missing")
    );
    for bad in ["UNAVAILABLE", "1 4", "-1", "+0", ""] {
        let j = judge.judge_grpc(Some(&status(bad)), FAST, false);
        assert_eq!(
            (j.verdict, j.reason.as_ref()),
            (Verdict::Failure, "grpc-status invalid"),
            "{bad:?}"
        );
    }
    // A number that is no code is UNKNOWN, as gRPC clients read it.
    let j = judge.judge_grpc(Some(&status("17")), FAST, false);
    assert_eq!(
        (j.verdict, j.reason.as_ref()),
        (Verdict::Failure, "grpc UNKNOWN")
    );
}

#[test]
fn a_slow_ok_fails_and_a_probe_has_the_stricter_threshold() {
    let judge = HttpJudge::builder()
        .grpc(true)
        .slow_threshold(Duration::from_millis(800))
        .probe_slow_threshold(Duration::from_millis(300))
        .build()
        .unwrap();
    let ok = status("0");
    let at = |ms, probe| judge.judge_grpc(Some(&ok), Duration::from_millis(ms), probe);
    assert_eq!(at(800, false).verdict, Verdict::Success);
    assert_eq!(at(801, false).reason, "slow 801ms > 800ms");
    assert_eq!(at(301, true).reason, "slow 301ms > 300ms");
    assert_eq!(at(300, true).verdict, Verdict::Success);
    // An ignored code stays ignored however slow.
    let j = judge.judge_grpc(Some(&status("5")), Duration::from_secs(9), false);
    assert_eq!(j.verdict, Verdict::Ignore);
}

#[test]
fn a_non_200_grpc_response_is_judged_by_the_http_rules() {
    let judge = HttpJudge::builder().grpc(true).build().unwrap();
    let mut head = grpc_head();
    head.insert("grpc-status", HeaderValue::from_static("0"));
    let mut exchange = judge.exchange(false);
    let after = exchange.on_head(StatusCode::SERVICE_UNAVAILABLE, &head, FAST);
    assert!(
        matches!(after, AfterHead::Judged(j) if j.reason == "status 503" && j.verdict == Verdict::Failure)
    );
    let j = judge.judge_status(StatusCode::NOT_FOUND, &head, FAST, false);
    assert_eq!(
        (j.verdict, j.reason.as_ref()),
        (Verdict::Ignore, "status 404")
    );
    // A 200 that is not gRPC is an HTTP response.
    let j = judge.judge_status(StatusCode::OK, &HeaderMap::new(), FAST, false);
    assert_eq!(j.reason, "status 200");
}

#[test]
fn without_grpc_rules_a_grpc_response_is_judged_by_its_http_status() {
    let judge = HttpJudge::default();
    let mut exchange = judge.exchange(false);
    let after = exchange.on_head(StatusCode::OK, &grpc_head(), FAST);
    assert!(matches!(after, AfterHead::Judged(j) if j.reason == "status 200"));
}

#[test]
fn the_exchange_waits_for_the_trailers_and_judges_them() {
    let judge = HttpJudge::builder()
        .grpc(true)
        .slow_threshold(Duration::from_millis(100))
        .build()
        .unwrap();
    let mut exchange = judge.exchange(false);
    assert_eq!(
        exchange.on_head(StatusCode::OK, &grpc_head(), Duration::from_millis(150)),
        AfterHead::AwaitTrailers
    );
    // Latency is the time to the head: a slow OK fails at the end.
    let j = exchange.on_trailers(Some(&status("0")));
    assert_eq!(
        (j.verdict, j.reason.as_ref()),
        (Verdict::Failure, "slow 150ms > 100ms")
    );
    assert_eq!(exchange.latency(), Duration::from_millis(150));

    let mut exchange = judge.exchange(false);
    let _ = exchange.on_head(StatusCode::OK, &grpc_head(), FAST);
    let j = exchange.on_trailers(None);
    assert_eq!(j.reason, "grpc-status missing");
    // A body that ended without trailers, told as a body.
    let mut exchange = judge.exchange(false);
    let _ = exchange.on_head(StatusCode::OK, &grpc_head(), FAST);
    assert_eq!(exchange.on_body(None).reason, "grpc-status missing");
    // A body that broke before its end.
    let mut exchange = judge.exchange(false);
    let _ = exchange.on_head(StatusCode::OK, &grpc_head(), FAST);
    let j = exchange.on_body_error(TransportError::Reset);
    assert_eq!(
        (j.verdict, j.reason.as_ref()),
        (Verdict::Failure, "transport: body read failed")
    );
    // Trailers after an HTTP head say nothing: the head's judgement.
    let mut exchange = judge.exchange(false);
    let _ = exchange.on_head(StatusCode::OK, &HeaderMap::new(), FAST);
    assert_eq!(
        exchange.on_trailers(Some(&status("14"))).reason,
        "status 200"
    );
}

#[test]
fn overrides_come_from_config_files_with_names_or_numbers() {
    let toml_text = r#"
        [grpc.codes]
        not_found = "failure"
        "14" = "ignore"
        ABORTED = "success"
    "#;
    let yaml_text =
        "grpc:\n  codes:\n    not_found: failure\n    14: ignore\n    ABORTED: success\n";
    for config in [
        toml::from_str::<HttpJudgeConfig>(toml_text).unwrap(),
        serde_yaml::from_str::<HttpJudgeConfig>(yaml_text).unwrap(),
    ] {
        let judge = HttpJudge::from_config(config.clone()).unwrap();
        let grpc = judge.grpc().unwrap();
        assert_eq!(grpc.verdict(GrpcCode::NotFound), Verdict::Failure);
        assert_eq!(grpc.verdict(GrpcCode::Unavailable), Verdict::Ignore);
        assert_eq!(grpc.verdict(GrpcCode::Aborted), Verdict::Success);
        assert_eq!(grpc.verdict(GrpcCode::Internal), Verdict::Failure);
        // It reads back as it was written.
        let text = toml::to_string(&config).unwrap();
        assert_eq!(
            toml::from_str::<HttpJudgeConfig>(&text).unwrap(),
            config,
            "{text}"
        );
    }
    let on = toml::from_str::<HttpJudgeConfig>("grpc = true").unwrap();
    assert_eq!(on.grpc, Some(GrpcConfig::default()));
    assert_eq!(toml::to_string(&on).unwrap().trim(), "grpc = true");
    assert_eq!(
        toml::from_str::<HttpJudgeConfig>("grpc = false")
            .unwrap()
            .grpc,
        None
    );
}

#[test]
fn a_bad_grpc_rule_names_its_key() {
    let cases = [
        (
            "[grpc.codes]\nNOPE = \"failure\"",
            "grpc.codes.\"NOPE\": unknown gRPC code \"NOPE\"",
        ),
        (
            "[grpc.codes]\n\"17\" = \"failure\"",
            "grpc.codes.\"17\": unknown gRPC code 17",
        ),
        (
            "[grpc.codes]\nNOT_FOUND = \"fail\"",
            "grpc.codes.\"NOT_FOUND\": unknown verdict \"fail\"",
        ),
        (
            "[grpc.codes]\nNOT_FOUND = \"failure\"\n\"5\" = \"ignore\"",
            "NOT_FOUND is given twice",
        ),
        ("[grpc]\ncode = {}", "grpc: unknown field `code`"),
        ("grpc = 1", "grpc: invalid type"),
    ];
    for (text, expected) in cases {
        let error = toml::from_str::<HttpJudgeConfig>(text)
            .unwrap_err()
            .to_string();
        assert!(error.contains(expected), "{text:?}: {error}");
    }
    let error = HttpJudge::builder()
        .grpc_code("17", Verdict::Failure)
        .build()
        .unwrap_err();
    assert_eq!(error.key(), "grpc.codes.\"17\"");
    assert_eq!(error.value(), "17");
}

#[test]
fn turning_grpc_off_drops_its_rules() {
    let judge = HttpJudge::builder()
        .grpc_code("NOT_FOUND", Verdict::Failure)
        .grpc(false)
        .build()
        .unwrap();
    assert!(judge.grpc().is_none());
    let judge = HttpJudge::builder()
        .grpc_code("NOT_FOUND", Verdict::Failure)
        .grpc(true)
        .build()
        .unwrap();
    assert_eq!(
        judge.grpc().unwrap().verdict(GrpcCode::NotFound),
        Verdict::Failure
    );
}

fn verdict() -> impl Strategy<Value = Verdict> {
    prop_oneof![
        Just(Verdict::Failure),
        Just(Verdict::Ignore),
        Just(Verdict::Success)
    ]
}

proptest! {
    #[test]
    fn names_and_numbers_round_trip(n in 0u32..17, lower in any::<bool>()) {
        let code = GrpcCode::from_number(n).unwrap();
        prop_assert_eq!(u32::from(code.number()), n);
        let name = if lower { code.name().to_lowercase() } else { code.name().to_owned() };
        prop_assert_eq!(name.parse::<GrpcCode>().unwrap(), code);
        prop_assert_eq!(n.to_string().parse::<GrpcCode>().unwrap(), code);
        prop_assert_eq!(GrpcStatus::from_headers(&status(&n.to_string())), GrpcStatus::Code(code));
    }

    #[test]
    fn overrides_win_and_the_rest_keep_their_defaults(
        rules in proptest::collection::btree_map(0u32..17, verdict(), 0..17),
        n in 0u32..17,
    ) {
        let codes: BTreeMap<GrpcCode, Verdict> = rules
            .iter()
            .map(|(n, v)| (GrpcCode::from_number(*n).unwrap(), *v))
            .collect();
        let config = HttpJudgeConfig { grpc: Some(GrpcConfig { codes: codes.clone() }), ..Default::default() };
        // Through a config file, as a user would write it.
        let text = toml::to_string(&config).unwrap();
        let judge = HttpJudge::from_config(toml::from_str(&text).unwrap()).unwrap();
        let code = GrpcCode::from_number(n).unwrap();
        let expected = codes.get(&code).copied().unwrap_or_else(|| grpc_default_verdict(code));
        prop_assert_eq!(judge.judge_grpc(Some(&status(&n.to_string())), FAST, false).verdict, expected);
    }

    #[test]
    fn any_status_value_is_judged_without_panicking(value in "[ -~]{0,24}") {
        let judge = HttpJudge::builder().grpc(true).build().unwrap();
        let Ok(value) = HeaderValue::from_str(&value) else { return Ok(()) };
        let mut trailers = HeaderMap::new();
        trailers.insert("grpc-status", value.clone());
        trailers.insert("grpc-message", value);
        let j = judge.judge_grpc(Some(&trailers), FAST, false);
        let digits = !trailers["grpc-status"].is_empty()
            && trailers["grpc-status"].as_bytes().iter().all(u8::is_ascii_digit);
        prop_assert_eq!(j.reason == "grpc-status invalid", !digits);
        prop_assert!(j.reason.len() <= "grpc FAILED_PRECONDITION: ".len() + 128);
    }
}

#[test]
fn a_retry_pushback_on_a_failed_grpc_answer_is_its_retry_hint_when_honoured() {
    let honouring = HttpJudge::builder()
        .grpc(true)
        .honor_retry_after(true)
        .build()
        .unwrap();
    let mut trailers = status("14");
    trailers.insert("grpc-retry-pushback-ms", HeaderValue::from_static("1500"));
    let j = honouring.judge_grpc(Some(&trailers), FAST, false);
    assert_eq!(j.verdict, Verdict::Failure);
    assert_eq!(j.retry_after, Some(Duration::from_millis(1500)));
    // From the trailers at the end of a stream, through the exchange.
    let mut exchange = honouring.exchange(false);
    assert_eq!(
        exchange.on_head(StatusCode::OK, &grpc_head(), FAST),
        AfterHead::AwaitTrailers
    );
    let j = exchange.on_trailers(Some(&trailers));
    assert_eq!(j.retry_after, Some(Duration::from_millis(1500)));
    // gRPC's "do not retry" (negative) and malformed values give no hint; a sign is not
    // A6's integer, though Rust's parser would take `+5`.
    for value in ["-1", "soon", "", "+5"] {
        trailers.insert(
            "grpc-retry-pushback-ms",
            HeaderValue::from_str(value).unwrap(),
        );
        let j = honouring.judge_grpc(Some(&trailers), FAST, false);
        assert_eq!(j.retry_after, None, "{value:?}");
    }
    // Not on an ignored code, and not unless asked for.
    let mut ignored = status("5");
    ignored.insert("grpc-retry-pushback-ms", HeaderValue::from_static("1500"));
    assert_eq!(
        honouring
            .judge_grpc(Some(&ignored), FAST, false)
            .retry_after,
        None
    );
    trailers.insert("grpc-retry-pushback-ms", HeaderValue::from_static("1500"));
    let plain = HttpJudge::builder().grpc(true).build().unwrap();
    assert_eq!(
        plain.judge_grpc(Some(&trailers), FAST, false).retry_after,
        None
    );
}
