//! A reqwest client protected by breakerbox, calling a flaky server it starts itself on
//! 127.0.0.1, printing every request and every breaker transition. Finishes in a few
//! seconds.
//!
//! ```text
//! cargo run -p breakerbox-reqwest --example client
//! ```
//!
//! The server's script, by request received: 4 good answers, 3 × 503 (the breaker trips),
//! then a 503, a 200 that takes 400 ms and a 200 whose body says `E001` (three failed
//! probes), then good answers (two successful probes close the breaker).

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use breakerbox::{Config, EventKind, Phase, Registry};
use breakerbox_http::{HttpJudge, Judgement};
use breakerbox_reqwest::{circuit_open, CircuitBreakerMiddleware};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = start_flaky_server().await?;
    println!("flaky server on http://{addr}");

    let config = Config::builder()
        .consecutive_failures(3)
        .recovery_timeout(Duration::from_millis(400))
        .max_probes(1)
        .required_successes(2)
        .build()?;
    let judge = HttpJudge::builder()
        .slow_threshold(Duration::from_secs(1))
        .probe_slow_threshold(Duration::from_millis(200))
        .business_pointer("/error_code")
        .business_failure_codes(["E001", "E002", "E003"])
        .build()?;
    let registry =
        Registry::new(config, 100)?.with_listener(Arc::new(|event: &breakerbox::Event<'_>| {
            if let EventKind::Transition(t) = event.kind {
                println!(
                    "    breaker {}: {} -> {} ({:?})",
                    event.breaker, t.from, t.to, t.reason
                );
            }
        }));
    let registry = Arc::new(registry);
    let client = reqwest_middleware::ClientBuilder::new(
        reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(2))
            .build()?,
    )
    .with(CircuitBreakerMiddleware::with_registry(
        registry.clone(),
        judge,
    ))
    .build();

    let url = format!("http://{addr}/quote");
    let mut recovered_at = None;
    for i in 1..=80 {
        match client.get(&url).send().await {
            Ok(response) => {
                let judged = response.extensions().get::<Judgement>().cloned();
                let status = response.status();
                let body = response.text().await.unwrap_or_default();
                match judged {
                    Some(j) => println!("#{i:02} {status} -> {j}  body {body}"),
                    None => println!("#{i:02} {status} (not judged)"),
                }
            }
            Err(error) => match circuit_open(&error) {
                Some(open) => println!(
                    "#{i:02} not sent: {} (retry after {:?})",
                    open.phase(),
                    Duration::from_millis(open.retry_after().unwrap_or_default().as_millis() as u64)
                ),
                None => println!("#{i:02} error: {error}"),
            },
        }
        let phase = registry.get(&addr.to_string())?.phase();
        if phase == Phase::Closed && i > 10 && recovered_at.is_none() {
            recovered_at = Some(i);
        }
        if recovered_at.is_some_and(|at| i >= at + 3) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for snapshot in registry.snapshots() {
        println!("final: {} is {}", snapshot.name, snapshot.phase);
    }
    Ok(())
}

/// A server that answers by the number of requests it has received.
async fn start_flaky_server() -> std::io::Result<std::net::SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let received = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let received = received.clone();
            tokio::spawn(async move {
                let service = service_fn(move |_request| {
                    let n = received.fetch_add(1, Ordering::SeqCst) + 1;
                    async move { Ok::<_, Infallible>(scripted(n).await) }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(addr)
}

async fn scripted(n: usize) -> hyper::Response<Full<Bytes>> {
    let (status, body, delay_ms) = match n {
        1..=4 => (200, r#"{"price":42}"#, 10),
        5..=8 => (503, r#"{"error":"overloaded"}"#, 10),
        9 => (200, r#"{"price":42}"#, 400),
        10 => (200, r#"{"error_code":"E001"}"#, 10),
        _ => (200, r#"{"price":43}"#, 10),
    };
    tokio::time::sleep(Duration::from_millis(delay_ms)).await;
    let mut response = hyper::Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or_default();
    response
}
