//! `/status`, routing and answers, against the service served by hyper on 127.0.0.1.

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use breakerbox::contract::{Breaker, LocalAdmission};
use breakerbox::{CircuitBreaker, Config, Phase, Registry};
use breakerbox_admin::{AdminService, Listed, TransitionLog};
use support::{request, Served};

fn fail(breaker: &CircuitBreaker) {
    match Breaker::try_acquire_local(breaker) {
        LocalAdmission::Admitted(permit) => permit.failure(),
        other => panic!("closed admits: {other:?}"),
    }
}

#[test]
fn status_shows_every_breakers_snapshot_config_and_transitions_after_a_scripted_trip() {
    let log = TransitionLog::new();
    let payments = CircuitBreaker::builder()
        .name("payments")
        .consecutive_failures(2)
        .recovery_timeout(Duration::from_secs(300))
        .listener(log.clone())
        .build()
        .unwrap();
    let search = CircuitBreaker::builder()
        .name("search")
        .failure_rate(0.5)
        .count_window(10)
        .min_calls(4)
        .listener(log.clone())
        .build()
        .unwrap();
    let served = Served::service(
        AdminService::builder()
            .source(Listed::new(payments.clone()).with_detail("upstream", "http://10.0.0.7"))
            .breaker(search.clone())
            .transitions(log)
            .build()
            .unwrap(),
    );
    fail(&payments);
    fail(&payments);
    fail(&search);
    assert_eq!(payments.phase(), Phase::Open);

    let reply = served.get("/status");
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(reply.header("cache-control"), Some("no-store"));
    let status = reply.json();
    let p = &status["breakers"]["payments"];
    assert_eq!(p["name"], "payments");
    assert_eq!(p["phase"], "open");
    assert_eq!(p["generation"], 1);
    assert_eq!(p["trips"], 1);
    let retry = p["retry_after_ms"].as_u64().unwrap();
    assert!(retry > 290_000 && retry <= 300_000, "{p}");
    assert_eq!(p["config"]["consecutive_failures"], 2);
    assert_eq!(p["config"]["recovery_timeout"], "300s");
    assert_eq!(p["upstream"], "http://10.0.0.7", "the source's details");
    let s = &status["breakers"]["search"];
    assert_eq!(s["phase"], "closed");
    assert_eq!(s["window"]["calls"], 1);
    assert_eq!(s["window"]["failures"], 1);
    assert_eq!(s["failure_rate"], 1.0);
    assert_eq!(s["consecutive_failures"], 1);
    assert!(s["retry_after_ms"].is_null());
    assert_eq!(s["config"]["window"], "count:10");
    let t = &status["transitions"][0];
    assert_eq!(
        (&t["breaker"], &t["from"], &t["to"], &t["reason"]),
        (
            &"payments".into(),
            &"closed".into(),
            &"open".into(),
            &"consecutive_failures".into()
        )
    );
    assert!(status["uptime_ms"].is_u64());
}

#[test]
fn a_registry_is_listed_as_it_grows_and_an_action_on_an_unknown_name_is_404_and_creates_nothing() {
    let registry =
        Arc::new(Registry::<String>::new(Config::builder().build().unwrap(), 100).unwrap());
    let served = Served::service(
        AdminService::builder()
            .registry(registry.clone())
            .build()
            .unwrap(),
    );
    assert_eq!(served.json("/status")["breakers"], serde_json::json!({}));
    registry.get(&"api.example.com:443".to_string()).unwrap();
    let status = served.json("/status");
    assert_eq!(status["breakers"]["api.example.com:443"]["phase"], "closed");

    let reply = served.act("/breakers/api.example.com%3A443/trip", &[], "");
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        registry
            .get(&"api.example.com:443".to_string())
            .unwrap()
            .phase(),
        Phase::ForcedOpen
    );

    let reply = served.act("/breakers/typo/trip", &[], "");
    assert_eq!(reply.status, 404);
    assert_eq!(reply.json()["error"], "unknown_breaker");
    assert_eq!(reply.json()["breaker"], "typo");
    assert_eq!(registry.len(), 1, "the typo made no breaker");
}

#[test]
fn wrong_methods_are_405_with_allow_and_unknown_paths_and_actions_404() {
    let breaker = CircuitBreaker::builder().name("payments").build().unwrap();
    let served = Served::service(AdminService::builder().breaker(breaker).build().unwrap());
    for path in ["/", "/dashboard", "/status", "/metrics"] {
        let reply = request(served.addr, "POST", path, &[], b"");
        assert_eq!(reply.status, 405, "{path}");
        assert_eq!(reply.header("allow"), Some("GET, HEAD"), "{path}");
        assert_eq!(reply.json()["error"], "method_not_allowed");
        let head = request(served.addr, "HEAD", path, &[], b"");
        assert_eq!(head.status, 200, "HEAD {path}");
    }
    let reply = served.get("/breakers/payments/trip");
    assert_eq!(reply.status, 405);
    assert_eq!(reply.header("allow"), Some("POST"));
    let reply = request(served.addr, "DELETE", "/breakers/payments/reset", &[], b"");
    assert_eq!((reply.status, reply.header("allow")), (405, Some("POST")));

    let reply = served.act("/breakers/payments/ramp", &[], "");
    assert_eq!(reply.status, 404, "no ramp action");
    assert_eq!(
        reply.json()["detail"],
        "actions: trip, reset, disable, shadow, unshadow"
    );
    for path in ["/nope", "/status/", "/breakers/payments", "/breakers//trip"] {
        let reply = served.get(path);
        assert_eq!(reply.status, 404, "{path}");
        assert_eq!(reply.json()["error"], "not_found", "{path}");
    }
    let reply = served.act("/breakers/%E2%28/trip", &[], "");
    assert_eq!(
        (reply.status, reply.json()["parameter"].as_str()),
        (400, Some("name"))
    );
}

#[test]
fn a_bad_duration_or_parameter_is_400_naming_it_and_changes_nothing() {
    let breaker = CircuitBreaker::builder().name("payments").build().unwrap();
    let served = Served::service(
        AdminService::builder()
            .breaker(breaker.clone())
            .build()
            .unwrap(),
    );
    for (target, body, parameter) in [
        ("/breakers/payments/trip?for=soon", "", "for"),
        ("/breakers/payments/trip?for=0s", "", "for"),
        ("/breakers/payments/disable", r#"{"for":"-1m"}"#, "for"),
        ("/breakers/payments/disable", r#"{"for":60}"#, "for"),
        ("/breakers/payments/reset?for=1m", "", "for"),
        ("/breakers/payments/trip?until=1m", "", "until"),
        ("/breakers/payments/trip", r#"{"until":"1m"}"#, "until"),
        ("/breakers/payments/trip", "not json", "body"),
    ] {
        let reply = served.act(target, &[], body);
        assert_eq!(reply.status, 400, "{target} {body}: {}", reply.body);
        let json = reply.json();
        assert_eq!(json["parameter"], parameter, "{target} {body}: {json}");
        assert!(
            json["detail"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{parameter}: ")),
            "{json}"
        );
        assert_eq!(breaker.phase(), Phase::Closed, "{target} {body}");
    }
}

#[test]
fn an_oversized_action_body_is_413_and_changes_nothing() {
    let breaker = CircuitBreaker::builder().name("payments").build().unwrap();
    let served = Served::service(
        AdminService::builder()
            .breaker(breaker.clone())
            .build()
            .unwrap(),
    );
    let body = format!(r#"{{"for":"1m","pad":"{}"}}"#, "x".repeat(10_000));
    let reply = served.act("/breakers/payments/trip", &[], &body);
    assert_eq!(reply.status, 413, "{}", reply.body);
    assert_eq!(breaker.phase(), Phase::Closed);
}

#[test]
fn under_a_prefix_the_service_answers_there_and_nowhere_else() {
    let breaker = CircuitBreaker::builder().name("payments").build().unwrap();
    let served = Served::service(
        AdminService::builder()
            .breaker(breaker.clone())
            .prefix("/ops/admin")
            .build()
            .unwrap(),
    );
    assert_eq!(
        served.json("/ops/admin/status")["breakers"]["payments"]["phase"],
        "closed"
    );
    for page in ["/ops/admin", "/ops/admin/", "/ops/admin/dashboard"] {
        let reply = served.get(page);
        assert_eq!(reply.status, 200, "{page}");
        assert!(reply
            .header("content-type")
            .unwrap()
            .starts_with("text/html"));
    }
    for outside in ["/status", "/", "/ops/administrator/status", "/ops"] {
        assert_eq!(served.get(outside).status, 404, "{outside}");
    }
    let reply = served.act("/ops/admin/breakers/payments/disable", &[], "");
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(breaker.phase(), Phase::Disabled);
}

#[test]
fn the_dashboard_page_has_no_external_assets_and_may_not_be_framed() {
    let served = Served::service(
        AdminService::builder()
            .title("payments-api")
            .build()
            .unwrap(),
    );
    let page = served.get("/");
    assert_eq!(page.status, 200);
    assert!(page.body.contains("<title>payments-api</title>"));
    assert!(!page.body.contains("src=\"http") && !page.body.contains("href=\"http"));
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    assert!(page
        .header("content-security-policy")
        .unwrap()
        .contains("frame-ancestors 'none'"));
}

#[test]
fn a_status_section_is_answered_afresh_at_each_request_and_cannot_take_the_documents_keys() {
    let hits = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = hits.clone();
    let served = Served::service(
        AdminService::builder()
            .status_section("server", move || {
                let n = counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                serde_json::json!({ "asked": n })
            })
            .build()
            .unwrap(),
    );
    assert_eq!(served.json("/status")["server"]["asked"], 1);
    let status = served.json("/status");
    assert_eq!(status["server"]["asked"], 2, "computed at each request");
    assert!(status["uptime_ms"].is_u64(), "the document's own keys stay");
    assert_eq!(status["breakers"], serde_json::json!({}));

    for key in ["breakers", "uptime_ms", "transitions", "", "a b", "x\n"] {
        let error = AdminService::builder()
            .status_section(key, || serde_json::Value::Null)
            .build()
            .unwrap_err();
        assert!(
            error.to_string().contains("status_section"),
            "{key:?}: {error}"
        );
    }
    let twice = AdminService::builder()
        .status_section("server", || serde_json::Value::Null)
        .status_section("server", || serde_json::Value::Null)
        .build();
    assert!(twice.is_err(), "one key, one section");
}
