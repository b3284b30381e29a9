//! The HTTP form in front of a real tonic client and server on 127.0.0.1: gRPC calls
//! judged by `grpc-status`, from a trailers-only response's headers or from the trailers
//! at the end of the stream. No protoc: the service and its codec are written by hand
//! (messages are raw bytes).
#![allow(clippy::unwrap_used)] // tests unwrap

use std::convert::Infallible;
use std::future::{ready, Future, Ready};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use breakerbox::{CircuitBreaker, CircuitOpen, ManualClock, Phase};
use breakerbox_http::HttpJudge;
use breakerbox_tower::CircuitBreakerLayer;
use bytes::{Buf, BufMut};
use http::uri::PathAndQuery;
use tokio_stream::{Stream, StreamExt};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::server::{NamedService, ServerStreamingService, UnaryService};
use tonic::{Code, Status};
use tower::{Service, ServiceBuilder};

/// Messages as raw bytes.
#[derive(Clone, Copy, Debug, Default)]
struct Raw;

impl Codec for Raw {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = Raw;
    type Decoder = Raw;
    fn encoder(&mut self) -> Raw {
        Raw
    }
    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Vec<u8>;
    type Error = Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Vec<u8>;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, Status> {
        let mut message = vec![0; src.remaining()];
        src.copy_to_slice(&mut message);
        Ok(Some(message))
    }
}

/// How the server answers its next calls.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Answer {
    /// This code: `OK` with the request echoed (status in the trailers), any other as an
    /// error before any message (a trailers-only response). For `Stream`: two messages,
    /// then this code in the trailers.
    Code(Code),
    /// For `Stream`: one message, then nothing, never ending.
    Hang,
    /// This code, after moving the breaker's clock on by this many milliseconds (the
    /// server took that long).
    After(Code, u64),
}

/// The service `test.Flaky`: methods `Unary` and `Stream`.
#[derive(Clone)]
struct Flaky {
    answer: Arc<Mutex<Answer>>,
    calls: Arc<AtomicUsize>,
    /// The breaker's clock, moved on by [`Answer::After`].
    clock: ManualClock,
}

impl NamedService for Flaky {
    const NAME: &'static str = "test.Flaky";
}

struct Unary(Answer);

impl UnaryService<Vec<u8>> for Unary {
    type Response = Vec<u8>;
    type Future = Ready<Result<tonic::Response<Vec<u8>>, Status>>;
    fn call(&mut self, request: tonic::Request<Vec<u8>>) -> Self::Future {
        ready(match self.0 {
            Answer::Code(Code::Ok) => Ok(tonic::Response::new(request.into_inner())),
            Answer::Code(code) | Answer::After(code, _) => Err(Status::new(code, "told to fail")),
            Answer::Hang => Err(Status::unimplemented("no hang for unary")),
        })
    }
}

type Messages = Pin<Box<dyn Stream<Item = Result<Vec<u8>, Status>> + Send>>;

struct Streamed(Answer);

impl ServerStreamingService<Vec<u8>> for Streamed {
    type Response = Vec<u8>;
    type ResponseStream = Messages;
    type Future = Ready<Result<tonic::Response<Messages>, Status>>;
    fn call(&mut self, _: tonic::Request<Vec<u8>>) -> Self::Future {
        let stream: Messages = match self.0 {
            Answer::Code(code) | Answer::After(code, _) => {
                let mut items = vec![Ok(b"one".to_vec()), Ok(b"two".to_vec())];
                if code != Code::Ok {
                    items.push(Err(Status::new(code, "failed mid-stream")));
                }
                Box::pin(tokio_stream::iter(items))
            }
            Answer::Hang => Box::pin(
                tokio_stream::iter(vec![Ok(b"one".to_vec())]).chain(tokio_stream::pending()),
            ),
        };
        ready(Ok(tonic::Response::new(stream)))
    }
}

impl<B> Service<http::Request<B>> for Flaky
where
    B: http_body::Body + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let answer = *self.answer.lock().unwrap();
        if let Answer::After(_, ms) = answer {
            self.clock.advance(Duration::from_millis(ms));
        }
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(Raw);
            Ok(match request.uri().path() {
                "/test.Flaky/Unary" => grpc.unary(Unary(answer), request).await,
                "/test.Flaky/Stream" => grpc.server_streaming(Streamed(answer), request).await,
                _ => Status::unimplemented("no such method").into_http(),
            })
        })
    }
}

/// A tonic server on a free loopback port, and its handles.
struct Server {
    answer: Arc<Mutex<Answer>>,
    calls: Arc<AtomicUsize>,
    url: String,
}

impl Server {
    async fn start() -> Server {
        Server::start_with(ManualClock::new()).await
    }

    /// A server whose [`Answer::After`] moves `clock` on.
    async fn start_with(clock: ManualClock) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let flaky = Flaky {
            answer: Arc::new(Mutex::new(Answer::Code(Code::Ok))),
            calls: Arc::new(AtomicUsize::new(0)),
            clock,
        };
        let server = Server {
            answer: flaky.answer.clone(),
            calls: flaky.calls.clone(),
            url,
        };
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(flaky)
                .serve_with_incoming(incoming),
        );
        server
    }

    fn answer(&self, answer: Answer) {
        *self.answer.lock().unwrap() = answer;
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

/// A tonic client over the layered channel.
type Client = tonic::client::Grpc<
    breakerbox_tower::CircuitBreakerService<
        tonic::transport::Channel,
        breakerbox_tower::select::Single<CircuitBreaker<ManualClock>>,
        breakerbox_tower::judging::Http,
    >,
>;

/// A tonic client whose channel is behind the breaker, judged by gRPC rules.
async fn client(server: &Server, breaker: &CircuitBreaker<ManualClock>) -> Client {
    let channel = tonic::transport::Endpoint::from_shared(server.url.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let judge = HttpJudge::builder().grpc(true).build().unwrap();
    let service = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::new(breaker.clone()).http(judge))
        .service(channel);
    tonic::client::Grpc::new(service)
}

async fn unary(client: &mut Client) -> Result<Vec<u8>, Status> {
    unary_within(client, None).await
}

/// `Unary` with the caller's deadline `timeout` (`grpc-timeout`; tonic sends it, the
/// server may honour it, the client does not enforce it).
async fn unary_within(client: &mut Client, timeout: Option<Duration>) -> Result<Vec<u8>, Status> {
    client
        .ready()
        .await
        .map_err(|e| Status::unknown(e.to_string()))?;
    let path = PathAndQuery::from_static("/test.Flaky/Unary");
    let mut request = tonic::Request::new(b"ping".to_vec());
    if let Some(timeout) = timeout {
        request.set_timeout(timeout);
    }
    client
        .unary(request, path, Raw)
        .await
        .map(tonic::Response::into_inner)
}

async fn stream(client: &mut Client) -> Result<tonic::codec::Streaming<Vec<u8>>, Status> {
    client
        .ready()
        .await
        .map_err(|e| Status::unknown(e.to_string()))?;
    let path = PathAndQuery::from_static("/test.Flaky/Stream");
    let request = tonic::Request::new(b"ping".to_vec());
    client
        .server_streaming(request, path, Raw)
        .await
        .map(tonic::Response::into_inner)
}

fn breaker(clock: &ManualClock, failures: u32) -> CircuitBreaker<ManualClock> {
    CircuitBreaker::builder()
        .consecutive_failures(failures)
        .recovery_timeout(Duration::from_secs(30))
        .max_probes(1)
        .required_successes(1)
        .clock(clock.clone())
        .build()
        .unwrap()
}

/// Runs a test's body within a bound.
async fn bounded<F: Future<Output = ()>>(test: F) {
    tokio::time::timeout(Duration::from_secs(30), test)
        .await
        .expect("the test finished within 30 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unavailable_trips_the_breaker_and_not_found_does_not() {
    bounded(async {
        let server = Server::start().await;
        let clock = ManualClock::new();
        let breaker = breaker(&clock, 3);
        let mut client = client(&server, &breaker).await;

        // OK, its status in the trailers: a success.
        assert_eq!(unary(&mut client).await.unwrap(), b"ping");
        // NOT_FOUND (client-caused, trailers-only): ignored, however many.
        server.answer(Answer::Code(Code::NotFound));
        for _ in 0..5 {
            assert_eq!(unary(&mut client).await.unwrap_err().code(), Code::NotFound);
        }
        assert_eq!(breaker.phase(), Phase::Closed);
        assert_eq!(breaker.snapshot().consecutive_failures, 0);
        // UNAVAILABLE: three in a row trip it.
        server.answer(Answer::Code(Code::Unavailable));
        for _ in 0..3 {
            assert_eq!(
                unary(&mut client).await.unwrap_err().code(),
                Code::Unavailable
            );
        }
        assert_eq!(breaker.phase(), Phase::Open);
        let before = server.calls();
        let refused = unary(&mut client).await.unwrap_err();
        let open = std::error::Error::source(&refused)
            .and_then(|e| e.downcast_ref::<CircuitOpen>())
            .unwrap_or_else(|| panic!("a CircuitOpen behind {refused:?}"));
        assert_eq!(open.retry_after(), Some(Duration::from_secs(30)));
        assert_eq!(server.calls(), before, "the server was not called");
    })
    .await;
}

/// The caller's own deadline (`grpc-timeout`, from tonic's `Request::set_timeout`): a
/// `DEADLINE_EXCEEDED` that comes once it has passed is the caller's budget running out
/// and never trips the breaker; one before it (the server's own deadline) is a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_exceeded_past_the_callers_deadline_never_trips_the_breaker() {
    bounded(async {
        let clock = ManualClock::new();
        let server = Server::start_with(clock.clone()).await;
        let breaker = breaker(&clock, 3);
        let mut client = client(&server, &breaker).await;
        // The server took 60 ms of a 50 ms deadline, five times over.
        server.answer(Answer::After(Code::DeadlineExceeded, 60));
        for _ in 0..5 {
            let status = unary_within(&mut client, Some(Duration::from_millis(50)))
                .await
                .unwrap_err();
            assert_eq!(status.code(), Code::DeadlineExceeded);
        }
        assert_eq!(breaker.phase(), Phase::Closed);
        assert_eq!(breaker.snapshot().consecutive_failures, 0);
        // Its own deadline, after 20 ms of the caller's 10 s: three failures trip it.
        server.answer(Answer::After(Code::DeadlineExceeded, 20));
        for _ in 0..3 {
            let status = unary_within(&mut client, Some(Duration::from_secs(10)))
                .await
                .unwrap_err();
            assert_eq!(status.code(), Code::DeadlineExceeded);
        }
        assert_eq!(breaker.phase(), Phase::Open);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_in_the_trailers_is_judged_when_the_stream_ends() {
    bounded(async {
        let server = Server::start().await;
        let clock = ManualClock::new();
        let breaker = breaker(&clock, 1);
        let mut client = client(&server, &breaker).await;

        // Two messages, then OK in the trailers.
        let mut messages = stream(&mut client).await.unwrap();
        while messages.message().await.unwrap().is_some() {}
        assert_eq!(breaker.phase(), Phase::Closed);

        // Two messages, then UNAVAILABLE in the trailers: judged at the end, not the head.
        server.answer(Answer::Code(Code::Unavailable));
        let mut messages = stream(&mut client).await.unwrap();
        assert_eq!(messages.message().await.unwrap().unwrap(), b"one");
        assert_eq!(messages.message().await.unwrap().unwrap(), b"two");
        assert_eq!(
            breaker.phase(),
            Phase::Closed,
            "not judged before the trailers"
        );
        assert_eq!(
            messages.message().await.unwrap_err().code(),
            Code::Unavailable
        );
        assert_eq!(breaker.phase(), Phase::Open);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_stream_dropped_before_its_end_frees_its_slot_unjudged() {
    bounded(async {
        let server = Server::start().await;
        let clock = ManualClock::new();
        let breaker = breaker(&clock, 1);
        let mut client = client(&server, &breaker).await;
        server.answer(Answer::Code(Code::Internal));
        assert_eq!(unary(&mut client).await.unwrap_err().code(), Code::Internal);
        assert_eq!(breaker.phase(), Phase::Open);
        clock.advance(Duration::from_secs(30));

        // The probe: one message, then the stream hangs; the caller drops it.
        server.answer(Answer::Hang);
        let mut messages = stream(&mut client).await.unwrap();
        assert_eq!(messages.message().await.unwrap().unwrap(), b"one");
        assert_eq!(breaker.phase(), Phase::HalfOpen);
        assert_eq!(breaker.snapshot().probes_in_flight, 1);
        drop(messages);
        assert_eq!(breaker.snapshot().probes_in_flight, 0, "the slot is free");
        assert_eq!(breaker.phase(), Phase::HalfOpen, "nothing was recorded");

        // The next probe succeeds (OK in the trailers) and closes the breaker.
        server.answer(Answer::Code(Code::Ok));
        assert_eq!(unary(&mut client).await.unwrap(), b"ping");
        assert_eq!(breaker.phase(), Phase::Closed);
    })
    .await;
}
