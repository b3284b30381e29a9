//! The health checks' counters and last result of one upstream (`/status`, `/metrics`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use breakerbox::Verdict;
use breakerbox_http::Judgement;

/// The results a check is counted under: the verdicts, and `skipped` for a check that
/// found no probe slot free (another node's check, or a probe of another kind, had it).
pub const RESULTS: [&str; 4] = ["success", "failure", "ignore", "skipped"];

/// One upstream's health checks.
#[derive(Default)]
pub struct HealthStats {
    checks: [AtomicU64; RESULTS.len()],
    /// Real requests answered 503 `health probing` (rule 24).
    rejections: AtomicU64,
    last: Mutex<Option<LastCheck>>,
}

/// The last check that was judged.
#[derive(Clone, Debug)]
pub struct LastCheck {
    /// Its judgement (reason `timeout` when it ran out of time).
    pub judgement: Judgement,
    /// The HTTP status, when a response head came.
    pub status: Option<u16>,
    /// How long it took.
    pub latency_ms: u64,
    /// The breaker's phase once it was recorded.
    pub phase: &'static str,
}

fn index(verdict: Verdict) -> usize {
    match verdict {
        Verdict::Success => 0,
        Verdict::Failure => 1,
        Verdict::Ignore => 2,
    }
}

impl HealthStats {
    /// Counts a judged check and keeps it as the last one.
    pub fn checked(&self, last: LastCheck) {
        self.checks[index(last.judgement.verdict)].fetch_add(1, Ordering::Relaxed);
        if let Ok(mut slot) = self.last.lock() {
            *slot = Some(last);
        }
    }

    /// Counts a check skipped for want of a free probe slot.
    pub fn skipped(&self) {
        self.checks[3].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a real request rejected while the health check probes.
    pub fn rejected(&self) {
        self.rejections.fetch_add(1, Ordering::Relaxed);
    }

    /// Checks so far by result, in [`RESULTS`] order.
    pub fn checks(&self) -> [u64; RESULTS.len()] {
        std::array::from_fn(|i| self.checks[i].load(Ordering::Relaxed))
    }

    /// Real requests rejected `health probing` so far.
    pub fn rejections(&self) -> u64 {
        self.rejections.load(Ordering::Relaxed)
    }

    /// The last judged check, if any.
    pub fn last(&self) -> Option<LastCheck> {
        self.last.lock().ok()?.clone()
    }
}
