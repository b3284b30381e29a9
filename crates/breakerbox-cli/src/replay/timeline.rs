//! What the SVG chart needs from a replay: the phase changes, and calls and failures per
//! time bucket (the buckets widen as the trace grows, so memory stays bounded).

use breakerbox::{Nanos, Phase};

/// At most this many buckets are kept; past it, neighbours merge and the width doubles.
const MAX_BUCKETS: usize = 4096;

/// Phase changes and per-bucket call counts of a replay.
#[derive(Clone, Debug)]
pub struct Timeline {
    /// Bucket width in nanoseconds.
    pub width: u64,
    /// `(calls, failures)` per bucket, judged from the trace (rejected calls included).
    pub buckets: Vec<(u64, u64)>,
    /// `(from, phase)`: the breaker entered `phase` at `from`; the first is `(0, closed)`.
    pub phases: Vec<(Nanos, Phase)>,
    /// The end of the replay.
    pub end: Nanos,
}

impl Timeline {
    /// An empty timeline with one-second buckets.
    pub fn new() -> Timeline {
        Timeline {
            width: 1_000_000_000,
            buckets: Vec::new(),
            phases: vec![(Nanos::ZERO, Phase::Closed)],
            end: Nanos::ZERO,
        }
    }

    /// Counts one call at `t`.
    pub fn call(&mut self, t: Nanos, failed: bool) {
        let mut index = (t.as_u64() / self.width) as usize;
        while index >= MAX_BUCKETS {
            self.merge();
            index = (t.as_u64() / self.width) as usize;
        }
        if index >= self.buckets.len() {
            self.buckets.resize(index + 1, (0, 0));
        }
        let bucket = &mut self.buckets[index];
        bucket.0 += 1;
        bucket.1 += u64::from(failed);
    }

    fn merge(&mut self) {
        self.buckets = self
            .buckets
            .chunks(2)
            .map(|pair| pair.iter().fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1)))
            .collect();
        self.width = self.width.saturating_mul(2);
    }

    /// The breaker entered `phase` at `t`.
    pub fn phase(&mut self, t: Nanos, phase: Phase) {
        self.phases.push((t, phase));
    }

    /// The replay ended at `t`.
    pub fn end(&mut self, t: Nanos) {
        self.end = t;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_merge_when_the_trace_outgrows_them() {
        let mut tl = Timeline::new();
        tl.call(Nanos(0), true);
        tl.call(Nanos(5_000_000_000 * MAX_BUCKETS as u64), false);
        assert!(tl.buckets.len() <= MAX_BUCKETS);
        assert_eq!(tl.width, 8_000_000_000);
        let total: (u64, u64) = tl
            .buckets
            .iter()
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        assert_eq!(total, (2, 1));
    }
}
