//! The live view: one row per second. On a terminal the screen is redrawn every second
//! (title, the latest rows, colours); otherwise each row is printed as a plain line.

use std::io::Write;

use super::script::Stage;
use super::traffic::{Counts, Group};

/// How many rows a redrawn screen keeps.
const SCREEN_ROWS: usize = 18;

/// Prints rows, redrawing on a terminal.
pub struct View {
    tty: bool,
    title: Vec<String>,
    header: Vec<String>,
    rows: Vec<String>,
}

impl View {
    /// A view titled `title` of `groups`; `tty` redraws with colours.
    pub fn new(tty: bool, title: Vec<String>, groups: &[std::sync::Arc<Group>]) -> View {
        let mut top = format!("{:>5}  {:<10}", "", "");
        let mut bottom = format!("{:>5}  {:<10}", "t", "upstream");
        for g in groups {
            if g.has_breaker() {
                top.push_str(&format!(" | {:<52}", g.name));
                bottom.push_str(&format!(
                    " | {:>4} {:>4} {:>4} {:>4} {:>4} {:>3} {:<22}",
                    "sent", "rej", "5xx", "t/o", "slow", "prb", "phase"
                ));
            } else {
                top.push_str(&format!(" | {:<23}", g.name));
                bottom.push_str(&format!(
                    " | {:>4} {:>4} {:>4} {:>4}",
                    "sent", "5xx", "t/o", "slow"
                ));
            }
        }
        View {
            tty,
            title,
            header: vec![top, bottom],
            rows: Vec::new(),
        }
    }

    /// Prints the title (and, off a terminal, the header).
    pub fn start(&self) {
        let mut out = std::io::stdout().lock();
        if !self.tty {
            for line in self.title.iter().chain(&self.header) {
                let _ = writeln!(out, "{line}");
            }
            let _ = out.flush();
        } else {
            self.redraw(&mut out);
        }
    }

    /// Adds the row of second `second`.
    pub fn row(
        &mut self,
        second: u64,
        stage: Stage,
        groups: &[std::sync::Arc<Group>],
        counts: &[Counts],
    ) {
        let mut line = format!("{:>4}s  {:<10}", second, stage.name());
        let mut colored = line.clone();
        if self.tty {
            colored = format!(
                "{:>4}s  {}",
                second,
                paint(stage.name(), 10, stage_color(stage))
            );
        }
        for (g, c) in groups.iter().zip(counts) {
            let text = if g.has_breaker() {
                let mut phase = g.phase_text();
                if c.ramp_rejected > 0 {
                    // Rule 23: closed, but admitting a growing share after the recovery.
                    phase = format!("{phase} (ramp {}%)", c.sent * 100 / c.offered.max(1));
                }
                let cells = format!(
                    " | {:>4} {:>4} {:>4} {:>4} {:>4} {:>3} ",
                    c.sent,
                    c.rejected,
                    c.status + c.transport,
                    c.timeout,
                    c.slow,
                    c.probes
                );
                line.push_str(&format!("{cells}{phase:<22}"));
                format!("{cells}{}", paint(&phase, 22, phase_color(&phase)))
            } else {
                let cells = format!(
                    " | {:>4} {:>4} {:>4} {:>4}",
                    c.sent,
                    c.status + c.transport,
                    c.timeout,
                    c.slow
                );
                line.push_str(&cells);
                cells
            };
            colored.push_str(&text);
        }
        let mut out = std::io::stdout().lock();
        if self.tty {
            self.rows.push(colored);
            self.redraw(&mut out);
        } else {
            let _ = writeln!(out, "{}", line.trim_end());
            let _ = out.flush();
        }
    }

    fn redraw(&self, out: &mut impl Write) {
        let _ = write!(out, "\x1b[H\x1b[2J");
        for line in &self.title {
            let _ = writeln!(out, "\x1b[1m{line}\x1b[0m");
        }
        for line in &self.header {
            let _ = writeln!(out, "{line}");
        }
        let skip = self.rows.len().saturating_sub(SCREEN_ROWS);
        for line in &self.rows[skip..] {
            let _ = writeln!(out, "{line}");
        }
        let _ = out.flush();
    }
}

fn stage_color(stage: Stage) -> &'static str {
    match stage {
        Stage::Healthy | Stage::Recovered => "32",
        Stage::Outage => "31",
        Stage::Slow => "35",
        Stage::Recovering => "33",
    }
}

fn phase_color(phase: &str) -> &'static str {
    if phase.contains('/') {
        "36"
    } else if phase.starts_with("open") || phase.starts_with("forced") {
        "31"
    } else if phase.starts_with("half") {
        "33"
    } else {
        "32"
    }
}

fn paint(text: &str, width: usize, color: &str) -> String {
    format!("\x1b[{color}m{text:<width$}\x1b[0m")
}
