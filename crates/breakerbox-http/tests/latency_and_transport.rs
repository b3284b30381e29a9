//! Latency thresholds, transport errors and Retry-After.
#![allow(clippy::unwrap_used)] // tests and their helpers unwrap

use std::time::Duration;

use breakerbox::Verdict;
use breakerbox_http::{HttpJudge, TransportError};
use http::{HeaderMap, HeaderValue, StatusCode};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn a_200_slower_than_the_threshold_fails_with_a_readable_reason() {
    let judge = HttpJudge::builder()
        .slow_threshold(ms(800))
        .build()
        .unwrap();
    let j = judge.judge_status(StatusCode::OK, &HeaderMap::new(), ms(1200), false);
    assert_eq!(j.verdict, Verdict::Failure);
    assert_eq!(j.reason, "slow 1.2s > 800ms");
}

#[test]
fn the_threshold_itself_is_not_slow() {
    let judge = HttpJudge::builder()
        .slow_threshold(ms(800))
        .build()
        .unwrap();
    let at = judge.judge_status(StatusCode::OK, &HeaderMap::new(), ms(800), false);
    assert_eq!(at.verdict, Verdict::Success);
    let over = judge.judge_status(
        StatusCode::OK,
        &HeaderMap::new(),
        ms(800) + Duration::from_nanos(1),
        false,
    );
    assert_eq!(over.verdict, Verdict::Failure);
}

#[test]
fn slow_ignored_and_failed_responses_keep_their_verdict_and_reason() {
    let judge = HttpJudge::builder()
        .slow_threshold(ms(100))
        .build()
        .unwrap();
    let j = judge.judge_status(StatusCode::NOT_FOUND, &HeaderMap::new(), ms(900), false);
    assert_eq!(
        (j.verdict, j.reason.as_ref()),
        (Verdict::Ignore, "status 404")
    );
    let j = judge.judge_status(StatusCode::BAD_GATEWAY, &HeaderMap::new(), ms(900), false);
    assert_eq!(
        (j.verdict, j.reason.as_ref()),
        (Verdict::Failure, "status 502")
    );
}

#[test]
fn the_probe_threshold_applies_only_to_probes() {
    let judge = HttpJudge::builder()
        .slow_threshold(ms(800))
        .probe_slow_threshold(ms(300))
        .build()
        .unwrap();
    let normal = judge.judge_status(StatusCode::OK, &HeaderMap::new(), ms(500), false);
    assert_eq!(normal.verdict, Verdict::Success);
    let probe = judge.judge_status(StatusCode::OK, &HeaderMap::new(), ms(500), true);
    assert_eq!(probe.verdict, Verdict::Failure);
    assert_eq!(probe.reason, "slow 500ms > 300ms");
    assert_eq!(judge.slow_threshold_for(true), Some(ms(300)));
    assert_eq!(judge.slow_threshold_for(false), Some(ms(800)));
}

#[test]
fn a_probe_threshold_alone_judges_only_probes_and_probes_fall_back_to_the_normal_one() {
    let probe_only = HttpJudge::builder()
        .probe_slow_threshold(ms(300))
        .build()
        .unwrap();
    let h = HeaderMap::new();
    assert_eq!(
        probe_only
            .judge_status(StatusCode::OK, &h, ms(5000), false)
            .verdict,
        Verdict::Success
    );
    assert_eq!(
        probe_only
            .judge_status(StatusCode::OK, &h, ms(301), true)
            .verdict,
        Verdict::Failure
    );
    let normal_only = HttpJudge::builder()
        .slow_threshold(ms(300))
        .build()
        .unwrap();
    assert_eq!(
        normal_only
            .judge_status(StatusCode::OK, &h, ms(301), true)
            .verdict,
        Verdict::Failure
    );
}

#[test]
fn without_a_threshold_latency_does_not_matter() {
    let j = HttpJudge::default().judge_status(
        StatusCode::OK,
        &HeaderMap::new(),
        Duration::from_secs(3600),
        true,
    );
    assert_eq!(j.verdict, Verdict::Success);
}

#[test]
fn a_business_failure_reason_wins_over_slowness() {
    let judge = HttpJudge::builder()
        .slow_threshold(ms(100))
        .business_pointer("/error_code")
        .business_failure_codes(["E001"])
        .build()
        .unwrap();
    let j = judge.judge_response(
        StatusCode::OK,
        &HeaderMap::new(),
        Some(br#"{"error_code":"E001"}"#),
        ms(900),
        false,
    );
    assert_eq!(j.reason, "business code E001");
}

#[test]
fn every_transport_error_is_a_failure_with_its_reason() {
    let judge = HttpJudge::default();
    let cases = [
        (TransportError::Connect, "transport: connect failed"),
        (TransportError::Reset, "transport: connection reset"),
        (TransportError::Timeout, "timeout"),
        (TransportError::NoResponse, "transport: no response"),
        (TransportError::Other, "transport: error"),
    ];
    for (error, reason) in cases {
        let j = judge.judge_transport(error, ms(10));
        assert_eq!((j.verdict, j.reason.as_ref()), (Verdict::Failure, reason));
        assert_eq!(error.to_string(), reason);
    }
}

fn with_retry_after(value: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        http::header::RETRY_AFTER,
        HeaderValue::from_str(value).unwrap(),
    );
    headers
}

#[test]
fn retry_after_seconds_are_read_on_429_and_503_when_honoured() {
    let judge = HttpJudge::builder()
        .honor_retry_after(true)
        .build()
        .unwrap();
    for status in [
        StatusCode::TOO_MANY_REQUESTS,
        StatusCode::SERVICE_UNAVAILABLE,
    ] {
        let j = judge.judge_status(status, &with_retry_after("120"), ms(1), false);
        assert_eq!(j.retry_after, Some(Duration::from_secs(120)), "{status}");
        assert_eq!(j.verdict, Verdict::Failure);
    }
    let j = judge.judge_status(
        StatusCode::TOO_MANY_REQUESTS,
        &with_retry_after("120"),
        ms(1),
        false,
    );
    assert_eq!(j.to_string(), "failure (status 429); retry after 120s");
}

#[test]
fn retry_after_is_ignored_elsewhere_when_not_honoured_or_when_not_seconds() {
    let honouring = HttpJudge::builder()
        .honor_retry_after(true)
        .build()
        .unwrap();
    let h = with_retry_after("30");
    assert_eq!(
        honouring
            .judge_status(StatusCode::BAD_GATEWAY, &h, ms(1), false)
            .retry_after,
        None
    );
    assert_eq!(
        HttpJudge::default()
            .judge_status(StatusCode::SERVICE_UNAVAILABLE, &h, ms(1), false)
            .retry_after,
        None
    );
    for value in ["Wed, 21 Oct 2026 07:28:00 GMT", "-5", "1.5", "soon", ""] {
        let j = honouring.judge_status(
            StatusCode::SERVICE_UNAVAILABLE,
            &with_retry_after(value),
            ms(1),
            false,
        );
        assert_eq!(j.retry_after, None, "{value:?}");
    }
    let j = honouring.judge_status(
        StatusCode::SERVICE_UNAVAILABLE,
        &HeaderMap::new(),
        ms(1),
        false,
    );
    assert_eq!(j.retry_after, None);
}

#[test]
fn bad_latency_settings_name_the_key() {
    let error = HttpJudge::builder()
        .slow_threshold(ms(300))
        .probe_slow_threshold(ms(800))
        .build()
        .unwrap_err();
    assert_eq!(error.key(), "probe_slow_threshold");
    assert_eq!(
        error.to_string(),
        "probe_slow_threshold: 800ms is more lenient than slow_threshold 300ms (a probe threshold must be stricter)"
    );
    let error = HttpJudge::builder()
        .slow_threshold(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(error.key(), "slow_threshold");
    let error = HttpJudge::builder().body_cap(0).build().unwrap_err();
    assert_eq!(error.to_string(), "body_cap: must be at least 1 byte");
}
