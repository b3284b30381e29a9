//! The exchange table against the sans-IO judge itself: each case played step by step
//! through an `Exchange`, as an adapter would.
#![allow(clippy::unwrap_used)] // tests and their helpers unwrap

#[path = "exchange/cases.rs"]
mod cases;

use std::time::Duration;

use breakerbox::Verdict;
use breakerbox_http::{AfterHead, HttpJudge, Judgement, TransportError};
use cases::{Case, Upstream, CASES};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    map
}

/// Plays `case` through an exchange: the head (with its latency), then the body only if
/// the exchange asks for it, as much of it as arrives.
fn play(judge: &HttpJudge, case: &Case) -> (Judgement, Duration) {
    let mut exchange = judge.exchange(case.probe);
    let (status, head_headers, body, latency, cut) = match case.upstream {
        Upstream::Answers {
            status,
            headers: pairs,
            body,
            delay_ms,
        } => (status, headers(pairs), body, delay_ms, None),
        Upstream::TricklesBody { status, body, .. } => (status, HeaderMap::new(), body, 0, None),
        Upstream::CutsBody { status, body, sent } => {
            (status, HeaderMap::new(), body, 0, Some(sent))
        }
        Upstream::HangsUp => {
            let j = exchange.on_transport_error(TransportError::NoResponse, Duration::ZERO);
            return (j, exchange.latency());
        }
        Upstream::Refuses => {
            let j = exchange.on_transport_error(TransportError::Connect, Duration::ZERO);
            return (j, exchange.latency());
        }
    };
    let status = StatusCode::from_u16(status).unwrap();
    let latency = Duration::from_millis(latency);
    let judgement = match exchange.on_head(status, &head_headers, latency) {
        AfterHead::Judged(judgement) => {
            assert!(
                cut.is_none(),
                "{}: the table holds only cut bodies that are read for judging (the proxy \
                 alone watches a streamed body)",
                case.name
            );
            judgement
        }
        AfterHead::ReadBody { cap } => match cut {
            Some(_) => exchange.on_body_error(TransportError::NoResponse),
            None if body.len() > cap => exchange.on_body(None),
            None => exchange.on_body(Some(body.as_bytes())),
        },
        // A gRPC head: the body streams to its end, which has no trailers in this table.
        AfterHead::AwaitTrailers => match cut {
            Some(_) => exchange.on_body_error(TransportError::NoResponse),
            None => exchange.on_trailers(None),
        },
    };
    (judgement, exchange.latency())
}

#[test]
fn every_case_of_the_table_is_judged_as_the_table_says_by_the_sans_io_exchange() {
    for case in CASES {
        let judge = case.http_judge();
        let (judgement, _) = play(&judge, case);
        case.check(
            "sans-IO",
            judgement.verdict,
            &judgement.reason,
            judgement.retry_after,
        );
    }
}

#[test]
fn the_exchange_agrees_with_judge_response_for_every_answered_case() {
    for case in CASES {
        let Upstream::Answers {
            status,
            headers: pairs,
            body,
            delay_ms,
        } = case.upstream
        else {
            continue;
        };
        let judge = case.http_judge();
        let status = StatusCode::from_u16(status).unwrap();
        let read =
            (judge.wants_body(status) && body.len() <= judge.body_cap()).then_some(body.as_bytes());
        let whole = judge.judge_response(
            status,
            &headers(pairs),
            read,
            Duration::from_millis(delay_ms),
            case.probe,
        );
        assert_eq!(play(&judge, case).0, whole, "{}", case.name);
    }
}

#[test]
fn the_recorded_latency_is_the_time_to_the_head() {
    let judge = HttpJudge::builder()
        .business_pointer("/code")
        .business_failure_codes(["E1"])
        .slow_threshold(Duration::from_millis(100))
        .build()
        .unwrap();
    let mut exchange = judge.exchange(false);
    let asked = exchange.on_head(StatusCode::OK, &HeaderMap::new(), Duration::from_millis(40));
    assert_eq!(
        asked,
        AfterHead::ReadBody {
            cap: judge.body_cap()
        }
    );
    let judgement = exchange.on_body(Some(b"{\"code\":\"none\"}"));
    assert_eq!(judgement.verdict, Verdict::Success);
    assert_eq!(exchange.latency(), Duration::from_millis(40));
}

#[test]
fn a_body_error_after_a_head_that_needed_no_body_is_still_a_failure_with_the_head_hint() {
    let judge = HttpJudge::builder()
        .honor_retry_after(true)
        .build()
        .unwrap();
    let mut exchange = judge.exchange(false);
    let head = exchange.on_head(
        StatusCode::SERVICE_UNAVAILABLE,
        &headers(&[("retry-after", "3")]),
        Duration::from_millis(5),
    );
    let AfterHead::Judged(head) = head else {
        panic!("no body rule, yet the body was asked for");
    };
    assert_eq!(head.retry_after, Some(Duration::from_secs(3)));
    let failed = exchange.on_body_error(TransportError::Timeout);
    assert_eq!(
        (failed.verdict, failed.reason.as_ref(), failed.retry_after),
        (
            Verdict::Failure,
            "timeout: body read",
            Some(Duration::from_secs(3))
        )
    );
    assert_eq!(exchange.latency(), Duration::from_millis(5));
}

#[test]
fn steps_out_of_order_answer_a_failure_instead_of_panicking() {
    let judge = HttpJudge::default();
    let mut exchange = judge.exchange(false);
    assert_eq!(exchange.on_body(None).reason, "transport: no response");
    let mut exchange = judge.exchange(false);
    assert_eq!(
        exchange.on_body_error(TransportError::Other).verdict,
        Verdict::Failure
    );
}

#[test]
fn an_exchange_can_own_its_judge() {
    let judge = std::sync::Arc::new(HttpJudge::default());
    let mut exchange = breakerbox_http::Exchange::new(judge, true);
    assert!(exchange.is_probe());
    let after = exchange.on_head(StatusCode::OK, &HeaderMap::new(), Duration::ZERO);
    assert!(matches!(after, AfterHead::Judged(j) if j.verdict == Verdict::Success));
}

#[test]
fn a_retry_after_that_is_not_plain_delta_seconds_is_no_hint() {
    let judge = HttpJudge::builder()
        .honor_retry_after(true)
        .build()
        .unwrap();
    let hint = |value: &str| {
        judge
            .judge_status(
                StatusCode::SERVICE_UNAVAILABLE,
                &headers(&[("retry-after", value)]),
                Duration::ZERO,
                false,
            )
            .retry_after
    };
    assert_eq!(hint(" 7 "), Some(Duration::from_secs(7)));
    // `u64::from_str` would take a sign; the header's grammar does not.
    for value in ["+5", "-5", "", "5s", "Wed, 21 Oct 2015 07:28:00 GMT"] {
        assert_eq!(hint(value), None, "{value:?}");
    }
}
