//! The exchange table (`breakerbox-http/tests/exchange/cases.rs`) through the tower
//! layer's HTTP form, with a hyper client against a real upstream on 127.0.0.1.

#![allow(clippy::unwrap_used)] // tests and their helpers unwrap

#[path = "../../breakerbox-http/tests/exchange/cases.rs"]
mod cases;
#[path = "../../breakerbox-http/tests/exchange/loopback.rs"]
mod loopback;
#[path = "http/upstream.rs"]
#[allow(dead_code)]
mod upstream;

use breakerbox::Verdict;
use breakerbox_http::{Judgement, TransportError};
use breakerbox_tower::CircuitBreakerLayer;
use cases::CASES;
use http_body_util::BodyExt;
use tower::{Service, ServiceBuilder, ServiceExt};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_case_of_the_table_is_judged_as_the_table_says_by_the_tower_layer() {
    for case in CASES {
        let breaker = loopback::breaker_for(case).await;
        let server = loopback::serve(case.upstream).await;
        let mut client = ServiceBuilder::new()
            .layer(CircuitBreakerLayer::new(breaker.clone()).http(case.http_judge()))
            .service(upstream::client());
        let before = breaker.snapshot();
        let result = client
            .ready()
            .await
            .unwrap()
            .call(upstream::get_request(server.addr))
            .await;
        let recorded = loopback::recorded(case, &breaker, &before);
        match result {
            Ok(response) => {
                let judgement = response
                    .extensions()
                    .get::<Judgement>()
                    .cloned()
                    .unwrap_or_else(|| panic!("{}: no judgement in the response", case.name));
                case.check(
                    "tower",
                    judgement.verdict,
                    &judgement.reason,
                    judgement.retry_after,
                );
                // The caller still gets the body it was sent (or the error that cut it).
                let _ = response.into_body().collect().await;
            }
            Err(error) => {
                // No response: the inner error is handed on; its kind is what was judged.
                let reason = TransportError::classify(&*error).reason();
                case.check("tower", Verdict::Failure, reason, None);
            }
        }
        assert_eq!(
            recorded, case.verdict,
            "tower: {}: the breaker recorded another verdict",
            case.name
        );
    }
}
