//! The gRPC judge at the edges its other tests leave (each kills mutants of
//! `scripts/mutants.sh http` over `src/grpc`): escapes of `grpc-message` in lower and
//! upper case, `GrpcStatus::is_in`, the judge's `Debug` (only the codes that differ from
//! their default) and what a config error says it expected.
#![allow(clippy::unwrap_used)] // tests unwrap

use breakerbox::Verdict;
use breakerbox_http::{GrpcCode, GrpcConfig, GrpcJudge, GrpcStatus, HttpJudgeConfig};
use http::{HeaderMap, HeaderValue};

fn trailers(code: &str, message: &str) -> HeaderMap {
    let mut map = HeaderMap::new();
    map.insert("grpc-status", HeaderValue::from_str(code).unwrap());
    map.insert("grpc-message", HeaderValue::from_str(message).unwrap());
    map
}

#[test]
fn a_grpc_message_decodes_escapes_in_either_case() {
    let judge = GrpcJudge::default();
    let cases = [
        ("a%2fb%2Fc", "a/b/c"),
        ("%e2%9c%93 ok", "\u{2713} ok"),
        ("%E2%9C%93", "\u{2713}"),
        ("%4a%4A%6a", "JJj"),
        ("%af%fa", "\u{fffd}\u{fffd}"),
        ("100%", "100%"),
        ("%g1", "%g1"),
    ];
    for (raw, decoded) in cases {
        let j = judge.judge_trailers(Some(&trailers("14", raw)));
        assert_eq!(
            (j.verdict, j.reason.as_ref()),
            (
                Verdict::Failure,
                format!("grpc UNAVAILABLE: {decoded}").as_str()
            ),
            "{raw}"
        );
    }
}

#[test]
fn is_in_tells_whether_headers_carry_a_status() {
    assert!(GrpcStatus::is_in(&trailers("0", "")));
    let mut map = HeaderMap::new();
    assert!(!GrpcStatus::is_in(&map));
    map.insert("grpc-message", HeaderValue::from_static("x"));
    assert!(!GrpcStatus::is_in(&map));
}

#[test]
fn the_judge_shows_only_the_codes_that_differ_from_their_default() {
    assert_eq!(
        format!("{:?}", GrpcJudge::default()),
        "GrpcJudge { table: {} }"
    );
    let mut config = GrpcConfig::default();
    config.codes.insert(GrpcCode::NotFound, Verdict::Failure);
    config.codes.insert(GrpcCode::Unavailable, Verdict::Failure);
    let shown = format!("{:?}", GrpcJudge::new(&config));
    assert!(shown.contains("\"NOT_FOUND\": Failure"), "{shown}");
    assert!(!shown.contains("UNAVAILABLE"), "the default of 14: {shown}");
}

#[test]
fn a_config_of_the_wrong_type_says_what_was_expected() {
    let cases = [
        ("grpc = 1", "true, false or a table of gRPC rules"),
        (
            "[grpc]\ncodes = 1",
            "a map from gRPC code (UNAVAILABLE, 14) to verdict",
        ),
    ];
    for (text, expected) in cases {
        let error = toml::from_str::<HttpJudgeConfig>(text)
            .unwrap_err()
            .to_string();
        assert!(error.contains(expected), "{text:?}: {error}");
    }
}
