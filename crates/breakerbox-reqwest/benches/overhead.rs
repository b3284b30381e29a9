//! Per-request overhead of the middleware against a bare reqwest request to the same
//! loopback server (keep-alive, small JSON body), printed as a table.
//!
//! ```text
//! cargo bench -p breakerbox-reqwest --bench overhead
//! ```
//!
//! The variants run interleaved, in rounds (A B C D E, A B C D E, ...), so that load from
//! other processes on the machine hits them all alike; each line reports the median over
//! rounds of the mean time per request, and the overhead is the median of the per-round
//! differences against the bare client. Note: with `RUST_BACKTRACE=1` in the environment
//! (and no `RUST_LIB_BACKTRACE=0`) `anyhow` captures a backtrace for every rejection.
#![allow(clippy::disallowed_methods)] // a bench binary times itself with Instant

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use breakerbox::{Config, Registry};
use breakerbox_http::HttpJudge;
use breakerbox_reqwest::CircuitBreakerMiddleware;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::runtime::Runtime;

const BODY: &[u8] = br#"{"error_code":null,"price":42,"currency":"EUR"}"#;

/// Starts the server on its own runtime thread and returns its address.
fn start_server() -> std::net::SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("server runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            tx.send(listener.local_addr().expect("addr"))
                .expect("send addr");
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                tokio::spawn(async move {
                    let service = service_fn(|_request| async {
                        Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from_static(
                            BODY,
                        ))))
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
    });
    rx.recv().expect("server address")
}

fn config() -> Config {
    Config::builder()
        .consecutive_failures(5)
        .recovery_timeout(Duration::from_secs(3600))
        .build()
        .expect("config")
}

fn plain() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client")
}

fn protected(
    judge: HttpJudge,
) -> (
    reqwest_middleware::ClientWithMiddleware,
    Arc<Registry<String>>,
) {
    let registry = Arc::new(Registry::new(config(), 16).expect("registry"));
    let client = reqwest_middleware::ClientBuilder::new(plain())
        .with(CircuitBreakerMiddleware::with_registry(
            registry.clone(),
            judge,
        ))
        .build();
    (client, registry)
}

/// Mean time per call of `per_round` calls of `f`.
fn timed<F, Fut>(rt: &Runtime, per_round: u32, f: &F) -> Duration
where
    F: Fn() -> Fut,
    Fut: Future<Output = ()>,
{
    let start = Instant::now();
    rt.block_on(async {
        for _ in 0..per_round {
            f().await;
        }
    });
    start.elapsed() / per_round
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not: a smoke run then.
    let (rounds, per_round) = if std::env::args().any(|a| a == "--bench") {
        (40, 250)
    } else {
        (1, 5)
    };
    let addr = start_server();
    let url = format!("http://{addr}/quote");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");

    let bare = plain();
    let empty = reqwest_middleware::ClientBuilder::new(plain()).build();
    let (status_only, _) = protected(
        HttpJudge::builder()
            .slow_threshold(Duration::from_secs(1))
            .build()
            .expect("judge"),
    );
    let (business, _) = protected(
        HttpJudge::builder()
            .business_pointer("/error_code")
            .business_failure_codes(["E001", "E002"])
            .build()
            .expect("judge"),
    );
    let (open, registry) = protected(HttpJudge::default());
    registry
        .get(&addr.to_string())
        .expect("breaker")
        .force_open();

    let names = [
        "bare reqwest::Client",
        "reqwest-middleware, no middleware",
        "breaker: status + latency",
        "breaker: + business codes (body read)",
        "breaker open: rejected, nothing sent",
    ];
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    for round in 0..=rounds {
        let times = [
            timed(&rt, per_round, &|| async {
                let r = bare.get(&url).send().await.expect("send");
                r.bytes().await.expect("body");
            }),
            timed(&rt, per_round, &|| async {
                let r = empty.get(&url).send().await.expect("send");
                r.bytes().await.expect("body");
            }),
            timed(&rt, per_round, &|| async {
                let r = status_only.get(&url).send().await.expect("send");
                r.bytes().await.expect("body");
            }),
            timed(&rt, per_round, &|| async {
                let r = business.get(&url).send().await.expect("send");
                r.bytes().await.expect("body");
            }),
            timed(&rt, per_round, &|| async {
                assert!(open.get(&url).send().await.is_err());
            }),
        ];
        if round == 0 {
            continue; // warm-up: connections, allocator, caches
        }
        for (sample, time) in samples.iter_mut().zip(times) {
            sample.push(time.as_secs_f64() * 1e6);
        }
    }
    println!(
        "per request, loopback, {rounds} rounds x {per_round} requests, median of round means"
    );
    println!("{:<40} {:>10} {:>14}", "variant", "us/req", "vs bare (us)");
    for (i, name) in names.iter().enumerate() {
        let diffs: Vec<f64> = samples[i]
            .iter()
            .zip(&samples[0])
            .map(|(a, b)| a - b)
            .collect();
        println!(
            "{:<40} {:>10.2} {:>+14.2}",
            name,
            median(samples[i].clone()),
            median(diffs)
        );
    }
}
