//! Business error codes read from a JSON body.
#![allow(clippy::unwrap_used)] // tests and their helpers unwrap

use std::time::Duration;

use breakerbox::Verdict;
use breakerbox_http::{HttpJudge, HttpJudgeBuilder};
use http::{HeaderMap, StatusCode};

fn seeded() -> HttpJudgeBuilder {
    HttpJudge::builder()
        .business_pointer("/error_code")
        .business_pointer("/error/code")
        .business_failure_codes(["E001", "E002", "E003"])
}

fn judge_body(judge: &HttpJudge, code: u16, body: Option<&[u8]>) -> (Verdict, String) {
    let j = judge.judge_response(
        StatusCode::from_u16(code).unwrap(),
        &HeaderMap::new(),
        body,
        Duration::from_millis(1),
        false,
    );
    (j.verdict, j.reason.into_owned())
}

#[test]
fn a_failure_code_in_a_200_body_is_a_failure() {
    let judge = seeded().build().unwrap();
    let (verdict, reason) = judge_body(&judge, 200, Some(br#"{"error_code":"E001"}"#));
    assert_eq!(verdict, Verdict::Failure);
    assert_eq!(reason, "business code E001");
}

#[test]
fn later_pointers_are_tried_when_earlier_ones_find_nothing() {
    let judge = seeded().build().unwrap();
    let body = br#"{"error":{"code":"E002","message":"backend down"}}"#;
    assert_eq!(
        judge_body(&judge, 200, Some(body)),
        (Verdict::Failure, "business code E002".into())
    );
    // A null or object at the first pointer does not stop the search.
    let body = br#"{"error_code":null,"error":{"code":"E003"}}"#;
    assert_eq!(judge_body(&judge, 200, Some(body)).0, Verdict::Failure);
}

#[test]
fn an_unlisted_code_leaves_the_status_verdict() {
    let judge = seeded().build().unwrap();
    let (verdict, reason) = judge_body(&judge, 200, Some(br#"{"error_code":"W100"}"#));
    assert_eq!((verdict, reason.as_str()), (Verdict::Success, "status 200"));
}

#[test]
fn numbers_in_the_body_compare_by_their_string_form() {
    let judge = HttpJudge::builder()
        .business_pointer("/code")
        .business_failure_codes(["1001"])
        .build()
        .unwrap();
    assert_eq!(
        judge_body(&judge, 200, Some(br#"{"code":1001}"#)),
        (Verdict::Failure, "business code 1001".into())
    );
    assert_eq!(
        judge_body(&judge, 200, Some(br#"{"code":"1001"}"#)).0,
        Verdict::Failure
    );
    assert_eq!(
        judge_body(&judge, 200, Some(br#"{"code":1002}"#)).0,
        Verdict::Success
    );
}

#[test]
fn missing_non_json_and_codeless_bodies_are_judged_by_status_alone() {
    let judge = seeded().build().unwrap();
    for body in [
        None,
        Some(&b""[..]),
        Some(&b"<html>E001</html>"[..]),
        Some(&br#"{"error_code":"E0"#[..]),
        Some(&br#"{"other":"E001"}"#[..]),
        Some(&br#"["E001"]"#[..]),
        Some(&br#"{"error_code":["E001"]}"#[..]),
    ] {
        assert_eq!(
            judge_body(&judge, 200, body),
            (Verdict::Success, "status 200".into()),
            "{body:?}"
        );
    }
    assert_eq!(judge_body(&judge, 503, None).0, Verdict::Failure);
}

#[test]
fn a_body_over_the_cap_is_not_read() {
    let judge = seeded().body_cap(32).build().unwrap();
    assert_eq!(judge.body_cap(), 32);
    let mut body = br#"{"error_code":"E001","padding":""#.to_vec();
    body.extend(std::iter::repeat_n(b'x', 100));
    body.extend(br#""}"#);
    assert_eq!(judge_body(&judge, 200, Some(&body)).0, Verdict::Success);
    assert_eq!(
        judge_body(&judge, 200, Some(br#"{"error_code":"E001"}"#)).0,
        Verdict::Failure
    );
}

#[test]
fn the_default_cap_is_64_kib() {
    assert_eq!(HttpJudge::default().body_cap(), 64 * 1024);
    assert_eq!(seeded().build().unwrap().body_cap(), 64 * 1024);
}

#[test]
fn success_codes_make_an_ignored_or_failed_status_a_success() {
    let judge = HttpJudge::builder()
        .business_pointer("/code")
        .business_success_codes(["ALREADY_DONE"])
        .business_statuses(["2xx", "4xx"])
        .build()
        .unwrap();
    assert_eq!(
        judge_body(&judge, 409, Some(br#"{"code":"ALREADY_DONE"}"#)),
        (Verdict::Success, "business code ALREADY_DONE".into())
    );
    assert_eq!(
        judge_body(&judge, 409, Some(br#"{"code":"CONFLICT"}"#)).0,
        Verdict::Ignore
    );
}

#[test]
fn other_codes_turn_the_success_list_into_an_allow_list() {
    let judge = HttpJudge::builder()
        .business_pointer("/code")
        .business_success_codes(["0"])
        .business_other_codes(Verdict::Failure)
        .build()
        .unwrap();
    assert_eq!(
        judge_body(&judge, 200, Some(br#"{"code":0}"#)).0,
        Verdict::Success
    );
    assert_eq!(
        judge_body(&judge, 200, Some(br#"{"code":7}"#)),
        (Verdict::Failure, "business code 7 (unlisted)".into())
    );
    // No code at all: the status decides.
    assert_eq!(judge_body(&judge, 200, Some(b"{}")).0, Verdict::Success);
}

#[test]
fn bodies_are_wanted_only_for_statuses_the_business_rule_covers() {
    assert!(!HttpJudge::default().wants_body(StatusCode::OK));
    let judge = seeded().build().unwrap();
    assert!(judge.wants_body(StatusCode::OK));
    assert!(judge.wants_body(StatusCode::CREATED));
    assert!(!judge.wants_body(StatusCode::NOT_FOUND));
    assert!(!judge.wants_body(StatusCode::INTERNAL_SERVER_ERROR));
    let judge = seeded().business_statuses(["200", "5xx"]).build().unwrap();
    assert!(judge.wants_body(StatusCode::OK));
    assert!(!judge.wants_body(StatusCode::CREATED));
    assert!(judge.wants_body(StatusCode::BAD_GATEWAY));
}

#[test]
fn bodies_of_statuses_outside_the_rule_are_not_judged_even_when_given() {
    let judge = seeded().build().unwrap();
    assert_eq!(
        judge_body(&judge, 404, Some(br#"{"error_code":"E001"}"#)).0,
        Verdict::Ignore
    );
}

#[test]
fn a_failure_code_on_a_covered_5xx_gives_the_more_precise_reason() {
    let judge = seeded().business_statuses(["2xx", "5xx"]).build().unwrap();
    assert_eq!(
        judge_body(&judge, 502, Some(br#"{"error":{"code":"E003"}}"#)),
        (Verdict::Failure, "business code E003".into())
    );
}

#[test]
fn bad_business_configs_name_the_key() {
    let cases: Vec<(HttpJudgeBuilder, &str)> = vec![
        (
            HttpJudge::builder().business_failure_codes(["E001"]),
            "business.pointers: at least one JSON pointer",
        ),
        (
            HttpJudge::builder()
                .business_pointer("error_code")
                .business_failure_codes(["E001"]),
            "business.pointers[0]: invalid JSON pointer \"error_code\"",
        ),
        (
            HttpJudge::builder().business_pointer("/code"),
            "business.failure_codes: no business codes",
        ),
        (
            seeded().business_success_codes(["E002"]),
            "business.success_codes: code \"E002\" is also a failure code",
        ),
        (
            seeded().business_statuses(["2xx", "7xx"]),
            "business.statuses[1]: unknown status class \"7xx\"",
        ),
        (
            seeded().business_statuses([]),
            "business.statuses: no statuses",
        ),
    ];
    for (builder, expected) in cases {
        let error = builder.build().unwrap_err().to_string();
        assert!(
            error.starts_with(expected),
            "expected {expected:?}, got {error:?}"
        );
    }
}

#[test]
fn only_a_judge_with_business_codes_reads_bodies() {
    assert!(!HttpJudge::default().reads_bodies());
    assert!(!HttpJudge::builder().build().unwrap().reads_bodies());
    assert!(seeded().build().unwrap().reads_bodies());
}
