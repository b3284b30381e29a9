//! A scripted inner service: its readiness is set by the test, each request says how it
//! ends and after how long (tokio time, so `tokio::time::pause` drives it), and it counts
//! how often it was polled and called.

#![allow(clippy::unwrap_used)] // test support: a poisoned lock or a failed bind ends the test

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use breakerbox::{Clock, Nanos};

/// A breaker clock reading tokio's clock, which `tokio::time::pause` freezes and
/// `tokio::time::advance` moves.
#[derive(Clone, Debug)]
pub struct TokioClock {
    origin: tokio::time::Instant,
}

impl TokioClock {
    pub fn new() -> Self {
        TokioClock {
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Nanos {
        Nanos::from_duration(self.origin.elapsed()).saturating_add(Nanos(1_000_000_000))
    }
}

/// What one call does.
#[derive(Clone, Debug)]
pub struct Call {
    pub key: &'static str,
    pub fail: bool,
    pub delay: Duration,
}

impl Call {
    pub fn ok(key: &'static str) -> Call {
        Call {
            key,
            fail: false,
            delay: Duration::ZERO,
        }
    }
    pub fn fail(key: &'static str) -> Call {
        Call {
            key,
            fail: true,
            delay: Duration::ZERO,
        }
    }
    pub fn after(mut self, delay: Duration) -> Call {
        self.delay = delay;
        self
    }
}

/// The scripted service's own error.
#[derive(Debug, PartialEq, Eq)]
pub struct Boom(pub &'static str);

impl std::fmt::Display for Boom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "boom from {}", self.0)
    }
}

impl std::error::Error for Boom {}

#[derive(Default)]
struct Shared {
    not_ready: AtomicBool,
    ready_error: AtomicBool,
    polls: AtomicUsize,
    calls: AtomicUsize,
    waker: Mutex<Option<Waker>>,
}

#[derive(Clone, Default)]
pub struct Scripted {
    shared: Arc<Shared>,
}

impl Scripted {
    pub fn new() -> Self {
        Scripted::default()
    }
    /// How many times `poll_ready` was called.
    pub fn polls(&self) -> usize {
        self.shared.polls.load(Ordering::SeqCst)
    }
    /// How many times `call` was called.
    pub fn calls(&self) -> usize {
        self.shared.calls.load(Ordering::SeqCst)
    }
    /// Makes `poll_ready` answer `Pending` (false) or `Ready` (true), waking a waiter.
    pub fn set_ready(&self, ready: bool) {
        self.shared.not_ready.store(!ready, Ordering::SeqCst);
        if ready {
            if let Some(waker) = self.shared.waker.lock().unwrap().take() {
                waker.wake();
            }
        }
    }
    /// Makes `poll_ready` fail.
    pub fn fail_readiness(&self) {
        self.shared.ready_error.store(true, Ordering::SeqCst);
    }
}

impl tower::Service<Call> for Scripted {
    type Response = &'static str;
    type Error = Boom;
    type Future = Pin<Box<dyn Future<Output = Result<&'static str, Boom>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Boom>> {
        self.shared.polls.fetch_add(1, Ordering::SeqCst);
        if self.shared.ready_error.load(Ordering::SeqCst) {
            return Poll::Ready(Err(Boom("poll_ready")));
        }
        if self.shared.not_ready.load(Ordering::SeqCst) {
            *self.shared.waker.lock().unwrap() = Some(cx.waker().clone());
            return Poll::Pending;
        }
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: Call) -> Self::Future {
        self.shared.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            if !call.delay.is_zero() {
                tokio::time::sleep(call.delay).await;
            }
            if call.fail {
                Err(Boom(call.key))
            } else {
                Ok(call.key)
            }
        })
    }
}
