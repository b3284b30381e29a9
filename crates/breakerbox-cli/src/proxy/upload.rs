//! A client's request body on its way to the upstream: streamed frame by frame, never
//! buffered whole, with a size cap and an idle timeout. It keeps account of the time
//! spent waiting on the client, so that time is never charged to the upstream, and it
//! records what the client did wrong, so that fault is never judged against the upstream.

use breakerbox::TokioClock;
use std::future::Future as _;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use breakerbox::{Clock, MonotonicClock, Nanos};
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::time::Sleep;

use super::body::BoxError;

/// What the client did wrong while sending its request body.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ClientFault {
    /// No byte of the body arrived within the client body timeout (answered 408).
    Stalled,
    /// The connection ended before the body did (nothing to answer).
    Gone,
    /// The body was malformed (bad chunk encoding; answered 400).
    Malformed,
    /// The body grew beyond `max_body_bytes` (answered 413).
    TooLarge,
}

impl ClientFault {
    const NONE: u8 = 0;

    fn code(self) -> u8 {
        match self {
            ClientFault::Stalled => 1,
            ClientFault::Gone => 2,
            ClientFault::Malformed => 3,
            ClientFault::TooLarge => 4,
        }
    }

    fn from_code(code: u8) -> Option<ClientFault> {
        match code {
            1 => Some(ClientFault::Stalled),
            2 => Some(ClientFault::Gone),
            3 => Some(ClientFault::Malformed),
            4 => Some(ClientFault::TooLarge),
            _ => None,
        }
    }

    /// The label of this fault in metrics and error bodies.
    pub fn as_str(self) -> &'static str {
        match self {
            ClientFault::Stalled => "client_body_timeout",
            ClientFault::Gone => "client_gone",
            ClientFault::Malformed => "bad_request_body",
            ClientFault::TooLarge => "body_too_large",
        }
    }
}

impl std::fmt::Display for ClientFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ClientFault::Stalled => "the client stopped sending its request body",
            ClientFault::Gone => "the client went away during its request body",
            ClientFault::Malformed => "the client sent a malformed request body",
            ClientFault::TooLarge => "the client's request body is too large",
        })
    }
}

impl std::error::Error for ClientFault {}

/// What the handler and the response body learn about an upload while it runs (the body
/// itself is polled by the upstream connection's task).
#[derive(Debug, Default)]
pub struct UploadState {
    fault: AtomicU8,
    /// Whether the whole body arrived.
    done: AtomicBool,
    /// Nanoseconds spent waiting on the client in waits that have ended.
    waited: AtomicU64,
    /// When the current wait on the client began, plus one; 0 when not waiting.
    since: AtomicU64,
}

impl UploadState {
    /// What the client did wrong, if anything.
    pub fn fault(&self) -> Option<ClientFault> {
        ClientFault::from_code(self.fault.load(Ordering::Acquire))
    }

    /// Time spent so far waiting on the client for its body (at `now`).
    pub fn client_time(&self, now: Nanos) -> Duration {
        let waited = self.waited.load(Ordering::Acquire);
        let since = self.since.load(Ordering::Acquire);
        let ongoing = if since == 0 {
            0
        } else {
            now.as_u64().saturating_sub(since - 1)
        };
        Duration::from_nanos(waited.saturating_add(ongoing))
    }

    /// Whether the client is holding the exchange up: the body has not all arrived and
    /// nothing of it has for at least `at_least` (at `now`).
    pub fn stalled(&self, now: Nanos, at_least: Duration) -> bool {
        !self.done.load(Ordering::Acquire) && self.current_wait(now) >= at_least
    }

    /// How long the current wait on the client has lasted (zero when not waiting).
    pub fn current_wait(&self, now: Nanos) -> Duration {
        match self.since.load(Ordering::Acquire) {
            0 => Duration::ZERO,
            since => Duration::from_nanos(now.as_u64().saturating_sub(since - 1)),
        }
    }

    fn set_fault(&self, fault: ClientFault) {
        let _ = self.fault.compare_exchange(
            ClientFault::NONE,
            fault.code(),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    fn begin_wait(&self, now: Nanos) {
        self.since
            .store(now.as_u64().saturating_add(1), Ordering::Release);
    }

    fn end_wait(&self, now: Nanos) {
        let since = self.since.swap(0, Ordering::AcqRel);
        if since != 0 {
            let waited = now.as_u64().saturating_sub(since - 1);
            self.waited.fetch_add(waited, Ordering::AcqRel);
        }
    }
}

/// A client's request body, streamed to the upstream.
pub struct Upload {
    incoming: Incoming,
    state: Arc<UploadState>,
    idle: Duration,
    max: u64,
    seen: u64,
    waiting: bool,
    timer: Option<Pin<Box<Sleep>>>,
    clock: MonotonicClock,
}

impl Upload {
    /// Streams `incoming`, failing it when no byte arrives for `idle` or when more than
    /// `max` bytes arrive; `state` tells the rest of the exchange how it went.
    pub fn new(incoming: Incoming, idle: Duration, max: u64, state: Arc<UploadState>) -> Upload {
        Upload {
            incoming,
            state,
            idle,
            max,
            seen: 0,
            waiting: false,
            timer: None,
            clock: MonotonicClock,
        }
    }

    fn stop_waiting(&mut self) {
        if self.waiting {
            self.waiting = false;
            self.state.end_wait(self.clock.now());
        }
    }

    fn fail(&mut self, fault: ClientFault) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.stop_waiting();
        self.state.set_fault(fault);
        Poll::Ready(Some(Err(Box::new(fault))))
    }
}

/// Whether a body read error means the client's connection ended (rather than a body
/// that was malformed).
fn connection_ended(error: &hyper::Error) -> bool {
    if error.is_incomplete_message() || error.is_closed() {
        return true;
    }
    let mut source = std::error::Error::source(error);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return matches!(
                io.kind(),
                std::io::ErrorKind::UnexpectedEof
                    | std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
                    | std::io::ErrorKind::BrokenPipe
            );
        }
        source = s.source();
    }
    false
}

impl Body for Upload {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.incoming).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                this.stop_waiting();
                if let Some(data) = frame.data_ref() {
                    this.seen = this.seen.saturating_add(data.len() as u64);
                    if this.seen > this.max {
                        return this.fail(ClientFault::TooLarge);
                    }
                }
                if this.incoming.is_end_stream() {
                    this.state.done.store(true, Ordering::Release);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => {
                let fault = if connection_ended(&error) {
                    ClientFault::Gone
                } else {
                    ClientFault::Malformed
                };
                this.fail(fault)
            }
            Poll::Ready(None) => {
                this.stop_waiting();
                this.state.done.store(true, Ordering::Release);
                Poll::Ready(None)
            }
            Poll::Pending => {
                if !this.waiting {
                    this.waiting = true;
                    this.state.begin_wait(this.clock.now());
                    match &mut this.timer {
                        // Scheduling only, on tokio's clock.
                        Some(timer) => timer
                            .as_mut()
                            .reset(TokioClock::new().deadline_in(this.idle)),
                        None => this.timer = Some(Box::pin(tokio::time::sleep(this.idle))),
                    }
                }
                let stalled = this
                    .timer
                    .as_mut()
                    .is_some_and(|timer| timer.as_mut().poll(cx).is_ready());
                if stalled {
                    this.fail(ClientFault::Stalled)
                } else {
                    Poll::Pending
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming.size_hint()
    }
}
