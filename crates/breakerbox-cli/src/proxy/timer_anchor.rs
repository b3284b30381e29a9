//! One timer kept armed on each worker's runtime, so that arming a request's timeout
//! does not make a system call.
//!
//! tokio's time driver notes, each time it parks, when its earliest timer is due, and a
//! timer armed for earlier than that wakes the driver: a write to its eventfd. When the
//! driver parked with no timer at all, every timer armed before it parks again is
//! "earlier" and costs a write. A worker serving HTTP/2 streams often parks with none
//! armed (its streams all answered, the clients' next requests not yet read): under
//! h2load, a third of a write per request, all from the exchange's `request_timeout`.
//! With the anchor due within [`PERIOD`], a request's timeout (due later) is never the
//! earliest and costs no write. Timeouts shorter than [`PERIOD`] still work; they may
//! cost the write.

use std::time::Duration;

/// How far ahead the anchor is always due: shorter than any timeout the proxy arms per
/// request at their defaults and usual settings, long enough to cost nothing when idle
/// (one wake-up per period per worker).
pub const PERIOD: Duration = Duration::from_secs(1);

/// Keeps a timer armed on this runtime for as long as it runs (spawn it once per
/// runtime; it never ends by itself).
pub async fn hold() {
    let mut ticks = tokio::time::interval(PERIOD);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::future::Future;
    use std::pin::Pin;
    use std::task::Poll;

    use super::*;

    /// The write system calls this thread has made so far (Linux task I/O accounting).
    fn writes_so_far() -> Option<u64> {
        let io = std::fs::read_to_string("/proc/thread-self/io").ok()?;
        io.lines()
            .find_map(|line| line.strip_prefix("syscw: "))
            .and_then(|n| n.trim().parse().ok())
    }

    /// Write system calls made while arming 100 request-like timeouts right after the
    /// driver parked and woke with only the anchor (or nothing) armed.
    fn writes_arming_timeouts(anchored: bool) -> Option<u64> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            if anchored {
                tokio::spawn(hold());
                tokio::task::yield_now().await;
            }
            // Park until a short timer fires: the driver then notes its next wake.
            tokio::time::sleep(Duration::from_millis(5)).await;
            let before = writes_so_far()?;
            let mut timeouts: Vec<Pin<Box<tokio::time::Sleep>>> = Vec::new();
            for _ in 0..100 {
                let mut timeout = Box::pin(tokio::time::sleep(Duration::from_secs(30)));
                // The first poll arms it, as a request's first poll of its timeout does.
                std::future::poll_fn(|cx| {
                    let _ = timeout.as_mut().poll(cx);
                    Poll::Ready(())
                })
                .await;
                timeouts.push(timeout);
            }
            Some(writes_so_far()? - before)
        })
    }

    #[test]
    fn arming_timeouts_makes_no_system_call_with_the_anchor() {
        let (Some(bare), Some(anchored)) =
            (writes_arming_timeouts(false), writes_arming_timeouts(true))
        else {
            eprintln!("skipped: no /proc/thread-self/io on this kernel");
            return;
        };
        // Without the anchor, each timeout wakes the driver (the reason for the anchor;
        // if tokio stops doing this, the anchor can go).
        assert!(bare >= 90, "{bare} writes without the anchor");
        assert!(anchored <= 2, "{anchored} writes with the anchor");
    }
}
