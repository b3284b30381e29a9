//! Trip, disable and reset through real HTTP requests, under the guard: a web page in a
//! browser on the same machine can neither act (cross-origin or simple requests are
//! refused) nor read through DNS rebinding (foreign `Host`); a token is asked for (401)
//! and checked (403).

#![allow(clippy::unwrap_used)]

mod support;

#[path = "support/hostile_posts.rs"]
mod hostile_posts;

use breakerbox::{CircuitBreaker, Phase};
use breakerbox_admin::AdminService;
use support::{request, Served};

fn one(token: Option<&str>) -> (CircuitBreaker, Served) {
    let breaker = CircuitBreaker::builder().name("payments").build().unwrap();
    let mut builder = AdminService::builder()
        .breaker(breaker.clone())
        .allow_host("admin.internal");
    if let Some(token) = token {
        builder = builder.token(token);
    }
    (breaker, Served::service(builder.build().unwrap()))
}

#[test]
fn without_a_token_simple_cross_origin_or_rebound_posts_cannot_trip_a_breaker() {
    let (breaker, served) = one(None);
    let trip = "/breakers/payments/trip";
    let own_origin = format!("http://{}", served.addr);
    for (what, headers) in hostile_posts::cross_origin_posts() {
        let reply = request(served.addr, "POST", trip, &headers, b"");
        assert_eq!(reply.status, 403, "{what}: {}", reply.body);
        assert_eq!(reply.json()["error"], "forbidden", "{what}");
        assert_eq!(breaker.phase(), Phase::Closed, "{what} tripped the breaker");
    }
    let reply = served.act(trip, &[("origin", &own_origin)], "");
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["phase"], "forced_open");
    assert_eq!(breaker.phase(), Phase::ForcedOpen);
    let reply = served.act("/breakers/payments/reset", &[], "");
    assert_eq!(reply.status, 200, "a script without Origin: {}", reply.body);
    assert_eq!(breaker.phase(), Phase::Closed);
}

#[test]
fn reads_answer_only_under_the_services_own_host_names() {
    let (_breaker, served) = one(None);
    let port = served.addr.port();
    for path in ["/status", "/metrics", "/"] {
        for host in ["evil.example".to_string(), format!("evil.example:{port}")] {
            let reply = request(served.addr, "GET", path, &[("host", &host)], b"");
            assert_eq!(reply.status, 403, "{path} under Host {host}");
        }
        for host in [
            format!("127.0.0.1:{port}"),
            format!("localhost:{port}"),
            format!("[::1]:{port}"),
            "ADMIN.internal".to_string(),
        ] {
            let reply = request(served.addr, "GET", path, &[("host", &host)], b"");
            assert_eq!(reply.status, 200, "{path} under Host {host}");
        }
    }
}

#[test]
fn with_a_token_a_missing_one_is_401_with_a_challenge_a_wrong_one_403_and_any_case_scheme_works() {
    let (breaker, served) = one(Some("s3cret"));
    let trip = "/breakers/payments/trip";
    let missing = served.act(trip, &[], "");
    assert_eq!(missing.status, 401, "{}", missing.body);
    assert!(missing
        .header("www-authenticate")
        .is_some_and(|v| v.starts_with("Bearer")));
    let wrong = served.act(trip, &[("authorization", "Bearer nope")], "");
    assert_eq!(wrong.status, 403);
    assert_eq!(wrong.json()["detail"], "wrong token");
    assert_eq!(breaker.phase(), Phase::Closed);
    let lower = served.act(trip, &[("authorization", "bearer s3cret")], "");
    assert_eq!(lower.status, 200, "{}", lower.body);
    assert_eq!(breaker.phase(), Phase::ForcedOpen);
    // With the token, a content type is not required; reads need no token.
    let reply = request(
        served.addr,
        "POST",
        "/breakers/payments/reset",
        &[("authorization", "Bearer s3cret")],
        b"",
    );
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(served.get("/status").status, 200);
    // A wrong token is refused before the name is looked up: nothing is revealed.
    assert_eq!(
        served
            .act(
                "/breakers/nope/trip",
                &[("authorization", "Bearer nope")],
                ""
            )
            .status,
        403
    );
}

#[test]
fn trip_and_disable_for_a_while_show_the_time_left_and_reset_lifts_every_override() {
    let (breaker, served) = one(None);
    let reply = served.act("/breakers/payments/trip?for=10m", &[], "");
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["for_ms"], 600_000);
    let status = served.json("/status");
    let p = &status["breakers"]["payments"];
    assert_eq!(p["phase"], "forced_open");
    let left = p["retry_after_ms"].as_u64().unwrap();
    assert!(left > 590_000 && left <= 600_000, "{p}");

    // A disabled breaker rejects nothing, so its snapshot has no retry-after (rule 10);
    // the answer says how long the override lasts.
    let reply = served.act("/breakers/payments/disable", &[], r#"{"for":"1m 30s"}"#);
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["for_ms"], 90_000);
    assert_eq!(breaker.phase(), Phase::Disabled);
    assert_eq!(
        served.json("/status")["breakers"]["payments"]["phase"],
        "disabled"
    );

    let reply = served.act("/breakers/payments/trip", &[], "{}");
    assert_eq!(reply.status, 200);
    assert!(reply.json()["for_ms"].is_null());
    assert!(served.json("/status")["breakers"]["payments"]["retry_after_ms"].is_null());

    let reply = served.act("/breakers/payments/reset", &[], "");
    assert_eq!(reply.json()["phase"], "closed");
    assert_eq!(breaker.phase(), Phase::Closed);
}

#[test]
fn shadow_admits_what_the_breaker_would_reject_and_status_counts_it_until_unshadow() {
    let (breaker, served) = one(None);
    served.act("/breakers/payments/trip", &[], "");
    assert!(breaker.try_acquire().is_err());

    let reply = served.act("/breakers/payments/shadow", &[], "");
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["action"], "shadow");
    assert_eq!(
        reply.json()["phase"],
        "forced_open",
        "shadow changes no phase"
    );
    assert!(breaker.is_shadow());
    for _ in 0..3 {
        assert!(
            breaker.try_acquire().is_ok(),
            "in shadow, nothing is rejected"
        );
    }
    let p = served.json("/status")["breakers"]["payments"].clone();
    assert_eq!(
        (&p["shadow"], &p["shadow_rejections"]),
        (&true.into(), &3.into()),
        "{p}"
    );

    let reply = served.act("/breakers/payments/shadow?for=10m", &[], "");
    assert_eq!(
        reply.status, 400,
        "shadow takes no duration: {}",
        reply.body
    );

    let reply = served.act("/breakers/payments/unshadow", &[], "");
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(!breaker.is_shadow());
    assert!(breaker.try_acquire().is_err());
    let p = served.json("/status")["breakers"]["payments"].clone();
    assert_eq!(
        (&p["shadow"], &p["shadow_rejections"]),
        (&false.into(), &3.into()),
        "{p}"
    );
}
