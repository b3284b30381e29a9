//! The admin listener cannot be turned against what it protects: a web page open in a
//! browser on the same machine can neither trip a breaker (cross-origin or simple
//! requests are refused) nor read `/status` through DNS rebinding (foreign `Host`).

#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

#[path = "support/proxy_harness.rs"]
mod harness;

#[path = "../../breakerbox-admin/tests/support/hostile_posts.rs"]
mod hostile_posts;

use harness::{admin_post, request, temp_dir, ProxyProcess, Upstream};

fn start(name: &str, admin_extra: &str) -> (Upstream, ProxyProcess) {
    let upstream = Upstream::start();
    let config = format!(
        "listen = \"127.0.0.1:0\"\n[admin]\nlisten = \"127.0.0.1:0\"\n{admin_extra}\n\
         [[upstream]]\nname = \"payments\"\nroute = \"/\"\nurl = \"{}\"\n",
        upstream.url()
    );
    let proxy = ProxyProcess::start(&temp_dir(name), &config);
    (upstream, proxy)
}

#[test]
fn without_a_token_simple_or_cross_origin_posts_cannot_trip_a_breaker() {
    let (_upstream, proxy) = start("admin-csrf", "");
    let own = proxy.admin.to_string();
    let own_origin = format!("http://{own}");
    let trip = "/breakers/payments/trip";
    for (what, headers) in hostile_posts::cross_origin_posts() {
        let reply = request(proxy.admin, "POST", trip, &headers, b"");
        assert_eq!(reply.status, 403, "{what}: {}", reply.body);
        assert_eq!(
            proxy.phase("payments"),
            "closed",
            "{what} tripped the breaker"
        );
    }
    let reply = admin_post(proxy.admin, trip, &[("origin", &own_origin)]);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let reply = admin_post(proxy.admin, "/breakers/payments/reset", &[]);
    assert_eq!(
        reply.status, 200,
        "a script without Origin (curl): {}",
        reply.body
    );
    assert_eq!(proxy.phase("payments"), "closed");
}

#[test]
fn status_metrics_and_the_dashboard_answer_only_under_this_listeners_own_host() {
    let (_upstream, proxy) = start("admin-host", "hosts = [\"admin.internal\"]");
    let port = proxy.admin.port();
    for path in ["/status", "/metrics", "/"] {
        for host in ["evil.example".to_string(), format!("evil.example:{port}")] {
            let reply = request(proxy.admin, "GET", path, &[("host", &host)], b"");
            assert_eq!(
                reply.status, 403,
                "{path} under Host {host}: {}",
                reply.body
            );
        }
        for host in [
            format!("127.0.0.1:{port}"),
            format!("localhost:{port}"),
            format!("[::1]:{port}"),
            "admin.internal".to_string(),
        ] {
            let reply = request(proxy.admin, "GET", path, &[("host", &host)], b"");
            assert_eq!(
                reply.status, 200,
                "{path} under Host {host}: {}",
                reply.body
            );
        }
    }
}

#[test]
fn with_a_token_a_missing_one_is_401_with_a_challenge_a_wrong_one_403_and_any_case_scheme_works() {
    let (_upstream, proxy) = start("admin-token-401", "token = \"s3cret\"");
    let trip = "/breakers/payments/trip";
    let missing = admin_post(proxy.admin, trip, &[]);
    assert_eq!(missing.status, 401, "{}", missing.body);
    assert!(
        missing
            .header("www-authenticate")
            .is_some_and(|v| v.starts_with("Bearer")),
        "{:?}",
        missing.headers
    );
    let wrong = admin_post(proxy.admin, trip, &[("authorization", "Bearer nope")]);
    assert_eq!(wrong.status, 403);
    assert_eq!(proxy.phase("payments"), "closed");
    let lower = admin_post(proxy.admin, trip, &[("authorization", "bearer s3cret")]);
    assert_eq!(lower.status, 200, "{}", lower.body);
    assert_eq!(proxy.phase("payments"), "forced_open");
}
