//! An upstream's response body on its way to the client. The exchange is judged at its
//! head (latency is the time to the head), but recorded when the body ends: a body cut
//! short (`body truncated`) or not delivered within the upstream's time budget
//! (`body timeout`) is then a failure by the exchange's body-error rule
//! (`transport: body read failed`, `timeout: body read`), and the client sees the cut.
//! Only time spent waiting on the upstream is charged to its budget; a client that reads
//! slowly is its own business. A body dropped before its end (the client went away)
//! releases its permit unjudged. Trailers are relayed and end the body: a gRPC answer
//! whose status comes in them is judged by it ([`Exchange::on_trailers`]); one that ends
//! without them is `grpc-status missing`, one cut before them a failure as any cut body.

use breakerbox::TokioClock;
use std::borrow::Borrow;
use std::collections::VecDeque;
use std::future::Future as _;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use breakerbox::{Clock, MonotonicClock, Nanos};
use breakerbox_http::{Exchange, HttpJudge, Judgement, TransportError};
use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use tokio::time::Sleep;

use super::body::BoxError;
use super::concurrency::InFlight;
use super::forward::Worker;
use super::metrics::UpstreamError;
use super::pool::Lent;
use super::probe_watch::ProbeHold;
use super::upload::UploadState;
use super::upstream_body::UpstreamBody;
use breakerbox::contract::{BreakerPermit, DynPermit};

/// How a response body failed after its head.
#[derive(Debug)]
pub enum BodyFault {
    /// The upstream ended the body before its declared end, or broke it.
    Truncated,
    /// The upstream took longer than its time budget to deliver the body.
    Timeout,
}

impl BodyFault {
    /// The judgement's reason.
    pub fn reason(&self) -> &'static str {
        match self {
            BodyFault::Truncated => "body truncated",
            BodyFault::Timeout => "body timeout",
        }
    }

    fn kind(&self) -> UpstreamError {
        match self {
            BodyFault::Truncated => UpstreamError::BodyTruncated,
            BodyFault::Timeout => UpstreamError::BodyTimeout,
        }
    }
}

impl std::fmt::Display for BodyFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.reason())
    }
}

impl std::error::Error for BodyFault {}

/// The permit an exchange holds until its body ends.
pub enum Hold {
    /// Nothing to judge (the permit was given back early).
    Nothing,
    /// A permit held by the body alone.
    Own(DynPermit),
    /// A probe, shared with a watchdog that gives it back if the client stops reading.
    Watched(ProbeHold),
}

impl Hold {
    /// Holds `ticket`, if any.
    pub fn new(ticket: Option<DynPermit>) -> Hold {
        ticket.map_or(Hold::Nothing, Hold::Own)
    }

    fn take(&mut self) -> Option<DynPermit> {
        match std::mem::replace(self, Hold::Nothing) {
            Hold::Nothing => None,
            Hold::Own(ticket) => Some(ticket),
            Hold::Watched(hold) => hold.take(),
        }
    }

    /// A probe about to stream its body goes under watch.
    fn watch_probe(&mut self) {
        if matches!(self, Hold::Own(t) if t.is_probe()) {
            if let Some(ticket) = self.take() {
                *self = Hold::Watched(ProbeHold::start(ticket));
            }
        }
    }

    fn watch(&self) -> Option<&ProbeHold> {
        match self {
            Hold::Watched(watch) => Some(watch),
            _ => None,
        }
    }
}

/// The judge of upstream `slot`, reached through the worker thread's view, so holding it
/// touches no reference count shared by every thread.
pub struct UpstreamJudge {
    worker: Arc<Worker>,
    slot: usize,
}

impl UpstreamJudge {
    /// The judge of upstream `slot` of `worker`'s proxy.
    pub fn new(worker: Arc<Worker>, slot: usize) -> UpstreamJudge {
        UpstreamJudge { worker, slot }
    }
}

impl Borrow<HttpJudge> for UpstreamJudge {
    fn borrow(&self) -> &HttpJudge {
        &self.worker.proxy.upstreams[self.slot].config.judge
    }
}

/// What judging an exchange at the end of its body needs.
pub struct Outcome {
    /// The worker thread (for the counters).
    pub worker: Arc<Worker>,
    /// The upstream's index.
    pub slot: usize,
    /// The permit, recorded (or released) once; nothing is judged without one.
    pub hold: Hold,
    /// The exchange, its head already judged ([`Exchange::on_head`]).
    pub exchange: Exchange<UpstreamJudge>,
    /// The head's judgement, when the head was enough; `None` while the body is wanted.
    pub judged: Option<Judgement>,
    /// The client's upload, when it had a body: its faults and waits are not the upstream's.
    pub upload: Option<Arc<UploadState>>,
    /// The request's place under the upstream's concurrency limits, held to the end of
    /// the body.
    pub _place: Option<InFlight>,
}

impl Outcome {
    /// The body arrived whole (`body` holds it when it was read for judging): the head's
    /// judgement, or the body's when a rule wanted it.
    pub fn complete(self, body: Option<&[u8]>) {
        self.end(body, None, Duration::ZERO);
    }

    /// The body arrived whole, `trailers` at its end (`None` without) `ended` after
    /// admission: the head's judgement, else the body's or the trailers' (gRPC's status,
    /// judged against the caller's deadline by when it came; the exchange counts an end
    /// reported before the head as the head's time).
    fn end(mut self, body: Option<&[u8]>, trailers: Option<&HeaderMap>, ended: Duration) {
        let Some(ticket) = self.hold.take() else {
            return;
        };
        let judgement = match (self.judged.take(), trailers) {
            (Some(judgement), _) => judgement,
            (None, Some(trailers)) => self.exchange.on_trailers_after(Some(trailers), ended),
            (None, None) => self.exchange.on_body(body),
        };
        self.record(ticket, judgement);
    }

    /// The body failed: a failure by the exchange's body-error rule, even when its head
    /// was judged already; the client's fault (its upload failed) is not the upstream's.
    pub fn fail(mut self, fault: &BodyFault) {
        if self.upload.as_ref().is_some_and(|u| u.fault().is_some()) {
            return;
        }
        let Some(ticket) = self.hold.take() else {
            return;
        };
        let transport = match fault {
            BodyFault::Truncated => TransportError::Other,
            BodyFault::Timeout => TransportError::Timeout,
        };
        let judgement = self.exchange.on_body_error(transport);
        let name = &self.worker.proxy.upstreams[self.slot].config.name;
        if let Some(s) = self.worker.proxy.recorder.stats(name) {
            s.upstream_error(fault.kind());
        }
        self.record(ticket, judgement);
    }

    /// Records `judgement` with the exchange's latency (the time to the head).
    fn record(&self, ticket: DynPermit, judgement: Judgement) {
        let (verdict, hint) = (judgement.verdict, judgement.retry_after);
        let name = &self.worker.proxy.upstreams[self.slot].config.name;
        if let Some(s) = self.worker.proxy.recorder.stats(name) {
            s.judged(judgement);
        }
        drop(ticket.record_with_retry_hint(verdict, self.exchange.latency(), hint));
    }
}

/// The upstream's time budget for the body: what the head used, plus every wait on the
/// upstream for the next frame.
struct Budget {
    limit: Duration,
    used: Duration,
    waiting_since: Option<Nanos>,
    timer: Option<Pin<Box<Sleep>>>,
    /// The client's upload time when the head arrived: later client time is not charged.
    client_at_head: Duration,
    upload: Option<Arc<UploadState>>,
    clock: MonotonicClock,
    /// When the head arrived, `head_elapsed` after admission (client waits included): the
    /// wall time of the whole exchange, which a caller's deadline runs in.
    head_at: Nanos,
    head_elapsed: Duration,
}

impl Budget {
    /// The time since admission (client waits included).
    fn since_admission(&self) -> Duration {
        self.head_elapsed + self.clock.now().saturating_sub(self.head_at).as_duration()
    }

    /// Time charged to the upstream so far (at `now`, counting a wait in progress).
    fn charged(&self, now: Nanos) -> Duration {
        let waiting = self.waiting_since.map_or(Duration::ZERO, |since| {
            now.saturating_sub(since).as_duration()
        });
        let client = self.upload.as_ref().map_or(Duration::ZERO, |u| {
            u.client_time(now).saturating_sub(self.client_at_head)
        });
        (self.used + waiting).saturating_sub(client)
    }

    fn stop_waiting(&mut self) {
        if let Some(since) = self.waiting_since.take() {
            self.used += self.clock.now().saturating_sub(since).as_duration();
        }
    }

    /// The upstream has nothing yet: start (or go on) waiting; true when out of time.
    fn wait(&mut self, cx: &mut Context<'_>) -> bool {
        if self.waiting_since.is_none() {
            let now = self.clock.now();
            self.waiting_since = Some(now);
            let left = self.limit.saturating_sub(self.charged(now));
            let at = TokioClock::new().deadline_in(left);
            match &mut self.timer {
                Some(timer) => timer.as_mut().reset(at),
                None => self.timer = Some(Box::pin(tokio::time::sleep_until(at))),
            }
        }
        loop {
            let fired = self
                .timer
                .as_mut()
                .is_some_and(|timer| timer.as_mut().poll(cx).is_ready());
            if !fired {
                return false;
            }
            let charged = self.charged(self.clock.now());
            if charged >= self.limit {
                return true;
            }
            // The client held things up: the upstream gets that time back.
            if let Some(timer) = &mut self.timer {
                let deadline = timer.deadline() + (self.limit - charged);
                timer.as_mut().reset(deadline);
            }
        }
    }
}

/// An upstream response body, judged at its end.
pub struct Download {
    read: VecDeque<Frame<Bytes>>,
    rest: UpstreamBody,
    /// The HTTP/1.1 connection (none for an HTTP/2 stream).
    lent: Option<Lent>,
    budget: Budget,
    outcome: Option<Outcome>,
}

impl Download {
    /// The body of a response whose head took `latency` of the upstream's time, out of
    /// `limit`, and came `elapsed` after admission (client waits included). Judged at once
    /// when the body is already complete.
    pub fn new(
        rest: UpstreamBody,
        lent: Option<Lent>,
        latency: Duration,
        elapsed: Duration,
        limit: Duration,
        outcome: Outcome,
    ) -> Download {
        let clock = MonotonicClock;
        let client_at_head = outcome
            .upload
            .as_ref()
            .map_or(Duration::ZERO, |u| u.client_time(clock.now()));
        let mut download = Download {
            read: VecDeque::new(),
            rest,
            lent,
            budget: Budget {
                limit,
                used: latency,
                waiting_since: None,
                timer: None,
                client_at_head,
                upload: outcome.upload.clone(),
                clock,
                head_at: clock.now(),
                head_elapsed: elapsed,
            },
            outcome: Some(outcome),
        };
        if download.rest.is_end_stream() {
            download.ended(None, None);
        } else if let Some(outcome) = &mut download.outcome {
            outcome.hold.watch_probe();
        }
        download
    }

    /// The upstream's next frame, its time budget enforced (no judging).
    fn poll_upstream(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyFault>>> {
        match Pin::new(&mut self.rest).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                self.budget.stop_waiting();
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(_))) => {
                self.budget.stop_waiting();
                Poll::Ready(Some(Err(BodyFault::Truncated)))
            }
            Poll::Ready(None) => {
                self.budget.stop_waiting();
                Poll::Ready(None)
            }
            Poll::Pending => {
                if self.budget.wait(cx) {
                    self.budget.stop_waiting();
                    Poll::Ready(Some(Err(BodyFault::Timeout)))
                } else {
                    Poll::Pending
                }
            }
        }
    }

    /// The body reached its end (with `trailers`, if any): the connection goes back, the
    /// exchange is judged.
    fn ended(&mut self, body: Option<&[u8]>, trailers: Option<&HeaderMap>) {
        if let Some(lent) = self.lent.take() {
            lent.give_back();
        }
        if let Some(outcome) = self.outcome.take() {
            outcome.end(body, trailers, self.budget.since_admission());
        }
    }

    fn failed(&mut self, fault: &BodyFault) {
        // A connection with a broken body cannot carry another request.
        self.lent = None;
        if let Some(outcome) = self.outcome.take() {
            outcome.fail(fault);
        }
    }

    fn handed_frame(&self) {
        if let Some(watch) = self.outcome.as_ref().and_then(|o| o.hold.watch()) {
            watch.handed_frame();
        }
    }

    /// Reads up to `cap` bytes for the judge before the head goes to the client. `Ok(Some)`
    /// with the whole body (judged with it), `Ok(None)` when it is bigger (judged at its
    /// end, without it), `Err` when it failed (judged; answer with an error instead).
    pub async fn read_for_judging(&mut self, cap: usize) -> Result<Option<Bytes>, BodyFault> {
        if self.outcome.is_none() {
            // Already complete and judged (an empty body).
            return Ok(Some(Bytes::new()));
        }
        if self.rest.size_hint().lower() > cap as u64 {
            return Ok(None);
        }
        let mut size = 0usize;
        loop {
            match std::future::poll_fn(|cx| self.poll_upstream(cx)).await {
                None => break,
                Some(Ok(frame)) => {
                    size += frame.data_ref().map_or(0, Bytes::len);
                    self.read.push_back(frame);
                    if size > cap {
                        return Ok(None);
                    }
                }
                Some(Err(fault)) => {
                    self.failed(&fault);
                    return Err(fault);
                }
            }
        }
        let mut all = bytes::BytesMut::with_capacity(size);
        for frame in &self.read {
            if let Some(d) = frame.data_ref() {
                all.extend_from_slice(d);
            }
        }
        let all = all.freeze();
        let trailers = self.read.back().and_then(Frame::trailers_ref).cloned();
        self.ended(Some(&all), trailers.as_ref());
        Ok(Some(all))
    }
}

impl Body for Download {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if let Some(watch) = this.outcome.as_ref().and_then(|o| o.hold.watch()) {
            watch.client_polled();
        }
        if let Some(frame) = this.read.pop_front() {
            this.handed_frame();
            return Poll::Ready(Some(Ok(frame)));
        }
        match this.poll_upstream(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(trailers) = frame.trailers_ref() {
                    // Trailers end the body (gRPC's status is there).
                    this.ended(None, Some(trailers));
                } else if this.rest.is_end_stream() {
                    this.ended(None, None);
                } else {
                    this.handed_frame();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(fault))) => {
                this.failed(&fault);
                Poll::Ready(Some(Err(Box::new(fault))))
            }
            Poll::Ready(None) => {
                this.ended(None, None);
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.read.is_empty() && self.rest.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let buffered: u64 = self
            .read
            .iter()
            .filter_map(|f| f.data_ref().map(|d| d.len() as u64))
            .sum();
        let inner = self.rest.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(inner.lower() + buffered);
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper + buffered);
        }
        hint
    }
}
