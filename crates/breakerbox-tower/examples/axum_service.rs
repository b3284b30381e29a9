//! An axum service protecting its call to a flaky dependency with `CircuitBreakerLayer`.
//!
//! Two servers start on 127.0.0.1: the "inventory" dependency, which is healthy, then
//! answers 503, then answers 200 with a business error code in the body (`E001`), then
//! recovers; and the "shop" service, whose `/stock` handler calls the inventory through a
//! hyper client wrapped in the breaker layer. The example sends the shop a request every
//! 100 ms for about 3 seconds and prints what happens: every breaker transition, every
//! answer, and how many requests the inventory actually received. While the breaker is
//! open the shop answers at once and the inventory sees nothing.
//!
//! Run it with `cargo run -p breakerbox-tower --example axum_service`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use breakerbox::{CircuitBreaker, CircuitOpen, Event, EventKind};
use breakerbox_http::HttpJudge;
use breakerbox_tower::judging::Http;
use breakerbox_tower::select::Single;
use breakerbox_tower::{BoxError, CircuitBreakerLayer, CircuitBreakerService};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::time::Instant;
use tower::{ServiceBuilder, ServiceExt};

type HttpClient = Client<HttpConnector, Full<Bytes>>;
type Guarded = CircuitBreakerService<HttpClient, Single<CircuitBreaker>, Http>;

/// The dependency: what it answers depends on how long the example has been running.
#[derive(Clone)]
struct Inventory {
    started: Instant,
    hits: Arc<AtomicUsize>,
}

async fn inventory(State(inv): State<Inventory>) -> Response {
    inv.hits.fetch_add(1, Ordering::SeqCst);
    let t = inv.started.elapsed();
    if t < Duration::from_millis(500) || t >= Duration::from_millis(1900) {
        (StatusCode::OK, r#"{"stock":42}"#).into_response()
    } else if t < Duration::from_millis(1300) {
        (StatusCode::SERVICE_UNAVAILABLE, "database is down").into_response()
    } else {
        (
            StatusCode::OK,
            r#"{"error_code":"E001","message":"stale replica"}"#,
        )
            .into_response()
    }
}

#[derive(Clone)]
struct Shop {
    inventory: SocketAddr,
    client: Guarded,
}

/// The protected handler: the dependency's answer is handed on; while the breaker is open
/// the shop answers 503 itself, at once.
async fn stock(State(shop): State<Shop>) -> Response {
    let request = http::Request::get(format!("http://{}/", shop.inventory))
        .body(Full::default())
        .expect("a valid request");
    match shop.client.oneshot(request).await {
        Ok(response) => response.map(Body::new),
        Err(error) => match error.downcast_ref::<CircuitOpen>() {
            Some(open) => {
                let after = open.retry_after().unwrap_or_default().as_millis();
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("inventory unavailable; retry in {after} ms"),
                )
                    .into_response()
            }
            None => (StatusCode::BAD_GATEWAY, error.to_string()).into_response(),
        },
    }
}

async fn serve(app: Router) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(addr)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let started = Instant::now();
    let hits = Arc::new(AtomicUsize::new(0));
    let inventory_addr = serve(
        Router::new()
            .route("/", get(inventory))
            .with_state(Inventory {
                started,
                hits: hits.clone(),
            }),
    )
    .await?;

    let opened = Arc::new(AtomicUsize::new(0));
    let opened_seen = opened.clone();
    let breaker = CircuitBreaker::builder()
        .name("inventory")
        .consecutive_failures(3)
        .recovery_timeout(Duration::from_millis(400))
        .max_probes(1)
        .required_successes(2)
        .listener(move |event: &Event<'_>| {
            if let EventKind::Transition(t) = event.kind {
                if t.to == breakerbox::Phase::Open {
                    opened_seen.fetch_add(1, Ordering::SeqCst);
                }
                println!(
                    "t={:>4} ms   ** breaker {}: {} -> {}",
                    started.elapsed().as_millis(),
                    event.breaker,
                    t.from,
                    t.to
                );
            }
        })
        .build()?;
    // 5xx fail; a 200 whose body says `"error_code": "E001"` fails too; slow answers fail.
    let judge = HttpJudge::builder()
        .business_pointer("/error_code")
        .business_failure_codes(["E001", "E002"])
        .slow_threshold(Duration::from_millis(800))
        .build()?;
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let guarded = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::new(breaker.clone()).http(judge))
        .service(client.clone());
    let shop_addr = serve(Router::new().route("/stock", get(stock)).with_state(Shop {
        inventory: inventory_addr,
        client: guarded,
    }))
    .await?;
    println!("inventory on http://{inventory_addr}, shop on http://{shop_addr}/stock\n");

    let mut ticker = tokio::time::interval(Duration::from_millis(100));
    for _ in 0..30 {
        ticker.tick().await;
        let request =
            http::Request::get(format!("http://{shop_addr}/stock")).body(Full::default())?;
        let response = client.request(request).await?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes();
        println!(
            "t={:>4} ms   GET /stock -> {status} {:<48} inventory hits: {:>2}   breaker: {}",
            started.elapsed().as_millis(),
            String::from_utf8_lossy(&body),
            hits.load(Ordering::SeqCst),
            breaker.phase(),
        );
    }
    println!(
        "\n30 requests to the shop, {} reached the inventory; the breaker opened {} times and is {}",
        hits.load(Ordering::SeqCst),
        opened.load(Ordering::SeqCst),
        breaker.phase()
    );
    Ok(())
}
