//! No request makes the service panic or answer outside its documented set: generated
//! methods, paths (prefix, names, escapes, actions), headers (Host, Origin, content type,
//! token) and bodies, straight through `AdminService::handle`.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use breakerbox::{CircuitBreaker, Config, Registry};
use breakerbox_admin::{AdminService, PeerAddr};
use http_body_util::BodyExt;
use proptest::prelude::*;

fn services() -> Vec<AdminService> {
    let registry =
        Arc::new(Registry::<String>::new(Config::builder().build().unwrap(), 4).unwrap());
    registry.get(&"a b".to_string()).unwrap();
    let single = CircuitBreaker::builder().name("payments").build().unwrap();
    vec![
        AdminService::builder()
            .breaker(single.clone())
            .registry(registry.clone())
            .build()
            .unwrap(),
        AdminService::builder()
            .breaker(single)
            .registry(registry)
            .token("t0ken")
            .prefix("/admin")
            .allow_host("admin.internal")
            .build()
            .unwrap(),
    ]
}

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("".to_string()),
        Just("admin".to_string()),
        Just("breakers".to_string()),
        Just("status".to_string()),
        Just("metrics".to_string()),
        Just("dashboard".to_string()),
        Just("payments".to_string()),
        Just("a%20b".to_string()),
        Just("trip".to_string()),
        Just("reset".to_string()),
        Just("disable".to_string()),
        Just("shadow".to_string()),
        Just("%".to_string()),
        Just("%f".to_string()),
        Just("%ff%fe".to_string()),
        Just("%2F".to_string()),
        Just("..".to_string()),
        "[a-zA-Z0-9%._~-]{0,12}",
    ]
}

fn path() -> impl Strategy<Value = String> {
    (
        proptest::collection::vec(segment(), 0..6),
        proptest::option::of("[a-z=&%0-9+]{0,20}"),
    )
        .prop_map(|(segments, query)| {
            let mut path = format!("/{}", segments.join("/"));
            if let Some(query) = query {
                path.push('?');
                path.push_str(&query);
            }
            path
        })
}

fn header() -> impl Strategy<Value = (&'static str, String)> {
    prop_oneof![
        prop_oneof![
            Just("127.0.0.1:9090"),
            Just("localhost"),
            Just("admin.internal"),
            Just("evil.example"),
            Just("[::1"),
            Just(""),
        ]
        .prop_map(|h| ("host", h.to_string())),
        prop_oneof![Just("http://127.0.0.1:9090"), Just("null"), Just("x")]
            .prop_map(|o| ("origin", o.to_string())),
        prop_oneof![Just("application/json"), Just("text/plain"), Just(";;")]
            .prop_map(|c| ("content-type", c.to_string())),
        prop_oneof![
            Just("Bearer t0ken"),
            Just("bearer"),
            Just("Basic x"),
            Just(" ")
        ]
        .prop_map(|a| ("authorization", a.to_string())),
    ]
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(Vec::new()),
        Just(br#"{"for":"10m"}"#.to_vec()),
        Just(br#"{"for":"0s"}"#.to_vec()),
        Just(br#"{"for":null}"#.to_vec()),
        Just(br#"{"for":[1]}"#.to_vec()),
        proptest::collection::vec(any::<u8>(), 0..64),
        proptest::collection::vec(any::<u8>(), 5000..5100),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn no_request_panics_the_service_or_gets_an_undocumented_answer(
        which in 0usize..2,
        method in prop_oneof![
            Just("GET"), Just("HEAD"), Just("POST"), Just("PUT"), Just("DELETE"), Just("OPTIONS")
        ],
        path in path(),
        headers in proptest::collection::vec(header(), 0..5),
        body in body(),
        loopback in any::<bool>(),
    ) {
        let Ok(uri) = path.parse::<http::Uri>() else {
            return Ok(());
        };
        let mut builder = http::Request::builder().method(method).uri(uri);
        for (name, value) in &headers {
            builder = builder.header(*name, value.as_str());
        }
        let Ok(mut request) = builder.body(http_body_util::Full::new(bytes::Bytes::from(body)))
        else {
            return Ok(());
        };
        if loopback {
            request.extensions_mut().insert(PeerAddr("127.0.0.1:1".parse().unwrap()));
        }
        let service = services().swap_remove(which);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let response = runtime.block_on(service.handle(request));
        let status = response.status().as_u16();
        prop_assert!(
            [200, 400, 401, 403, 404, 405, 413].contains(&status),
            "{method} {path}: {status}"
        );
        let content_type = response.headers()["content-type"].to_str().unwrap().to_string();
        let body = runtime.block_on(response.into_body().collect()).unwrap().to_bytes();
        if status != 200 {
            prop_assert_eq!(content_type.as_str(), "application/json");
            let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
            prop_assert!(json["error"].is_string());
        }
    }
}
