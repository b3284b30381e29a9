//! Helpers shared by the scenarios: a breaker on a manual clock, an event recorder and a
//! tiny executor.

use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Duration;

use breakerbox::{Builder, CircuitBreaker, EventKind, ManualClock, Phase};

/// A builder on a fresh manual clock, returned with a handle to that clock.
pub(crate) fn manual() -> (ManualClock, Builder<ManualClock>) {
    let clock = ManualClock::new();
    let builder = CircuitBreaker::builder().clock(clock.clone());
    (clock, builder)
}

/// A breaker that opens on its first failure: 10 s open, 30 s to confirm recovery.
pub(crate) fn one_failure_trips() -> (ManualClock, Builder<ManualClock>) {
    let (clock, builder) = manual();
    let builder = builder
        .consecutive_failures(1)
        .recovery_timeout(Duration::from_secs(10))
        .half_open_timeout(Duration::from_secs(30));
    (clock, builder)
}

/// Records one failure and checks that it opened the breaker.
pub(crate) fn trip(breaker: &CircuitBreaker<ManualClock>) {
    breaker.try_acquire().expect("closed admits").failure();
    assert_eq!(breaker.phase(), Phase::Open, "one failure trips");
}

/// Events as a listener saw them, with the breaker's name.
#[derive(Clone, Default)]
pub(crate) struct Recorder(Arc<Mutex<Vec<(String, EventKind)>>>);

impl Recorder {
    pub(crate) fn listener(&self) -> impl Fn(&breakerbox::Event<'_>) + Send + Sync + 'static {
        let log = self.0.clone();
        move |event| {
            log.lock()
                .expect("recorder lock")
                .push((event.breaker.to_string(), event.kind.clone()))
        }
    }

    pub(crate) fn take(&self) -> Vec<EventKind> {
        std::mem::take(&mut *self.0.lock().expect("recorder lock"))
            .into_iter()
            .map(|(_, kind)| kind)
            .collect()
    }

    pub(crate) fn transitions(&self) -> Vec<(Phase, Phase)> {
        self.take()
            .into_iter()
            .filter_map(|kind| match kind {
                EventKind::Transition(t) => Some((t.from, t.to)),
                _ => None,
            })
            .collect()
    }
}

struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs a future to completion on this thread: no runtime, bounded in time.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    for _ in 0..10_000 {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        thread::park_timeout(Duration::from_millis(10));
    }
    panic!("the future did not complete within 10,000 polls");
}

/// Polls a future once with a waker that does nothing.
pub(crate) fn poll_once<F: Future + ?Sized>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    let mut cx = Context::from_waker(Waker::noop());
    future.poll(&mut cx)
}

/// A future that is pending once (waking itself) and then ready with `value`.
pub(crate) struct YieldOnce<T> {
    value: Option<T>,
    yielded: bool,
}

impl<T> YieldOnce<T> {
    pub(crate) fn new(value: T) -> Self {
        YieldOnce {
            value: Some(value),
            yielded: false,
        }
    }
}

impl<T: Unpin> Future for YieldOnce<T> {
    type Output = T;
    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        if !self.yielded {
            self.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        Poll::Ready(self.value.take().expect("polled after completion"))
    }
}
