//! Criterion benches of the layer's per-request overhead against the bare inner service:
//! in process (an inner service whose future is ready at once, polled by hand) and against
//! an axum server on 127.0.0.1 through a hyper client. Every service is built once, outside
//! the measured loop; each iteration is one `poll_ready` + `call` + completion.
//!
//! The peer row runs tower-resilience 0.13's circuit breaker layer on the same inner service.
//!
//! Run: `cargo bench -p breakerbox-tower --bench overhead -- --warm-up-time 1 --measurement-time 3`

use std::convert::Infallible;
use std::future::{ready, Future, Ready};
use std::hint::black_box;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use breakerbox::{CircuitBreaker, Config, DefaultJudge, Phase, Registry};
use breakerbox_http::HttpJudge;
use breakerbox_tower::CircuitBreakerLayer;
use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tower::{Layer, Service, ServiceExt};

type Group<'a> = BenchmarkGroup<'a, criterion::measurement::WallTime>;

/// An inner service whose answer is ready at once: what is left is the layer's cost.
#[derive(Clone)]
struct Echo;

impl Service<u64> for Echo {
    type Response = u64;
    type Error = Infallible;
    type Future = Ready<Result<u64, Infallible>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, n: u64) -> Self::Future {
        ready(Ok(n))
    }
}

/// An inner HTTP service answering a small JSON body at once.
#[derive(Clone)]
struct HttpEcho;

impl Service<http::Request<()>> for HttpEcho {
    type Response = http::Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, _: http::Request<()>) -> Self::Future {
        let body = Full::new(Bytes::from_static(br#"{"error_code":"OK","data":"fine"}"#));
        ready(Ok(http::Response::new(body)))
    }
}

/// One `poll_ready` + `call`, polling the future to completion by hand.
fn once<S, R>(service: &mut S, request: R) -> Option<S::Response>
where
    S: Service<R>,
{
    let mut cx = Context::from_waker(Waker::noop());
    match service.poll_ready(&mut cx) {
        Poll::Ready(Ok(())) => {}
        _ => return None,
    }
    let mut future = pin!(service.call(request));
    // Every future here is ready at once or after a few polls; a future that needs a
    // runtime to wake it would never be: give up rather than spin.
    for _ in 0..1_000 {
        if let Poll::Ready(result) = future.as_mut().poll(&mut cx) {
            return result.ok();
        }
    }
    None
}

fn bench_in_process<S: Service<u64>>(group: &mut Group<'_>, name: &str, mut service: S) {
    group.bench_function(name, |b| {
        b.iter(|| black_box(once(&mut service, black_box(7))))
    });
}

fn breaker() -> CircuitBreaker {
    CircuitBreaker::builder()
        .consecutive_failures(5)
        .recovery_timeout(Duration::from_secs(3600))
        .build()
        .expect("valid config")
}

fn in_process(c: &mut Criterion) {
    let mut group = c.benchmark_group("in_process");
    // What the breaker itself costs per call (the permit the layer takes and records).
    let alone = breaker();
    group.bench_function("breaker_alone/try_acquire_owned+success", |b| {
        b.iter(|| match alone.try_acquire_owned() {
            Ok(permit) => permit.success(),
            Err(open) => {
                black_box(open);
            }
        })
    });
    // The borrowed permit alone (what `closed_static` pays the breaker), and the handle's
    // reference-count increment and decrement alone (what the `Arc` path adds to it): they
    // split the layer's cost from the breaker's.
    group.bench_function("breaker_alone/try_acquire+success", |b| {
        b.iter(|| match alone.try_acquire() {
            Ok(permit) => permit.success(),
            Err(open) => {
                black_box(open);
            }
        })
    });
    group.bench_function("breaker_alone/clone+drop", |b| {
        b.iter(|| drop(black_box(alone.clone())))
    });
    bench_in_process(&mut group, "bare", Echo);
    bench_in_process(
        &mut group,
        "layer/closed",
        CircuitBreakerLayer::new(breaker()).layer(Echo),
    );
    // A program-long breaker (a `static` or leaked one): the layer's permit is borrowed,
    // so no reference count changes per call.
    let program_long: &'static CircuitBreaker = Box::leak(Box::new(breaker()));
    bench_in_process(
        &mut group,
        "layer/closed_static",
        CircuitBreakerLayer::new(program_long).layer(Echo),
    );
    let slow_rule: &'static CircuitBreaker = Box::leak(Box::new(
        CircuitBreaker::builder()
            .consecutive_failures(5)
            .slow_call_threshold(Duration::from_secs(1))
            .slow_call_rate(0.5)
            .recovery_timeout(Duration::from_secs(3600))
            .build()
            .expect("valid config"),
    ));
    bench_in_process(
        &mut group,
        "layer/closed_static+slow_call_rule",
        CircuitBreakerLayer::new(slow_rule).layer(Echo),
    );
    // The peer: tower-resilience's circuit breaker layer, its defaults (a failure rate of
    // 0.5 over a count window of 100), in the same run.
    let peer = tower_resilience::circuitbreaker::CircuitBreakerLayer::builder()
        .failure_rate_threshold(0.5)
        .sliding_window_size(100)
        .build()
        .expect("a valid tower-resilience config");
    let mut peer_service = peer.layer(Echo);
    assert!(
        once(&mut peer_service, 7).is_some(),
        "tower-resilience's layer answers without a runtime"
    );
    bench_in_process(&mut group, "peer/tower_resilience_closed", peer_service);
    let timed = DefaultJudge.slower_than(Duration::from_secs(1));
    bench_in_process(
        &mut group,
        "layer/closed+latency_judge",
        CircuitBreakerLayer::new(breaker()).judge(timed).layer(Echo),
    );
    let template = Config::builder()
        .consecutive_failures(5)
        .build()
        .expect("valid config");
    let registry = Arc::new(Registry::new(template, 1024).expect("valid config"));
    bench_in_process(
        &mut group,
        "layer/keyed_closed",
        CircuitBreakerLayer::keyed(registry, |n: &u64| n % 4).layer(Echo),
    );
    let open = breaker();
    open.force_open();
    bench_in_process(
        &mut group,
        "layer/open_rejects",
        CircuitBreakerLayer::new(open.clone()).layer(Echo),
    );
    assert_eq!(open.phase(), Phase::ForcedOpen);

    // The HTTP form: status-only judging, then a judge that reads the body (business codes).
    let mut bare = HttpEcho;
    group.bench_function("http/bare", |b| {
        b.iter(|| black_box(once(&mut bare, http::Request::new(()))))
    });
    let mut status = CircuitBreakerLayer::new(breaker())
        .http(HttpJudge::default())
        .layer(HttpEcho);
    group.bench_function("http/layer_status", |b| {
        b.iter(|| black_box(once(&mut status, http::Request::new(()))))
    });
    let business = HttpJudge::builder()
        .business_pointer("/error_code")
        .business_failure_codes(["E001"])
        .build()
        .expect("valid judge");
    let body_breaker = breaker();
    let mut body = CircuitBreakerLayer::new(body_breaker.clone())
        .http(business)
        .layer(HttpEcho);
    group.bench_function("http/layer_status+body", |b| {
        b.iter(|| black_box(once(&mut body, http::Request::new(()))))
    });
    assert_eq!(body_breaker.phase(), Phase::Closed);
    group.finish();
}

fn loopback(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let addr = runtime.block_on(async {
        let app = Router::new().route("/", get(|| async { r#"{"error_code":"OK"}"# }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local address");
        tokio::spawn(async move { axum::serve(listener, app).await });
        addr
    });
    let uri: http::Uri = format!("http://{addr}/").parse().expect("a valid uri");
    let request = || {
        http::Request::get(uri.clone())
            .body(Full::<Bytes>::default())
            .expect("a request")
    };
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();

    let mut group = c.benchmark_group("loopback");
    group.bench_function("bare", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let response = client.clone().oneshot(request()).await.expect("a response");
                black_box(response.into_body().collect().await.expect("a body"));
            })
        })
    });
    let breaker = breaker();
    let guarded = CircuitBreakerLayer::new(breaker.clone())
        .http(HttpJudge::default())
        .layer(client.clone());
    group.bench_function("layer_status", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let response = guarded
                    .clone()
                    .oneshot(request())
                    .await
                    .expect("a response");
                black_box(response.into_body().collect().await.expect("a body"));
            })
        })
    });
    let business = HttpJudge::builder()
        .business_pointer("/error_code")
        .business_failure_codes(["E001"])
        .build()
        .expect("valid judge");
    let guarded = CircuitBreakerLayer::new(breaker.clone())
        .http(business)
        .layer(client.clone());
    group.bench_function("layer_status+body", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let response = guarded
                    .clone()
                    .oneshot(request())
                    .await
                    .expect("a response");
                black_box(response.into_body().collect().await.expect("a body"));
            })
        })
    });
    assert_eq!(breaker.phase(), Phase::Closed);
    group.finish();
}

criterion_group!(benches, in_process, loopback);
criterion_main!(benches);
