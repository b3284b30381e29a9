//! The response future of the HTTP form.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use breakerbox::contract::Breaker;
use breakerbox_http::{AfterHead, Exchange, HttpJudge, Judgement, TransportError};
use bytes::{Bytes, BytesMut};
use http::response::Parts;
use http_body::{Body, Frame};
use pin_project_lite::pin_project;

use super::body::{to_bytes, ReplayBody, Settle};
use super::Http;
use crate::admission::Admission;
use crate::deadline::Deadline;
use crate::error::{BoxError, Completed, Refusal};
use crate::gate::Admitted;

/// An admitted call and the exchange judging it.
struct Ticket<C: Breaker> {
    admission: Admission<C>,
    exchange: Exchange<Arc<HttpJudge>>,
    /// Rule 22: the call's deadline, over the head and the body read for judging.
    deadline: Deadline,
}

impl<C: Breaker> Ticket<C> {
    /// Records `judgement` with the exchange's latency (the time to the head).
    fn record(self, judgement: &Judgement) {
        let latency = self.exchange.latency();
        self.admission
            .record_hinted(judgement.verdict, latency, judgement.retry_after);
    }
}

impl<C: Breaker> Settle for Ticket<C>
where
    Ticket<C>: Send,
{
    fn trailers(self: Box<Self>, trailers: Option<&http::HeaderMap>) {
        let mut ticket = *self;
        let ended = ticket.admission.latency();
        let judgement = ticket.exchange.on_trailers_after(trailers, ended);
        ticket.record(&judgement);
    }

    fn failed(self: Box<Self>, error: TransportError) {
        let mut ticket = *self;
        let judgement = ticket.exchange.on_body_error(error);
        ticket.record(&judgement);
    }

    fn poll_deadline(&mut self, cx: &mut Context<'_>) -> Poll<breakerbox::DeadlineElapsed> {
        self.deadline.poll_elapsed(cx)
    }
}

/// A response whose body is being read for judging.
struct Reading<B, C: Breaker> {
    parts: Parts,
    body: Pin<Box<B>>,
    frames: VecDeque<Frame<Bytes>>,
    len: usize,
    cap: usize,
    ticket: Ticket<C>,
}

pin_project! {
    /// The future of a [`CircuitBreakerService`](crate::CircuitBreakerService) call in the
    /// HTTP form: a refusal, ready at once, or the inner service's future carrying the
    /// call's permit, then (only when body rules apply) the reading of the body up to the
    /// judge's cap. Dropping it before it completes releases the permit. With the `tokio`
    /// feature, the call is cancelled at its permit's deadline (rule 22) and judged as a
    /// transport timeout; the caller gets a boxed
    /// [`DeadlineElapsed`](breakerbox::DeadlineElapsed).
    pub struct HttpResponseFuture<F, B, C: Breaker> {
        #[pin]
        state: State<F, B, C>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, B, C: Breaker> {
        Refused { refusal: Refusal },
        Calling {
            #[pin]
            future: F,
            ticket: Option<Ticket<C>>,
        },
        Reading { reading: Option<Reading<B, C>> },
        Done,
    }
}

impl<F, B, C: Breaker> Admitted<F, C, Http> for HttpResponseFuture<F, B, C> {
    fn admitted(future: F, admission: Admission<C>, http: Http) -> Self {
        HttpResponseFuture {
            state: State::Calling {
                future,
                ticket: Some(Ticket {
                    exchange: http.into_exchange(admission.is_probe()),
                    deadline: Deadline::start(&admission),
                    admission,
                }),
            },
        }
    }

    fn refused(refusal: Refusal) -> Self {
        HttpResponseFuture {
            state: State::Refused { refusal },
        }
    }
}

impl<F, B, E, C> Future for HttpResponseFuture<F, B, C>
where
    F: Future<Output = Result<http::Response<B>, E>>,
    E: Into<BoxError>,
    B: Body,
    B::Error: Into<BoxError>,
    C: Breaker,
{
    type Output = Result<http::Response<ReplayBody<B>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Refused { refusal } => return Poll::Ready(Err(refusal.boxed())),
                StateProj::Done => return Poll::Ready(Err(Box::new(Completed))),
                StateProj::Calling { future, ticket } => {
                    let Poll::Ready(result) = future.poll(cx) else {
                        let Some(current) = ticket.as_mut() else {
                            return Poll::Pending;
                        };
                        let elapsed = ready!(current.deadline.poll_elapsed(cx));
                        // Rule 22: no head by the deadline: the call is dropped (with the
                        // state) and judged as a transport timeout.
                        if let Some(mut ticket) = ticket.take() {
                            let latency = ticket.admission.latency();
                            let judgement = ticket
                                .exchange
                                .on_transport_error(TransportError::Timeout, latency);
                            ticket.record(&judgement);
                        }
                        state.set(State::Done);
                        return Poll::Ready(Err(Box::new(elapsed)));
                    };
                    let Some(mut ticket) = ticket.take() else {
                        state.set(State::Done);
                        continue;
                    };
                    let response = match result {
                        Ok(response) => response,
                        Err(error) => {
                            let error = error.into();
                            let kind = TransportError::classify(&*error);
                            let latency = ticket.admission.latency();
                            let judgement = ticket.exchange.on_transport_error(kind, latency);
                            ticket.record(&judgement);
                            state.set(State::Done);
                            return Poll::Ready(Err(error));
                        }
                    };
                    let (mut parts, body) = response.into_parts();
                    let latency = ticket.admission.latency();
                    let head = ticket
                        .exchange
                        .on_head(parts.status, &parts.headers, latency);
                    let judgement = match head {
                        AfterHead::Judged(judgement) => judgement,
                        // gRPC: the trailers decide, at the body's end; the body streams
                        // on to the caller, carrying the call's permit.
                        AfterHead::AwaitTrailers => {
                            state.set(State::Done);
                            let body = ReplayBody::judging(body, Box::new(ticket));
                            return Poll::Ready(Ok(http::Response::from_parts(parts, body)));
                        }
                        // Bigger than the cap by its declared length: judged without it.
                        AfterHead::ReadBody { cap } if body.size_hint().lower() > cap as u64 => {
                            ticket.exchange.on_body(None)
                        }
                        AfterHead::ReadBody { cap } => {
                            state.set(State::Reading {
                                reading: Some(Reading {
                                    parts,
                                    body: Box::pin(body),
                                    frames: VecDeque::new(),
                                    len: 0,
                                    cap,
                                    ticket,
                                }),
                            });
                            continue;
                        }
                    };
                    ticket.record(&judgement);
                    parts.extensions.insert(judgement);
                    state.set(State::Done);
                    return Poll::Ready(Ok(http::Response::from_parts(
                        parts,
                        ReplayBody::direct(body),
                    )));
                }
                StateProj::Reading { reading } => {
                    let Some(current) = reading.as_mut() else {
                        state.set(State::Done);
                        continue;
                    };
                    let outcome = match read_up_to_cap(current, cx) {
                        Poll::Ready(outcome) => outcome,
                        Poll::Pending => {
                            let elapsed = ready!(current.ticket.deadline.poll_elapsed(cx));
                            // Rule 22: the body read for judging hung past the deadline.
                            if let Some(mut reading) = reading.take() {
                                let judgement = reading
                                    .ticket
                                    .exchange
                                    .on_body_error(TransportError::Timeout);
                                reading.ticket.record(&judgement);
                            }
                            state.set(State::Done);
                            return Poll::Ready(Err(Box::new(elapsed)));
                        }
                    };
                    let Some(Reading {
                        mut parts,
                        body,
                        frames,
                        len,
                        mut ticket,
                        ..
                    }) = reading.take()
                    else {
                        state.set(State::Done);
                        continue;
                    };
                    state.set(State::Done);
                    let buffered = len as u64;
                    let (judgement, replay) = match outcome {
                        Read::Complete => {
                            let bytes = contiguous(&frames, len);
                            let judgement = ticket.exchange.on_body(Some(&bytes));
                            (judgement, ReplayBody::complete(frames, buffered))
                        }
                        Read::OverCap => {
                            let judgement = ticket.exchange.on_body(None);
                            (judgement, ReplayBody::replay(frames, buffered, body))
                        }
                        Read::Failed(error) => {
                            let kind = TransportError::classify(&*error);
                            let judgement = ticket.exchange.on_body_error(kind);
                            (judgement, ReplayBody::failed(frames, buffered, error))
                        }
                    };
                    ticket.record(&judgement);
                    parts.extensions.insert(judgement);
                    return Poll::Ready(Ok(http::Response::from_parts(parts, replay)));
                }
            }
        }
    }
}

/// How reading the body for judging ended.
enum Read {
    /// The body ended within the cap.
    Complete,
    /// The body holds more than the cap: judged without it, the rest streams to the caller.
    OverCap,
    /// The body failed; the error is replayed to the caller after the frames read.
    Failed(BoxError),
}

/// Reads frames until the body ends, fails or exceeds the cap.
fn read_up_to_cap<B, C>(reading: &mut Reading<B, C>, cx: &mut Context<'_>) -> Poll<Read>
where
    B: Body,
    B::Error: Into<BoxError>,
    C: Breaker,
{
    let cap = reading.cap;
    loop {
        if reading.body.is_end_stream() {
            return Poll::Ready(Read::Complete);
        }
        match ready!(reading.body.as_mut().poll_frame(cx)) {
            None => return Poll::Ready(Read::Complete),
            Some(Err(error)) => return Poll::Ready(Read::Failed(error.into())),
            Some(Ok(frame)) => {
                let frame = to_bytes(frame);
                if let Some(data) = frame.data_ref() {
                    reading.len = reading.len.saturating_add(data.len());
                }
                reading.frames.push_back(frame);
                if reading.len > cap {
                    return Poll::Ready(Read::OverCap);
                }
            }
        }
    }
}

/// The data of `frames` in one slice (no copy when there is a single data frame).
fn contiguous(frames: &VecDeque<Frame<Bytes>>, len: usize) -> Bytes {
    let mut data = frames.iter().filter_map(Frame::data_ref);
    match (data.next(), data.next()) {
        (None, _) => Bytes::new(),
        (Some(only), None) => only.clone(),
        (Some(first), Some(second)) => {
            let mut all = BytesMut::with_capacity(len);
            all.extend_from_slice(first);
            all.extend_from_slice(second);
            for chunk in data {
                all.extend_from_slice(chunk);
            }
            all.freeze()
        }
    }
}

impl<F, B, C: Breaker> fmt::Debug for HttpResponseFuture<F, B, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Refused { .. } => "refused",
            State::Calling { .. } => "calling",
            State::Reading { .. } => "reading body",
            State::Done => "complete",
        };
        f.debug_struct("HttpResponseFuture")
            .field("state", &state)
            .finish()
    }
}
