//! A circuit breaker protecting a flaky dependency.
//!
//! The "inventory service" below fails for a while, then recovers. The breaker trips after
//! a few failures, rejects calls instantly while it is open (no load on the struggling
//! service), lets a probe through when the cool-down is over, and closes again once probes
//! succeed. Time is a `ManualClock`, so the whole story runs in a few microseconds.
//!
//! Run it with `cargo run -p breakerbox --example quickstart`.

use std::cell::Cell;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use breakerbox::{CallError, CircuitBreaker, Event, EventKind, ManualClock};

/// A pretend remote service: down during `[outage_start, outage_end)`, up otherwise.
struct InventoryService {
    clock: ManualClock,
    outage: (Duration, Duration),
    calls_received: Cell<u32>,
}

impl InventoryService {
    fn stock(&self, item: &str) -> Result<u32, String> {
        use breakerbox::Clock;
        self.calls_received.set(self.calls_received.get() + 1);
        let now = self.clock.now().as_duration();
        if now >= self.outage.0 && now < self.outage.1 {
            Err(format!(
                "inventory: connection refused while looking up {item}"
            ))
        } else {
            Ok(42)
        }
    }
}

fn main() -> Result<(), breakerbox::ConfigError> {
    let clock = ManualClock::new();
    // The listener runs inside `call`; it queues a line that the loop prints after the call.
    let transitions = Arc::new(Mutex::new(Vec::<String>::new()));
    let queue = transitions.clone();
    let breaker = CircuitBreaker::builder()
        .name("inventory")
        .consecutive_failures(3) // trip after 3 failures in a row
        .recovery_timeout(Duration::from_secs(5)) // stay open 5 s before probing
        .max_probes(1) // one probe at a time while half-open
        .required_successes(2) // two good probes in a row close the breaker
        .clock(clock.clone())
        .listener(move |event: &Event<'_>| {
            if let EventKind::Transition(t) = event.kind {
                let line = format!(
                    "breaker '{}' went {} -> {} ({})",
                    event.breaker,
                    t.from,
                    t.to,
                    t.reason.as_str()
                );
                queue.lock().expect("transition log").push(line);
            }
        })
        .build()?;

    // The service is down from t = 2 s to t = 12 s.
    let service = InventoryService {
        clock: clock.clone(),
        outage: (Duration::from_secs(2), Duration::from_secs(12)),
        calls_received: Cell::new(0),
    };

    println!("One call per second for 20 s; the service is down from 2 s to 12 s.\n");
    let mut rejected = 0;
    for second in 0..20 {
        let outcome = match breaker.call(|| service.stock("widget")) {
            Ok(count) => format!("ok: {count} widgets in stock"),
            Err(CallError::Inner(error)) => format!("failed: {error}"),
            Err(CallError::Open(open)) => {
                rejected += 1;
                let retry = open
                    .retry_after()
                    .map_or(String::from("later"), |d| format!("in {d:?}"));
                format!("rejected by the breaker ({}), retry {retry}", open.phase())
            }
        };
        println!("t = {second:>2} s  {outcome}");
        for line in transitions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            println!("          ** {line}");
        }
        clock.advance(Duration::from_secs(1));
    }

    let snapshot = breaker.snapshot();
    println!("\nFinal snapshot:");
    println!("  phase:             {}", snapshot.phase);
    println!("  generation:        {}", snapshot.generation);
    println!("  consecutive trips: {}", snapshot.trips);
    println!("  stale results:     {}", snapshot.stale_results);
    println!(
        "\n{} calls reached the service; the breaker turned away {rejected} without touching it.",
        service.calls_received.get()
    );
    Ok(())
}
