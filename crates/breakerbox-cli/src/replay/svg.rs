//! The `--svg` timeline: the breaker's phase as coloured bands above the trace's failure
//! rate. Hand-written SVG, no dependencies.

use std::fmt::Write as _;

use breakerbox::{Nanos, Phase};
use breakerbox_http::HumanDuration;

use super::timeline::Timeline;

const WIDTH: f64 = 1000.0;
const LEFT: f64 = 60.0;
const PLOT: f64 = WIDTH - LEFT - 20.0;
const BAND_TOP: f64 = 40.0;
const BAND_HEIGHT: f64 = 36.0;
const RATE_TOP: f64 = 100.0;
const RATE_HEIGHT: f64 = 200.0;
const HEIGHT: f64 = RATE_TOP + RATE_HEIGHT + 60.0;

fn color(phase: Phase) -> &'static str {
    match phase {
        Phase::Closed => "#2e7d32",
        Phase::Open => "#c62828",
        Phase::HalfOpen => "#f9a825",
        Phase::ForcedOpen => "#6a1b9a",
        Phase::Disabled => "#757575",
        // A phase newer than this chart: a neutral grey.
        _ => "#9e9e9e",
    }
}

/// Renders the chart of a replay titled `title`.
pub fn render(timeline: &Timeline, title: &str) -> String {
    let end = timeline.end.as_u64().max(1);
    let columns = PLOT as usize;
    let x = |t: u64| LEFT + PLOT * (t as f64 / end as f64);
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="{LEFT}" y="20" font-size="14" font-weight="bold">{}</text>"#,
        escape(title)
    );

    // Phase bands: each pixel column takes the phase it spent the most time in.
    let mut share = vec![[0u64; 5]; columns];
    let per_column = (end as f64 / columns as f64).max(1.0);
    for (i, (from, phase)) in timeline.phases.iter().enumerate() {
        let to = timeline
            .phases
            .get(i + 1)
            .map_or(end, |(t, _)| t.as_u64())
            .min(end);
        let mut t = from.as_u64();
        while t < to {
            let col = ((t as f64 / per_column) as usize).min(columns - 1);
            let col_end = if col == columns - 1 {
                to
            } else {
                (((col + 1) as f64 * per_column) as u64).max(t + 1)
            };
            let until = to.min(col_end);
            share[col][phase.index()] += until - t;
            t = until;
        }
    }
    let mut run: Option<(usize, usize)> = None;
    let draw = |out: &mut String, start: usize, stop: usize, p: usize| {
        let _ = writeln!(
            out,
            r#"<rect x="{:.1}" y="{BAND_TOP}" width="{:.1}" height="{BAND_HEIGHT}" fill="{}"><title>{}</title></rect>"#,
            LEFT + start as f64,
            (stop - start) as f64,
            color(Phase::ALL[p]),
            Phase::ALL[p]
        );
    };
    for (col, s) in share.iter().enumerate() {
        if s.iter().all(|v| *v == 0) {
            continue;
        }
        let p = (0..5).max_by_key(|i| (s[*i], 5 - i)).unwrap_or(0);
        run = match run {
            Some((start, q)) if q == p => Some((start, q)),
            Some((start, q)) => {
                draw(&mut out, start, col, q);
                Some((col, p))
            }
            None => Some((col, p)),
        };
    }
    if let Some((start, q)) = run {
        draw(&mut out, start, columns, q);
    }
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="end">phase</text>"#,
        LEFT - 6.0,
        BAND_TOP + BAND_HEIGHT / 2.0 + 4.0
    );

    // Failure-rate axis and line.
    let y = |rate: f64| RATE_TOP + RATE_HEIGHT * (1.0 - rate);
    for tick in [0.0, 0.5, 1.0] {
        let _ = writeln!(
            out,
            "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#ddd\"/>\n<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{:.0}%</text>",
            LEFT + PLOT,
            y(tick),
            y(tick),
            LEFT - 6.0,
            y(tick) + 4.0,
            tick * 100.0
        );
    }
    let mut points = String::new();
    for (i, (calls, failures)) in timeline.buckets.iter().enumerate() {
        if *calls == 0 {
            continue;
        }
        let mid = (i as u64)
            .saturating_mul(timeline.width)
            .saturating_add(timeline.width / 2)
            .min(end);
        let _ = write!(
            points,
            "{:.1},{:.1} ",
            x(mid),
            y(*failures as f64 / *calls as f64)
        );
    }
    let _ = writeln!(
        out,
        "<polyline fill=\"none\" stroke=\"#1565c0\" stroke-width=\"1.5\" points=\"{}\"/>",
        points.trim_end()
    );
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="end" transform="rotate(-90 {} {})">failure rate</text>"#,
        16,
        RATE_TOP + RATE_HEIGHT / 2.0,
        16,
        RATE_TOP + RATE_HEIGHT / 2.0
    );

    // Time axis.
    let axis_y = RATE_TOP + RATE_HEIGHT + 18.0;
    let step = nice_step(end / 5);
    let mut t = 0;
    while t <= end {
        let label = if t == 0 {
            "0s".to_owned()
        } else {
            HumanDuration(Nanos(t).as_duration()).to_string()
        };
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{axis_y}" text-anchor="middle">{label}</text>"#,
            x(t)
        );
        // Near the end of the u64 range the next tick does not exist (it used to wrap
        // around and loop forever).
        match t.checked_add(step) {
            Some(next) => t = next,
            None => break,
        }
    }

    // Legend.
    let legend_y = HEIGHT - 14.0;
    let mut lx = LEFT;
    for phase in Phase::ALL {
        let _ = writeln!(
            out,
            r#"<rect x="{lx}" y="{}" width="12" height="12" fill="{}"/><text x="{}" y="{legend_y}">{}</text>"#,
            legend_y - 10.0,
            color(phase),
            lx + 16.0,
            phase
        );
        lx += 110.0;
    }
    let _ = writeln!(
        out,
        "<line x1=\"{lx}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#1565c0\" stroke-width=\"2\"/><text x=\"{}\" y=\"{legend_y}\">failure rate (trace)</text>",
        lx + 14.0,
        legend_y - 4.0,
        legend_y - 4.0,
        lx + 18.0
    );
    out.push_str("</svg>\n");
    out
}

/// The smallest 1, 2 or 5 times a power of ten nanoseconds that is at least `raw`.
fn nice_step(raw: u64) -> u64 {
    let mut power = 1u64;
    loop {
        for m in [1, 2, 5] {
            let step = power.saturating_mul(m);
            if step >= raw || step == u64::MAX {
                return step.max(1);
            }
        }
        power = power.saturating_mul(10);
    }
}

/// `text` as XML character data. Control characters are not allowed in XML 1.0, even as
/// references: they become U+FFFD.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c if c.is_control() => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}
