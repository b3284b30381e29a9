//! The operator commands' output: a table for people, JSON for scripts.

use super::shared::Row;
use crate::printable::printable;

/// Rows as pretty JSON (an array), with a trailing newline.
pub fn json(rows: &[Row]) -> anyhow::Result<String> {
    Ok(format!("{}\n", serde_json::to_string_pretty(rows)?))
}

/// A remaining time, short and rounded down: `4.2s`, `42s`, `4m59s`, `2h5m`.
fn seconds(s: f64) -> String {
    let whole = s.floor() as u64;
    if s >= 3600.0 {
        format!("{}h{}m", whole / 3600, whole % 3600 / 60)
    } else if s >= 60.0 {
        format!("{}m{}s", whole / 60, whole % 60)
    } else if s >= 10.0 {
        format!("{whole}s")
    } else {
        format!("{:.1}s", s)
    }
}

fn percent(rate: Option<f64>) -> String {
    rate.map_or_else(|| "-".to_owned(), |r| format!("{:.1}", r * 100.0))
}

fn open_until(row: &Row) -> String {
    match (row.phase.as_deref(), row.open_for_s) {
        (Some("open"), Some(s)) => format!("in {}", seconds(s)),
        (Some("forced_open" | "disabled"), Some(s)) => format!("in {}", seconds(s)),
        (Some("forced_open" | "disabled"), None) => "until reset".to_owned(),
        _ => "-".to_owned(),
    }
}

fn probes(row: &Row) -> String {
    if row.phase.as_deref() == Some("half_open") {
        format!("{} ({} ok)", row.probes_in_flight, row.probe_successes)
    } else {
        "-".to_owned()
    }
}

fn override_text(row: &Row) -> String {
    match (&row.override_kind, row.override_until_reset, row.open_for_s) {
        (Some(kind), true, _) => format!("{kind} until reset"),
        (Some(kind), false, Some(s)) => format!("{kind} for {}", seconds(s)),
        _ => "-".to_owned(),
    }
}

/// Rule 20: `on (N would-be rejections)` in shadow mode; the count alone after it.
fn shadow_text(row: &Row) -> String {
    match (row.shadow, row.shadow_rejections) {
        (true, n) => format!("on ({n} would-be rejections)"),
        (false, 0) => "-".to_owned(),
        (false, n) => format!("off ({n} would-be rejections)"),
    }
}

/// Rule 23: `since 4.2s (37 calls)` while a recovery ramp is recorded.
fn ramp_text(row: &Row) -> String {
    match row.ramp_age_s {
        Some(age) => format!("since {} ({} calls)", seconds(age), row.ramp_calls),
        None => "-".to_owned(),
    }
}

/// Rows as an aligned table, with a trailing newline.
pub fn table(rows: &[Row]) -> String {
    if rows.is_empty() {
        return "no breakers found\n".to_owned();
    }
    let header = [
        "NAME",
        "PHASE",
        "GEN",
        "CALLS",
        "FAIL%",
        "SLOW%",
        "TRIPS",
        "OPEN UNTIL",
        "PROBES",
        "OVERRIDE",
        "SHADOW",
        "RAMP",
    ];
    let mut cells: Vec<Vec<String>> = vec![header.iter().map(|h| (*h).to_owned()).collect()];
    let mut errors = Vec::new();
    for row in rows {
        if let Some(error) = &row.error {
            errors.push(format!("{}: {}", printable(&row.name), printable(error)));
            if row.phase.is_none() {
                continue;
            }
        }
        cells.push(vec![
            printable(&row.name).into_owned(),
            row.phase.clone().unwrap_or_default(),
            row.generation.to_string(),
            row.window_calls.to_string(),
            percent(row.failure_rate),
            percent(row.slow_rate),
            row.trips.to_string(),
            open_until(row),
            probes(row),
            override_text(row),
            shadow_text(row),
            ramp_text(row),
        ]);
    }
    let mut widths = vec![0; header.len()];
    for line in &cells {
        for (w, cell) in widths.iter_mut().zip(line) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = String::new();
    if cells.len() > 1 {
        for line in &cells {
            let text: Vec<String> = line
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (cell, w))| {
                    if (2..=6).contains(&i) {
                        format!("{cell:>w$}")
                    } else {
                        format!("{cell:<w$}")
                    }
                })
                .collect();
            out.push_str(text.join("  ").trim_end());
            out.push('\n');
        }
    }
    for error in errors {
        out.push_str(&format!("error: {error}\n"));
    }
    out
}
