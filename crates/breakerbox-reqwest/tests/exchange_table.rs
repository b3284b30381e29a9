//! The exchange table (`breakerbox-http/tests/exchange/cases.rs`) through the reqwest
//! middleware, against a real upstream on 127.0.0.1.

#![allow(clippy::unwrap_used)] // tests and their helpers unwrap

#[path = "../../breakerbox-http/tests/exchange/cases.rs"]
mod cases;
#[path = "../../breakerbox-http/tests/exchange/loopback.rs"]
mod loopback;
#[path = "support/server.rs"]
mod server;

use std::sync::Arc;

use breakerbox::{Registry, Verdict};
use breakerbox_http::Judgement;
use breakerbox_reqwest::{transport_error, CircuitBreakerMiddleware};
use cases::CASES;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_case_of_the_table_is_judged_as_the_table_says_by_the_reqwest_middleware() {
    for case in CASES {
        let server = loopback::serve(case.upstream).await;
        let registry = Arc::new(Registry::new(loopback::config_for(case), 4).unwrap());
        let breaker = registry.get(&server.addr.to_string()).unwrap();
        loopback::ready_for(case, &breaker).await;
        let middleware = CircuitBreakerMiddleware::with_registry(registry, case.http_judge());
        let client = reqwest_middleware::ClientBuilder::new(server::plain_client())
            .with(middleware)
            .build();
        let before = breaker.snapshot();
        let result = client.get(format!("http://{}/", server.addr)).send().await;
        let recorded = loopback::recorded(case, &breaker, &before);
        match result {
            Ok(response) => {
                let judgement = response
                    .extensions()
                    .get::<Judgement>()
                    .cloned()
                    .unwrap_or_else(|| panic!("{}: no judgement in the response", case.name));
                case.check(
                    "reqwest",
                    judgement.verdict,
                    &judgement.reason,
                    judgement.retry_after,
                );
                let _ = response.bytes().await;
            }
            Err(error) => {
                // No response, or a body that failed while read for judging: `send()`
                // fails, and the error's kind is what was judged.
                let kind = transport_error(&error);
                let reason = if matches!(case.upstream, cases::Upstream::CutsBody { .. }) {
                    kind.body_reason()
                } else {
                    kind.reason()
                };
                case.check("reqwest", Verdict::Failure, reason, None);
            }
        }
        assert_eq!(
            recorded, case.verdict,
            "reqwest: {}: the breaker recorded another verdict",
            case.name
        );
    }
}
