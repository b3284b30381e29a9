//! The model's rate windows: plain, obviously correct, and the specification for the
//! engine's lock-free windows and the Lua scripts (rule 7).
//!
//! Rule numbers ("rule 7") refer to `docs/RULES.md` in the repository.

use std::collections::VecDeque;

use super::WindowCounts;
use crate::config::WindowKind;
use crate::{Config, Nanos};

/// One time bucket: its absolute index `floor(t / width)` and what it holds.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Bucket {
    /// `floor(t / width)` of the calls it holds.
    pub index: u64,
    /// What it holds.
    pub counts: WindowCounts,
}

/// The closed-phase window of the model.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelWindow {
    /// No rate rule.
    None,
    /// The last `size` non-ignored outcomes, oldest first, as (failed, slow).
    Count {
        /// Capacity.
        size: usize,
        /// Outcomes, oldest first.
        calls: VecDeque<(bool, bool)>,
    },
    /// `buckets.len()` buckets of `width`; bucket `i` lives at `index % len`.
    Time {
        /// Bucket width.
        width: Nanos,
        /// The ring of buckets.
        buckets: Vec<Bucket>,
    },
}

impl ModelWindow {
    /// An empty window for `config`.
    pub fn new(config: &Config) -> ModelWindow {
        match config.rate.map(|rule| rule.window) {
            None => ModelWindow::None,
            Some(WindowKind::Count { size }) => ModelWindow::Count {
                size: size as usize,
                calls: VecDeque::with_capacity(size as usize),
            },
            Some(kind @ WindowKind::Time { buckets, .. }) => ModelWindow::Time {
                width: kind.bucket_width().unwrap_or(Nanos(1)),
                buckets: vec![
                    Bucket {
                        index: u64::MAX,
                        counts: WindowCounts::default(),
                    };
                    buckets as usize
                ],
            },
        }
    }

    /// Files one non-ignored outcome at `now`.
    pub fn record(&mut self, failed: bool, slow: bool, now: Nanos) {
        match self {
            ModelWindow::None => {}
            ModelWindow::Count { size, calls } => {
                if calls.len() == *size {
                    calls.pop_front();
                }
                calls.push_back((failed, slow));
            }
            ModelWindow::Time { width, buckets } => {
                let index = now.as_u64() / width.as_u64().max(1);
                let len = buckets.len() as u64;
                let Some(bucket) = buckets.get_mut((index % len) as usize) else {
                    return;
                };
                if bucket.index != index {
                    *bucket = Bucket {
                        index,
                        counts: WindowCounts::default(),
                    };
                }
                bucket.counts.calls += 1;
                bucket.counts.failures += u64::from(failed);
                bucket.counts.slow += u64::from(slow);
            }
        }
    }

    /// What the window holds at `now` (a time window drops buckets older than B - 1
    /// widths before the current one).
    pub fn counts(&self, now: Nanos) -> WindowCounts {
        match self {
            ModelWindow::None => WindowCounts::default(),
            ModelWindow::Count { calls, .. } => {
                let mut counts = WindowCounts::default();
                for &(failed, slow) in calls {
                    counts.calls += 1;
                    counts.failures += u64::from(failed);
                    counts.slow += u64::from(slow);
                }
                counts
            }
            ModelWindow::Time { width, buckets } => {
                let current = now.as_u64() / width.as_u64().max(1);
                let len = buckets.len() as u64;
                let mut counts = WindowCounts::default();
                for bucket in buckets {
                    if bucket.index <= current && current - bucket.index < len {
                        counts.calls += bucket.counts.calls;
                        counts.failures += bucket.counts.failures;
                        counts.slow += bucket.counts.slow;
                    }
                }
                counts
            }
        }
    }
}
