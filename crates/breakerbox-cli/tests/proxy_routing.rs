//! `breakerbox proxy` routes what it forwards: dot-segments, `Host` headers, absolute-form
//! targets and CONNECT, each over a raw loopback socket.

#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

#[path = "support/proxy_harness.rs"]
mod harness;

use harness::{listeners, read_reply, send_raw, temp_dir, ProxyProcess, Reply, Upstream};

struct Setup {
    api: Upstream,
    admin: Upstream,
    proxy: ProxyProcess,
}

fn setup(name: &str) -> Setup {
    let api = Upstream::start();
    let admin = Upstream::start();
    api.answer(200, "api");
    admin.answer(200, "admin");
    let config = format!(
        "{}[[upstream]]\nname = \"api\"\nroute = \"/api/\"\nurl = \"{}/base\"\nstrip_prefix = true\n\
         [[upstream]]\nname = \"internal\"\nhost = \"internal.example\"\nurl = \"{}\"\n",
        listeners(),
        api.url(),
        admin.url()
    );
    let proxy = ProxyProcess::start(&temp_dir(name), &config);
    Setup { api, admin, proxy }
}

fn raw(proxy: &ProxyProcess, text: &str) -> Reply {
    read_reply(send_raw(proxy.addr, text.as_bytes())).unwrap()
}

#[test]
fn dot_segments_cannot_escape_the_route_prefix_or_the_base_path() {
    let s = setup("routing-dot-segments");
    for target in [
        "/api/../secret",
        "/api/%2e%2e/secret",
        "/api/%2E%2e/secret",
        "/api/.%2e/secret",
        "/api/x/../../secret",
    ] {
        let reply = raw(
            &s.proxy,
            &format!("GET {target} HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n"),
        );
        assert!(
            reply.status == 404 || reply.status == 400,
            "{target}: {} {}",
            reply.status,
            reply.body
        );
    }
    assert_eq!(
        s.api.count(),
        0,
        "a dot-segment reached the upstream: {:?}",
        s.api.last()
    );
    let reply = raw(
        &s.proxy,
        "GET /api/v1/./users/../items HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n",
    );
    assert_eq!(reply.status, 200);
    assert_eq!(s.api.last().target, "/base/v1/items");
    let reply = raw(
        &s.proxy,
        "GET /api/../../etc/passwd HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n",
    );
    assert_eq!(reply.status, 400, "{}", reply.body);
}

#[test]
fn two_host_headers_or_none_on_http_1_1_are_400() {
    let s = setup("routing-host-headers");
    let reply = raw(
        &s.proxy,
        "GET /api/x HTTP/1.1\r\nhost: a\r\nhost: internal.example\r\nconnection: close\r\n\r\n",
    );
    assert_eq!(reply.status, 400, "{}", reply.body);
    let reply = raw(&s.proxy, "GET /api/x HTTP/1.1\r\nconnection: close\r\n\r\n");
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(s.api.count() + s.admin.count(), 0);
    let reply = raw(&s.proxy, "GET /api/x HTTP/1.0\r\n\r\n");
    assert_eq!(reply.status, 200, "HTTP/1.0 needs no Host");
}

#[test]
fn an_absolute_form_target_routes_by_its_authority_not_the_host_header() {
    let s = setup("routing-absolute-form");
    let reply = raw(
        &s.proxy,
        "GET http://internal.example/private HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n",
    );
    assert_eq!((reply.status, reply.body.as_str()), (200, "admin"));
    let seen = s.admin.last();
    assert_eq!(seen.target, "/private");
    assert_eq!(
        seen.headers.get("host").map(String::as_str),
        Some("internal.example")
    );
    assert_eq!(s.api.count(), 0);
}

#[test]
fn connect_is_405() {
    let s = setup("routing-connect");
    let reply = raw(
        &s.proxy,
        "CONNECT internal.example:443 HTTP/1.1\r\nhost: internal.example:443\r\n\r\n",
    );
    assert_eq!(reply.status, 405, "{}", reply.body);
    assert_eq!(s.api.count() + s.admin.count(), 0);
}
