//! The caller's deadline (`grpc-timeout`): a `DEADLINE_EXCEEDED` at or after it is the
//! caller's budget running out (ignored, unless the deadline is over the slow-call
//! threshold), one before it the server's own failure; streamed answers judged by when
//! they ended; every other code as before.
#![allow(clippy::unwrap_used)] // tests unwrap

use std::time::Duration;

use breakerbox::Verdict;
use breakerbox_http::{AfterHead, HttpJudge, Judgement};
use http::{HeaderMap, HeaderValue, StatusCode};

const MS: Duration = Duration::from_millis(1);

fn request(timeout: &str) -> HeaderMap {
    let mut map = HeaderMap::new();
    map.insert("content-type", HeaderValue::from_static("application/grpc"));
    map.insert("grpc-timeout", HeaderValue::from_str(timeout).unwrap());
    map
}

fn grpc_head() -> HeaderMap {
    let mut map = HeaderMap::new();
    map.insert("content-type", HeaderValue::from_static("application/grpc"));
    map
}

fn trailers(code: &str) -> HeaderMap {
    let mut map = HeaderMap::new();
    map.insert("grpc-status", HeaderValue::from_str(code).unwrap());
    map.insert("grpc-retry-pushback-ms", HeaderValue::from_static("700"));
    map
}

/// A trailers-only answer `code` after `latency`, to a request with `timeout` (none when
/// `None`), judged as a probe when `probe`.
fn trailers_only(
    judge: &HttpJudge,
    timeout: Option<&str>,
    code: &str,
    latency: Duration,
    probe: bool,
) -> Judgement {
    let mut exchange = judge.exchange(probe);
    if let Some(timeout) = timeout {
        exchange.on_request(&request(timeout));
    }
    let mut head = grpc_head();
    head.extend(trailers(code));
    match exchange.on_head(StatusCode::OK, &head, latency) {
        AfterHead::Judged(j) => j,
        other => panic!("a trailers-only answer is judged at its head: {other:?}"),
    }
}

/// A streamed answer (head after `head_at`) ending in trailers `code` `ended` after
/// admission.
fn streamed(
    judge: &HttpJudge,
    timeout: &str,
    code: &str,
    head_at: Duration,
    ended: Duration,
) -> Judgement {
    let mut exchange = judge.exchange(false);
    exchange.on_request(&request(timeout));
    assert_eq!(
        exchange.on_head(StatusCode::OK, &grpc_head(), head_at),
        AfterHead::AwaitTrailers
    );
    exchange.on_trailers_after(Some(&trailers(code)), ended)
}

fn grpc_judge() -> HttpJudge {
    HttpJudge::builder()
        .grpc(true)
        .honor_retry_after(true)
        .build()
        .unwrap()
}

#[test]
fn a_deadline_exceeded_at_or_after_the_callers_deadline_is_ignored() {
    let judge = grpc_judge();
    // The hostile client: one nanosecond, answered at once.
    let j = trailers_only(&judge, Some("1n"), "4", MS, false);
    assert_eq!(j.verdict, Verdict::Ignore);
    assert_eq!(
        j.reason,
        "grpc DEADLINE_EXCEEDED after the caller's deadline of 1ns"
    );
    assert_eq!(j.retry_after, None, "no hint from an ignored answer");
    // Exactly at the deadline, and after it.
    for latency in [50 * MS, 51 * MS, 10_000 * MS] {
        let j = trailers_only(&judge, Some("50m"), "4", latency, false);
        assert_eq!(j.verdict, Verdict::Ignore, "{latency:?}");
    }
}

#[test]
fn a_deadline_exceeded_before_the_callers_deadline_is_the_servers_failure() {
    let judge = grpc_judge();
    let j = trailers_only(
        &judge,
        Some("50m"),
        "4",
        50 * MS - Duration::from_nanos(1),
        false,
    );
    assert_eq!(j.verdict, Verdict::Failure);
    assert_eq!(j.reason, "grpc DEADLINE_EXCEEDED");
    assert_eq!(
        j.retry_after,
        Some(700 * MS),
        "the hint of a failure is kept"
    );
    // Without a deadline in the request (or without telling the exchange of it), as before.
    let j = trailers_only(&judge, None, "4", 10_000 * MS, false);
    assert_eq!(j.verdict, Verdict::Failure);
    // A malformed grpc-timeout is no deadline.
    let j = trailers_only(&judge, Some("50 m"), "4", 10_000 * MS, false);
    assert_eq!(j.verdict, Verdict::Failure);
}

#[test]
fn a_deadline_over_the_slow_threshold_still_fails_the_server() {
    let judge = HttpJudge::builder()
        .grpc(true)
        .slow_threshold(100 * MS)
        .probe_slow_threshold(20 * MS)
        .build()
        .unwrap();
    // The server took at least the deadline, which is over what it is held to.
    let j = trailers_only(&judge, Some("101m"), "4", 101 * MS, false);
    assert_eq!(j.verdict, Verdict::Failure);
    // A deadline at the threshold or under it: the caller's budget, not the server.
    for timeout in ["100m", "99m", "1u"] {
        let j = trailers_only(&judge, Some(timeout), "4", 200 * MS, false);
        assert_eq!(j.verdict, Verdict::Ignore, "{timeout}");
    }
    // A probe is held to the stricter probe threshold.
    let j = trailers_only(&judge, Some("21m"), "4", 21 * MS, true);
    assert_eq!(j.verdict, Verdict::Failure);
    let j = trailers_only(&judge, Some("20m"), "4", 21 * MS, true);
    assert_eq!(j.verdict, Verdict::Ignore);
}

#[test]
fn a_streamed_answer_is_judged_by_when_it_ended() {
    let judge = grpc_judge();
    // The head came early, DEADLINE_EXCEEDED in the trailers once the deadline passed.
    let j = streamed(&judge, "30m", "4", MS, 30 * MS);
    assert_eq!(j.verdict, Verdict::Ignore);
    // It ended before the deadline: the server's.
    let j = streamed(&judge, "30m", "4", MS, 29 * MS);
    assert_eq!(j.verdict, Verdict::Failure);
    // An end reported before the head counts as the head.
    let j = streamed(&judge, "30m", "4", 40 * MS, MS);
    assert_eq!(j.verdict, Verdict::Ignore);
    // on_trailers is on_trailers_after at the head's time.
    let mut exchange = judge.exchange(false);
    exchange.on_request(&request("30m"));
    let _ = exchange.on_head(StatusCode::OK, &grpc_head(), MS);
    assert_eq!(
        exchange.on_trailers(Some(&trailers("4"))).verdict,
        Verdict::Failure
    );
}

#[test]
fn other_codes_and_configured_verdicts_are_untouched_by_the_deadline() {
    let judge = grpc_judge();
    for (code, verdict) in [
        ("14", Verdict::Failure),
        ("13", Verdict::Failure),
        ("0", Verdict::Success),
        ("1", Verdict::Ignore),
    ] {
        let j = trailers_only(&judge, Some("1n"), code, 10 * MS, false);
        assert_eq!(j.verdict, verdict, "code {code}");
    }
    // DEADLINE_EXCEEDED configured as a success stays one.
    let lenient = HttpJudge::builder()
        .grpc(true)
        .grpc_code("DEADLINE_EXCEEDED", Verdict::Success)
        .build()
        .unwrap();
    let j = trailers_only(&lenient, Some("1n"), "4", 10 * MS, false);
    assert_eq!(
        (j.verdict, j.reason.as_ref()),
        (Verdict::Success, "grpc DEADLINE_EXCEEDED")
    );
    // A missing status after the deadline is still the server breaking the protocol.
    let mut exchange = judge.exchange(false);
    exchange.on_request(&request("1n"));
    let _ = exchange.on_head(StatusCode::OK, &grpc_head(), MS);
    assert_eq!(
        exchange.on_trailers_after(None, 10 * MS).verdict,
        Verdict::Failure
    );
}

#[test]
fn the_callers_deadline_runs_in_all_the_time_since_admission() {
    let judge = grpc_judge();
    let mut head = grpc_head();
    head.extend(trailers("4"));
    // 10 ms charged to the server, 60 ms in all (the rest waiting on the caller's upload):
    // past a 50 ms deadline.
    let mut exchange = judge.exchange(false);
    exchange.on_request(&request("50m"));
    let after = exchange.on_head_at(StatusCode::OK, &head, 10 * MS, 60 * MS);
    assert!(
        matches!(&after, AfterHead::Judged(j) if j.verdict == Verdict::Ignore),
        "{after:?}"
    );
    assert_eq!(
        exchange.latency(),
        10 * MS,
        "the latency recorded is the charged time"
    );
    // An elapsed time under the latency counts as the latency.
    let mut exchange = judge.exchange(false);
    exchange.on_request(&request("50m"));
    let after = exchange.on_head_at(StatusCode::OK, &head, 50 * MS, MS);
    assert!(
        matches!(&after, AfterHead::Judged(j) if j.verdict == Verdict::Ignore),
        "{after:?}"
    );
}
