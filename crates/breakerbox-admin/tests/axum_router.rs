//! The `axum` feature: the service as a router merged into an application's, served by
//! `axum::serve` on 127.0.0.1 with `ConnectInfo` (the peer the guard checks).

#![cfg(feature = "axum")]
#![allow(clippy::unwrap_used)]

mod support;

use breakerbox::{CircuitBreaker, Phase};
use breakerbox_admin::AdminService;
use support::{request, Served};

#[test]
fn the_router_nests_the_service_under_its_prefix_beside_the_applications_own_routes() {
    let payments = CircuitBreaker::builder().name("payments").build().unwrap();
    let admin = AdminService::builder()
        .breaker(payments.clone())
        .prefix("/admin")
        .build()
        .unwrap();
    let served = Served::axum(|| async move {
        axum::Router::new()
            .route("/", axum::routing::get(|| async { "hello" }))
            .merge(breakerbox_admin::router(admin))
    });
    assert_eq!(served.get("/").body, "hello");
    assert_eq!(
        served.json("/admin/status")["breakers"]["payments"]["phase"],
        "closed"
    );
    for page in ["/admin", "/admin/", "/admin/dashboard"] {
        let reply = served.get(page);
        assert_eq!(reply.status, 200, "{page}");
        assert!(reply.body.contains("<title>breakerbox</title>"), "{page}");
    }
    assert_eq!(served.get("/status").status, 404, "axum's own 404");

    // The peer comes from axum's ConnectInfo: a loopback JSON post may act.
    let reply = served.act("/admin/breakers/payments/trip", &[], "");
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(payments.phase(), Phase::ForcedOpen);
    let simple = request(
        served.addr,
        "POST",
        "/admin/breakers/payments/reset",
        &[("content-type", "text/plain")],
        b"",
    );
    assert_eq!(simple.status, 403);
    assert_eq!(payments.phase(), Phase::ForcedOpen);
}

#[test]
fn at_the_root_the_router_is_the_applications_fallback() {
    let payments = CircuitBreaker::builder().name("payments").build().unwrap();
    let admin = AdminService::builder()
        .breaker(payments.clone())
        .token("t0ken")
        .build()
        .unwrap();
    let served = Served::axum(|| async move {
        axum::Router::new()
            .route("/app", axum::routing::get(|| async { "app" }))
            .merge(breakerbox_admin::router(admin))
    });
    assert_eq!(served.get("/app").body, "app");
    assert_eq!(served.get("/status").status, 200);
    assert_eq!(served.get("/elsewhere").json()["error"], "not_found");
    let reply = served.act(
        "/breakers/payments/disable",
        &[("authorization", "Bearer t0ken")],
        "",
    );
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(payments.phase(), Phase::Disabled);
}
