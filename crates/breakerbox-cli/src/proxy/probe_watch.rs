//! A half-open probe's permit while its response body streams to the client. Probes are
//! few: a client that stops reading would hold one until its connection dies and keep the
//! breaker from closing (or, at the half-open deadline, re-open it). A watchdog gives the
//! permit back, unjudged, once the client has not asked for more of the body for
//! [`PROBE_READER_PATIENCE`]. Normal permits need no watch (they hold no slot).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use breakerbox::{Clock, MonotonicClock};

use breakerbox::contract::DynPermit;

/// How long a probe's client may leave its response body unread.
pub const PROBE_READER_PATIENCE: Duration = Duration::from_secs(1);

/// A probe permit shared between its response body and a watchdog.
struct ProbeWatch {
    ticket: Mutex<Option<DynPermit>>,
    /// When the body last handed a frame to the client (nanoseconds + 1); 0 while the
    /// client is asking for more (the body waits on the upstream, not on the client).
    idle_since: AtomicU64,
    clock: MonotonicClock,
}

/// The response body's side of a watched probe; dropping it (the body was dropped
/// unjudged: the client left) gives the permit back at once.
pub struct ProbeHold(Arc<ProbeWatch>);

impl ProbeHold {
    /// Watches `ticket` from now on (the head has just gone to the client).
    pub fn start(ticket: DynPermit) -> ProbeHold {
        let clock = MonotonicClock;
        let watch = Arc::new(ProbeWatch {
            ticket: Mutex::new(Some(ticket)),
            idle_since: AtomicU64::new(clock.now().as_u64().saturating_add(1)),
            clock,
        });
        tokio::spawn(watchdog(watch.clone()));
        ProbeHold(watch)
    }

    /// Takes the permit out (to record it); `None` when the watchdog gave it back.
    pub fn take(&self) -> Option<DynPermit> {
        self.0.take()
    }

    /// The client asks for more of the body.
    pub fn client_polled(&self) {
        self.0.idle_since.store(0, Ordering::Release);
    }

    /// The body handed a frame to the client: from now on it waits for the client.
    pub fn handed_frame(&self) {
        let now = self.0.clock.now().as_u64().saturating_add(1);
        self.0.idle_since.store(now, Ordering::Release);
    }
}

impl Drop for ProbeHold {
    fn drop(&mut self) {
        drop(self.0.take());
    }
}

impl ProbeWatch {
    fn take(&self) -> Option<DynPermit> {
        self.ticket.lock().ok()?.take()
    }

    fn held(&self) -> bool {
        self.ticket.lock().is_ok_and(|t| t.is_some())
    }

    fn client_idle_for(&self) -> Duration {
        match self.idle_since.load(Ordering::Acquire) {
            0 => Duration::ZERO,
            since => Duration::from_nanos(self.clock.now().as_u64().saturating_sub(since - 1)),
        }
    }
}

/// Ends when the permit is gone: recorded, released by its body, or taken back here.
async fn watchdog(watch: Arc<ProbeWatch>) {
    loop {
        tokio::time::sleep(PROBE_READER_PATIENCE).await;
        if !watch.held() {
            return;
        }
        if watch.client_idle_for() >= PROBE_READER_PATIENCE {
            // Released unjudged: the slot goes to a probe whose client reads.
            drop(watch.take());
            return;
        }
    }
}
