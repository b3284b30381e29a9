//! A progress bar on stderr for large traces, drawn only when stderr is a terminal.

use std::io::{IsTerminal, Write};

use breakerbox::{Clock, MonotonicClock, Nanos};

/// Redraws at most every this many events (and only if 100 ms passed).
const EVERY: u64 = 1 << 16;

/// A progress bar over a trace of `total` bytes.
pub struct Progress {
    total: u64,
    clock: MonotonicClock,
    started: Nanos,
    last_draw: Nanos,
    drawn: bool,
    enabled: bool,
}

impl Progress {
    /// A bar for `total` bytes (0: unknown size), shown only on a terminal.
    pub fn new(total: u64) -> Progress {
        let clock = MonotonicClock;
        let started = clock.now();
        Progress {
            total,
            clock,
            started,
            last_draw: started,
            drawn: false,
            enabled: std::io::stderr().is_terminal(),
        }
    }

    /// Notes that `events` events and `bytes` bytes were read; redraws now and then.
    #[inline]
    pub fn tick(&mut self, events: u64, bytes: u64) {
        if !self.enabled || !events.is_multiple_of(EVERY) {
            return;
        }
        let now = self.clock.now();
        if now.saturating_sub(self.last_draw).as_u64() < 100_000_000 {
            return;
        }
        self.last_draw = now;
        self.drawn = true;
        let elapsed = (now.saturating_sub(self.started).as_u64() as f64 / 1e9).max(1e-9);
        let rate = events as f64 / elapsed;
        let line = if self.total > 0 {
            let fraction = (bytes as f64 / self.total as f64).min(1.0);
            let filled = (fraction * 30.0) as usize;
            format!(
                "\r[{}{}] {:>3.0}%  {} events  {:.1}M events/s ",
                "#".repeat(filled),
                " ".repeat(30 - filled),
                fraction * 100.0,
                events,
                rate / 1e6
            )
        } else {
            format!("\r{events} events  {:.1}M events/s ", rate / 1e6)
        };
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(line.as_bytes());
        let _ = err.flush();
    }

    /// Clears the bar.
    pub fn finish(&self) {
        if self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r{}\r", " ".repeat(80));
            let _ = err.flush();
        }
    }
}
