//! The upstream's scripted timeline: healthy, outage, slow, recovering, healthy again, as
//! fractions of the demo's duration.

use std::time::Duration;

/// A stretch of the upstream's timeline.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    /// 200 in 5 ms.
    Healthy,
    /// 503 after 100 ms; every third request hangs past the callers' timeout.
    Outage,
    /// 200, but after 600 ms (slower than the judge's 300 ms).
    Slow,
    /// Every other request is a quick 503.
    Recovering,
    /// Healthy again, for good.
    Recovered,
}

/// Where each stage starts, as a fraction of the run.
const BOUNDS: [(f64, Stage); 5] = [
    (0.0, Stage::Healthy),
    (0.2, Stage::Outage),
    (0.45, Stage::Slow),
    (0.6, Stage::Recovering),
    (0.75, Stage::Recovered),
];

impl Stage {
    /// The stage at `elapsed` into a run of `total`.
    pub fn at(elapsed: Duration, total: Duration) -> Stage {
        let f = elapsed.as_secs_f64() / total.as_secs_f64().max(1e-9);
        let mut stage = Stage::Healthy;
        for (from, s) in BOUNDS {
            if f >= from {
                stage = s;
            }
        }
        stage
    }

    /// Its name in the live view.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Healthy | Stage::Recovered => "healthy",
            Stage::Outage => "outage",
            Stage::Slow => "slow",
            Stage::Recovering => "recovering",
        }
    }

    /// Whether the upstream is failing (anything but healthy).
    pub fn failing(self) -> bool {
        !matches!(self, Stage::Healthy | Stage::Recovered)
    }

    /// When the upstream recovers for good in a run of `total`.
    pub fn recovery_at(total: Duration) -> Duration {
        total.mul_f64(BOUNDS[4].0)
    }

    /// The timeline as text: `healthy 0s-4.8s, outage 4.8s-10.8s, ...`.
    pub fn describe(total: Duration) -> String {
        let secs = |f: f64| format!("{:.1}s", total.as_secs_f64() * f);
        BOUNDS
            .iter()
            .enumerate()
            .map(|(i, (from, stage))| {
                let to = BOUNDS.get(i + 1).map_or(1.0, |b| b.0);
                format!("{} {}-{}", stage.name(), secs(*from), secs(to))
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The response to the `n`-th request of this stage: status and how long to wait first.
    pub fn response(self, n: u64) -> (u16, Duration) {
        match self {
            Stage::Healthy | Stage::Recovered => (200, Duration::from_millis(5)),
            Stage::Outage if n.is_multiple_of(3) => (503, Duration::from_secs(3)),
            Stage::Outage => (503, Duration::from_millis(100)),
            Stage::Slow => (200, Duration::from_millis(600)),
            Stage::Recovering if n.is_multiple_of(2) => (503, Duration::from_millis(20)),
            Stage::Recovering => (200, Duration::from_millis(10)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_follow_the_fractions_of_the_run() {
        let total = Duration::from_secs(20);
        let at = |s: f64| Stage::at(Duration::from_secs_f64(s), total);
        assert_eq!(at(0.0), Stage::Healthy);
        assert_eq!(at(4.0), Stage::Outage);
        assert_eq!(at(9.5), Stage::Slow);
        assert_eq!(at(12.5), Stage::Recovering);
        assert_eq!(at(15.0), Stage::Recovered);
        assert_eq!(Stage::recovery_at(total), Duration::from_secs(15));
    }
}
