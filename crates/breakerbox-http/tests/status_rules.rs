//! Status rules: defaults, codes, ranges, classes and their precedence.
#![allow(clippy::unwrap_used)] // tests and their helpers unwrap

use std::time::Duration;

use breakerbox::Verdict;
use breakerbox_http::{HttpJudge, StatusSelector};
use http::{HeaderMap, StatusCode};

fn verdict(judge: &HttpJudge, code: u16) -> Verdict {
    let status = StatusCode::from_u16(code).unwrap();
    judge
        .judge_status(status, &HeaderMap::new(), Duration::ZERO, false)
        .verdict
}

#[test]
fn defaults_fail_5xx_408_and_429_ignore_other_4xx_and_1xx_and_pass_2xx_3xx_and_101() {
    let judge = HttpJudge::default();
    for code in [500, 502, 503, 504, 599, 408, 429] {
        assert_eq!(verdict(&judge, code), Verdict::Failure, "{code}");
    }
    for code in [400, 401, 403, 404, 409, 422, 499, 100, 102, 103] {
        assert_eq!(verdict(&judge, code), Verdict::Ignore, "{code}");
    }
    // 101 Switching Protocols ends an upgrade's handshake (a WebSocket's) successfully.
    for code in [101, 200, 201, 204, 299, 301, 304, 399] {
        assert_eq!(verdict(&judge, code), Verdict::Success, "{code}");
    }
}

#[test]
fn the_default_for_101_can_be_changed_by_naming_it_but_not_by_the_1xx_class() {
    let judge = HttpJudge::builder()
        .status("101", Verdict::Ignore)
        .build()
        .unwrap();
    assert_eq!(verdict(&judge, 101), Verdict::Ignore);
    let judge = HttpJudge::builder()
        .status("1xx", Verdict::Failure)
        .build()
        .unwrap();
    assert_eq!(verdict(&judge, 101), Verdict::Success);
    assert_eq!(verdict(&judge, 100), Verdict::Failure);
}

#[test]
fn codes_outside_the_five_classes_fail_unless_a_rule_says_otherwise() {
    assert_eq!(verdict(&HttpJudge::default(), 600), Verdict::Failure);
    assert_eq!(verdict(&HttpJudge::default(), 999), Verdict::Failure);
    let judge = HttpJudge::builder()
        .status("600-699", Verdict::Ignore)
        .build()
        .unwrap();
    assert_eq!(verdict(&judge, 650), Verdict::Ignore);
}

#[test]
fn reasons_name_the_status() {
    let judge = HttpJudge::default();
    let j = judge.judge_status(
        StatusCode::SERVICE_UNAVAILABLE,
        &HeaderMap::new(),
        Duration::ZERO,
        false,
    );
    assert_eq!(j.reason, "status 503");
    let j = judge.judge_status(StatusCode::OK, &HeaderMap::new(), Duration::ZERO, false);
    assert_eq!(j.reason, "status 200");
    assert_eq!(j.retry_after, None);
}

#[test]
fn one_line_makes_every_client_error_a_failure() {
    let judge = HttpJudge::builder()
        .client_errors(Verdict::Failure)
        .build()
        .unwrap();
    for code in [400, 401, 404, 418, 499] {
        assert_eq!(verdict(&judge, code), Verdict::Failure, "{code}");
    }
    assert_eq!(verdict(&judge, 200), Verdict::Success);
}

#[test]
fn server_errors_can_be_ignored_as_a_class() {
    let judge = HttpJudge::builder()
        .server_errors(Verdict::Ignore)
        .build()
        .unwrap();
    assert_eq!(verdict(&judge, 500), Verdict::Ignore);
    assert_eq!(verdict(&judge, 429), Verdict::Failure);
}

#[test]
fn a_code_beats_a_range_and_a_range_beats_a_class() {
    let judge = HttpJudge::builder()
        .status("4xx", Verdict::Failure)
        .status("400-409", Verdict::Success)
        .status("404", Verdict::Ignore)
        .build()
        .unwrap();
    assert_eq!(verdict(&judge, 404), Verdict::Ignore, "code");
    assert_eq!(verdict(&judge, 403), Verdict::Success, "range");
    assert_eq!(verdict(&judge, 410), Verdict::Failure, "class");
}

#[test]
fn the_narrower_range_wins_when_ranges_overlap() {
    let judge = HttpJudge::builder()
        .status("500-599", Verdict::Ignore)
        .status("502-504", Verdict::Failure)
        .build()
        .unwrap();
    assert_eq!(verdict(&judge, 503), Verdict::Failure);
    assert_eq!(verdict(&judge, 500), Verdict::Ignore);
    assert_eq!(verdict(&judge, 505), Verdict::Ignore);
}

#[test]
fn default_code_rules_for_408_and_429_can_be_changed_by_naming_them() {
    let judge = HttpJudge::builder()
        .status("429", Verdict::Ignore)
        .build()
        .unwrap();
    assert_eq!(verdict(&judge, 429), Verdict::Ignore);
    assert_eq!(verdict(&judge, 408), Verdict::Failure);
    // A class rule does not override the default code rules (a code is more specific).
    let judge = HttpJudge::builder()
        .client_errors(Verdict::Success)
        .build()
        .unwrap();
    assert_eq!(verdict(&judge, 429), Verdict::Failure);
    assert_eq!(verdict(&judge, 400), Verdict::Success);
}

#[test]
fn a_2xx_can_be_made_a_failure_and_a_5xx_a_success() {
    let judge = HttpJudge::builder()
        .status("202", Verdict::Failure)
        .status("501", Verdict::Success)
        .build()
        .unwrap();
    assert_eq!(verdict(&judge, 202), Verdict::Failure);
    assert_eq!(verdict(&judge, 501), Verdict::Success);
    assert_eq!(verdict(&judge, 500), Verdict::Failure);
}

#[test]
fn selectors_parse_display_and_match() {
    let cases = [
        ("429", StatusSelector::Code(429)),
        ("500-599", StatusSelector::Range(500, 599)),
        ("5xx", StatusSelector::Class(5)),
        ("4XX", StatusSelector::Class(4)),
    ];
    for (text, expected) in cases {
        assert_eq!(text.parse::<StatusSelector>().unwrap(), expected, "{text}");
    }
    assert_eq!(StatusSelector::Range(500, 599).to_string(), "500-599");
    assert!(StatusSelector::Range(500, 599).matches(599));
    assert!(!StatusSelector::Range(500, 599).matches(600));
    assert!(StatusSelector::Class(4).matches(404));
    assert!(!StatusSelector::Class(4).matches(504));
}

#[test]
fn bad_selectors_name_the_key_and_the_value() {
    let cases = [
        ("6xx", "status.\"6xx\": unknown status class \"6xx\""),
        ("0xx", "status.\"0xx\": unknown status class \"0xx\""),
        ("abc", "status.\"abc\": invalid status \"abc\""),
        ("42", "status.\"42\": invalid status \"42\""),
        ("1000", "status.\"1000\": invalid status \"1000\""),
        (
            "599-500",
            "status.\"599-500\": empty status range \"599-500\"",
        ),
        ("500-", "status.\"500-\": invalid status \"500-\""),
    ];
    for (text, expected) in cases {
        let error = HttpJudge::builder()
            .status(text, Verdict::Failure)
            .build()
            .unwrap_err();
        assert!(
            error.to_string().starts_with(expected),
            "{text}: got {error}"
        );
        assert_eq!(error.value(), text);
    }
}

#[test]
fn the_generic_judge_trait_judges_status_and_latency_and_fails_errors() {
    use breakerbox::Judge;
    let judge = HttpJudge::builder()
        .slow_threshold(Duration::from_millis(100))
        .build()
        .unwrap();
    let ok: Result<http::Response<()>, ()> = Ok(http::Response::new(()));
    assert_eq!(judge.judge(&ok, Duration::from_millis(5)), Verdict::Success);
    assert_eq!(
        judge.judge(&ok, Duration::from_millis(500)),
        Verdict::Failure
    );
    let not_found: Result<http::Response<()>, ()> =
        Ok(http::Response::builder().status(404).body(()).unwrap());
    assert_eq!(judge.judge(&not_found, Duration::ZERO), Verdict::Ignore);
    let err: Result<http::Response<()>, ()> = Err(());
    assert_eq!(judge.judge(&err, Duration::ZERO), Verdict::Failure);
    assert!(Judge::<http::Response<()>, ()>::uses_latency(&judge));
    assert!(!Judge::<http::Response<()>, ()>::uses_latency(
        &HttpJudge::default()
    ));
}

#[test]
fn selectors_at_the_edges_of_their_syntax_parse_exactly() {
    // A range of one code is a range; a class is one digit; a code is three digits.
    assert_eq!(
        "500-500".parse::<StatusSelector>().unwrap(),
        StatusSelector::Range(500, 500)
    );
    for text in ["05xx", "55xx", "0500", "+500", "50"] {
        assert!(
            text.parse::<StatusSelector>().is_err(),
            "{text} is not a selector"
        );
    }
}

#[test]
fn a_judgement_is_a_failure_exactly_when_its_verdict_is() {
    let judge = HttpJudge::default();
    let judged = |code| {
        judge.judge_status(
            StatusCode::from_u16(code).unwrap(),
            &HeaderMap::new(),
            Duration::ZERO,
            false,
        )
    };
    assert!(judged(503).is_failure());
    assert!(!judged(200).is_failure());
    assert!(!judged(404).is_failure(), "an ignored call is no failure");
}

#[test]
fn a_parsed_selector_and_a_config_set_rules_through_the_builder() {
    let judge = HttpJudge::builder()
        .status_rule(StatusSelector::Code(404), Verdict::Failure)
        .build()
        .unwrap();
    assert_eq!(verdict(&judge, 404), Verdict::Failure);
    assert_eq!(verdict(&judge, 403), Verdict::Ignore);

    let config: breakerbox_http::HttpJudgeConfig =
        toml::from_str("client_errors = \"failure\"").unwrap();
    let judge = HttpJudge::builder().config(config).build().unwrap();
    assert_eq!(verdict(&judge, 403), Verdict::Failure);
}

#[test]
fn a_judge_prints_only_the_codes_whose_verdict_differs_from_their_class_default() {
    let judge = HttpJudge::builder()
        .status("404", Verdict::Failure)
        .status("503", Verdict::Ignore)
        .build()
        .unwrap();
    let printed = format!("{judge:?}");
    assert!(
        printed.contains(
            "table: {101: Success, 404: Failure, 408: Failure, 429: Failure, 503: Ignore}"
        ),
        "{printed}"
    );
    let printed = format!("{:?}", HttpJudge::default());
    assert!(
        printed.contains("table: {101: Success, 408: Failure, 429: Failure}"),
        "the defaults print their three code rules: {printed}"
    );
}
