//! A real tonic gRPC server on a free loopback port (`test.Flaky`, methods `Unary` and
//! `Stream`), told how to answer, and a tonic client for it or for a proxy in front of
//! it. No protoc: the service and its codec are written by hand (messages are raw bytes),
//! as in the tower layer's tests.

#![allow(dead_code)]
#![allow(clippy::unwrap_used)]

use std::convert::Infallible;
use std::future::{ready, Future, Ready};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::{Buf, BufMut};
use http::uri::PathAndQuery;
use tokio_stream::{Stream, StreamExt};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::server::{NamedService, ServerStreamingService, UnaryService};
use tonic::{Code, Status};
use tower_service::Service;

/// Messages as raw bytes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Raw;

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
pub enum Answer {
    /// This code: `OK` with the request echoed (status in the trailers), any other as an
    /// error before any message (a trailers-only response). For `Stream`: two messages,
    /// then this code in the trailers.
    Code(Code),
    /// For `Stream`: one message, then nothing, never ending.
    Hang,
    /// UNAVAILABLE with `grpc-retry-pushback-ms` of this many milliseconds.
    Pushback(u64),
}

/// UNAVAILABLE asking callers to wait `ms` before trying again.
fn pushback(ms: u64) -> Status {
    let mut metadata = tonic::metadata::MetadataMap::new();
    metadata.insert("grpc-retry-pushback-ms", ms.to_string().parse().unwrap());
    Status::with_metadata(Code::Unavailable, "pushed back", metadata)
}

/// The service `test.Flaky`.
#[derive(Clone)]
struct Flaky {
    answer: Arc<Mutex<Answer>>,
    calls: Arc<AtomicUsize>,
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
            Answer::Code(code) => Err(Status::new(code, "told to fail")),
            Answer::Hang => Err(Status::unimplemented("no hang for unary")),
            Answer::Pushback(ms) => Err(pushback(ms)),
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
            Answer::Code(code) => {
                let mut items = vec![Ok(b"one".to_vec()), Ok(b"two".to_vec())];
                if code != Code::Ok {
                    items.push(Err(Status::new(code, "failed mid-stream")));
                }
                Box::pin(tokio_stream::iter(items))
            }
            Answer::Hang => Box::pin(
                tokio_stream::iter(vec![Ok(b"one".to_vec())]).chain(tokio_stream::pending()),
            ),
            Answer::Pushback(ms) => Box::pin(tokio_stream::iter(vec![Err(pushback(ms))])),
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

/// A tonic server on a free loopback port (h2c), and its handles.
pub struct GrpcServer {
    answer: Arc<Mutex<Answer>>,
    calls: Arc<AtomicUsize>,
    connections: Arc<AtomicUsize>,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl GrpcServer {
    /// Starts the server on the current tokio runtime.
    pub async fn start() -> GrpcServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let flaky = Flaky {
            answer: Arc::new(Mutex::new(Answer::Code(Code::Ok))),
            calls: Arc::new(AtomicUsize::new(0)),
        };
        let connections = Arc::new(AtomicUsize::new(0));
        let server = GrpcServer {
            answer: flaky.answer.clone(),
            calls: flaky.calls.clone(),
            connections: connections.clone(),
            addr,
        };
        let incoming =
            tokio_stream::wrappers::TcpListenerStream::new(listener).map(move |accepted| {
                connections.fetch_add(1, Ordering::SeqCst);
                accepted
            });
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(flaky)
                .serve_with_incoming(incoming),
        );
        server
    }

    /// Answer the next calls so.
    pub fn answer(&self, answer: Answer) {
        *self.answer.lock().unwrap() = answer;
    }

    /// Calls received.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Connections accepted.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// A tonic client over HTTP/2 with prior knowledge to `addr`.
pub type Client = tonic::client::Grpc<tonic::transport::Channel>;

/// A client for `addr` (the server, or a proxy in front of it).
pub async fn client(addr: SocketAddr) -> Client {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    tonic::client::Grpc::new(channel)
}

/// `test.Flaky/Unary` with "ping".
pub async fn unary(client: &mut Client) -> Result<Vec<u8>, Status> {
    client
        .ready()
        .await
        .map_err(|e| Status::unknown(e.to_string()))?;
    let path = PathAndQuery::from_static("/test.Flaky/Unary");
    client
        .unary(tonic::Request::new(b"ping".to_vec()), path, Raw)
        .await
        .map(tonic::Response::into_inner)
}

/// `test.Flaky/Stream` with "ping": its messages.
pub async fn stream(client: &mut Client) -> Result<tonic::codec::Streaming<Vec<u8>>, Status> {
    client
        .ready()
        .await
        .map_err(|e| Status::unknown(e.to_string()))?;
    let path = PathAndQuery::from_static("/test.Flaky/Stream");
    client
        .server_streaming(tonic::Request::new(b"ping".to_vec()), path, Raw)
        .await
        .map(tonic::Response::into_inner)
}
