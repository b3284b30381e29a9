//! The demo's closing summary: every group's totals side by side.

use std::time::Duration;

use breakerbox::model::TransitionReason;
use breakerbox::Phase;
use serde::Serialize;
use tokio::time::Instant;

use super::traffic::{Change, Group};

/// One group's totals.
#[derive(Clone, Debug, Serialize)]
pub struct GroupSummary {
    /// The group's title.
    pub name: String,
    /// Whether it called through breakers.
    pub breaker: bool,
    /// How many nodes it had.
    pub nodes: usize,
    /// Calls offered (the same schedule for every group).
    pub offered: u64,
    /// Calls that went to the upstream.
    pub sent: u64,
    /// Requests the upstream received from the group while it was failing.
    pub reached_failing_upstream: u64,
    /// Calls let through that failed.
    pub failed: u64,
    /// Calls rejected by the breaker without calling.
    pub rejected: u64,
    /// Rule 23: of those, the calls the ramp after the recovery turned away.
    pub ramp_rejected: u64,
    /// Seconds callers spent waiting, summed over every call.
    pub waited_s: f64,
    /// Half-open probes sent.
    pub probes: u64,
    /// Closed -> open transitions (summed over nodes; once for a shared breaker).
    pub trips: u64,
    /// Every transition into open (trips and failed probes).
    pub opens: u64,
    /// Seconds from the upstream's recovery until the breaker (every node's) closed:
    /// 0 when it was closed already, `None` when it did not close (or no breaker, or the
    /// upstream had not recovered yet).
    pub closed_after_recovery_s: Option<f64>,
}

/// The whole run's summary.
#[derive(Clone, Debug, Serialize)]
pub struct DemoSummary {
    /// How long the run lasted.
    pub duration_s: f64,
    /// Whether it was cut short (Ctrl-C).
    pub interrupted: bool,
    /// When the upstream recovered for good (planned).
    pub recovered_at_s: f64,
    /// Whether the run got that far.
    pub upstream_recovered: bool,
    /// Calls offered per second per node.
    pub rate: u32,
    /// Each group.
    pub groups: Vec<GroupSummary>,
}

/// Sums up `group` after a run that lasted `ran`, the upstream recovering at `recovery`.
pub fn summarize(
    group: &Group,
    reached: u64,
    start: Instant,
    ran: Duration,
    recovery: Duration,
) -> GroupSummary {
    let total = group.total();
    let by_node = group.changes_by_node();
    let all = by_node.iter().flatten();
    let trips = all
        .clone()
        .filter(|c| matches!(c.reason, TransitionReason::Tripped(_)))
        .count() as u64;
    let opens = all.filter(|c| c.to == Phase::Open).count() as u64;
    let closed_after_recovery_s = if group.has_breaker() && ran >= recovery {
        by_node
            .iter()
            .map(|changes| closed_after(changes, start, recovery))
            .try_fold(0.0f64, |worst, node| node.map(|s| worst.max(s)))
    } else {
        None
    };
    GroupSummary {
        name: group.name.clone(),
        breaker: group.has_breaker(),
        nodes: group.nodes.len(),
        offered: total.offered,
        sent: total.sent,
        reached_failing_upstream: reached,
        failed: total.failed(),
        rejected: total.rejected,
        ramp_rejected: total.ramp_rejected,
        waited_s: total.waited.as_secs_f64(),
        probes: total.probes,
        trips,
        opens,
        closed_after_recovery_s,
    }
}

/// Seconds after `recovery` at which one breaker closed (0 if it was closed already).
fn closed_after(changes: &[Change], start: Instant, recovery: Duration) -> Option<f64> {
    let since = |c: &Change| c.at.saturating_duration_since(start);
    let before = changes.iter().rev().find(|c| since(c) <= recovery);
    if before.is_none_or(|c| c.to == Phase::Closed) {
        return Some(0.0);
    }
    changes
        .iter()
        .find(|c| since(c) > recovery && c.to == Phase::Closed)
        .map(|c| (since(c) - recovery).as_secs_f64())
}

/// The summary as a table.
pub fn render(summary: &DemoSummary) -> String {
    let mut lines = Vec::new();
    let width = 14usize.max(
        summary
            .groups
            .iter()
            .map(|g| g.name.len())
            .max()
            .unwrap_or(0),
    );
    lines.push(format!(
        "summary after {:.1}s{} ({} calls/s offered per node, the same schedule for every group)",
        summary.duration_s,
        if summary.interrupted {
            " (interrupted)"
        } else {
            ""
        },
        summary.rate
    ));
    let mut header = format!("{:<42}", "");
    for g in &summary.groups {
        header.push_str(&format!("  {:>width$}", g.name));
    }
    lines.push(header);
    let row = |label: &str, value: &dyn Fn(&GroupSummary) -> String| {
        let mut line = format!("{label:<42}");
        for g in &summary.groups {
            line.push_str(&format!("  {:>width$}", value(g)));
        }
        line
    };
    let dash = |g: &GroupSummary, v: String| if g.breaker { v } else { "-".to_owned() };
    lines.push(row("calls offered", &|g| g.offered.to_string()));
    lines.push(row("calls that reached the failing upstream", &|g| {
        g.reached_failing_upstream.to_string()
    }));
    lines.push(row("failed calls", &|g| g.failed.to_string()));
    lines.push(row("rejected fast (no call made)", &|g| {
        dash(g, g.rejected.to_string())
    }));
    lines.push(row("  of them by the ramp after recovery", &|g| {
        dash(g, g.ramp_rejected.to_string())
    }));
    lines.push(row("time callers spent waiting", &|g| {
        format!("{:.1}s", g.waited_s)
    }));
    lines.push(row("probes sent", &|g| dash(g, g.probes.to_string())));
    lines.push(row("trips (closed -> open)", &|g| {
        dash(g, g.trips.to_string())
    }));
    lines.push(row("closed after the upstream recovered", &|g| {
        dash(
            g,
            match (summary.upstream_recovered, g.closed_after_recovery_s) {
                (false, _) => "n/a".to_owned(),
                (true, Some(s)) => format!("+{s:.1}s"),
                (true, None) => "not yet".to_owned(),
            },
        )
    }));
    if summary.upstream_recovered {
        lines.push(format!(
            "the upstream recovered at {:.1}s",
            summary.recovered_at_s
        ));
    } else {
        lines.push(format!(
            "the run ended before the upstream's recovery (planned at {:.1}s)",
            summary.recovered_at_s
        ));
    }
    lines.join("\n")
}
