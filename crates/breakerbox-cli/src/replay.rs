//! `breakerbox replay`: replays a recorded trace through a breaker config on the pure model
//! and reports how the breaker would have behaved.

mod engine;
mod progress;
mod svg;
mod time;
mod timeline;
mod trace;

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;

use anyhow::Context as _;
use breakerbox_http::HumanDuration;

use crate::printable::printable;
use crate::spec::DependencySpec;
use crate::Fatal;
use engine::{Replayer, Stats};
use progress::Progress;
pub use time::TimeUnit;
use trace::{Next, TraceReader};

/// How many malformed lines are printed before they are only counted.
const SHOWN_MALFORMED: u64 = 20;

/// Arguments of `breakerbox replay`.
#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// The dependency's config: TOML with `[breaker]` and optional `[judge]`.
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// The trace: CSV (`timestamp,status,latency_ms[,error_code]`) or JSON Lines; `-` for
    /// stdin. Status 0 or empty means no response.
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,
    /// Write a timeline chart (phase above the failure rate) to this SVG file.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Stop at the first malformed line (exit code 2) instead of skipping it.
    #[arg(long)]
    pub strict: bool,
    /// The unit of numeric timestamps (RFC 3339 timestamps are always understood).
    #[arg(long, value_enum, default_value = "ms")]
    pub timestamps: TimeUnit,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The summary printed at the end, as `--json` prints it.
#[derive(serde::Serialize)]
struct Summary {
    #[serde(flatten)]
    stats: Stats,
    malformed: u64,
}

/// Runs `breakerbox replay`.
pub fn run(args: ReplayArgs) -> anyhow::Result<()> {
    let spec = DependencySpec::from_file(&args.config)?;
    let config = spec
        .config()
        .with_context(|| format!("in {}", args.config.display()))?;
    let judge = spec
        .http_judge()
        .with_context(|| format!("in {}", args.config.display()))?;
    let pointer = spec
        .judge
        .business
        .as_ref()
        .and_then(|b| b.pointers.first().cloned());

    let (input, size): (Box<dyn BufRead>, u64) = if args.trace.as_os_str() == "-" {
        (
            Box::new(BufReader::with_capacity(1 << 18, std::io::stdin())),
            0,
        )
    } else {
        let file = File::open(&args.trace)
            .with_context(|| format!("cannot open {}", args.trace.display()))?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        (Box::new(BufReader::with_capacity(1 << 18, file)), size)
    };

    let shown_trace = printable(&args.trace.display().to_string()).into_owned();
    let mut replayer = Replayer::new(config, judge, pointer, args.svg.is_some());
    let mut reader = TraceReader::new(input, args.timestamps);
    let mut progress = Progress::new(size);
    let mut malformed = 0u64;
    let mut events = 0u64;
    loop {
        let next = reader
            .next_event()
            .with_context(|| format!("reading {shown_trace}"))?;
        match next {
            Next::Event(e) => {
                replayer.call(e.timestamp, e.status, e.latency, e.error_code.as_deref());
                events += 1;
            }
            Next::Malformed(m) => {
                if args.strict {
                    return Err(Fatal::new(
                        2,
                        format!("{shown_trace}:{}: {}", m.line, printable(&m.message)),
                    )
                    .into());
                }
                malformed += 1;
                if malformed <= SHOWN_MALFORMED {
                    eprintln!(
                        "breakerbox: {shown_trace}:{}: {} (skipped)",
                        m.line,
                        printable(&m.message)
                    );
                }
            }
            Next::End => break,
        }
        progress.tick(events, reader.bytes_read());
    }
    progress.finish();
    if malformed > SHOWN_MALFORMED {
        eprintln!(
            "breakerbox: {} more malformed lines skipped",
            malformed - SHOWN_MALFORMED
        );
    }

    if events == 0 {
        return Err(Fatal::new(
            2,
            format!("{shown_trace}: no valid line ({malformed} malformed): nothing to replay"),
        )
        .into());
    }
    let (stats, timeline) = replayer.finish();
    if let (Some(path), Some(timeline)) = (&args.svg, timeline) {
        let title = format!(
            "{} through {}",
            file_name(&args.trace),
            file_name(&args.config)
        );
        std::fs::write(path, svg::render(&timeline, &title))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let summary = Summary { stats, malformed };
    let mut out = Vec::new();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &summary)?;
        writeln!(out)?;
    } else {
        write_text(&mut out, &summary, &args)?;
    }
    crate::emit(&String::from_utf8_lossy(&out))
}

/// The file name of `path`, safe to print.
fn file_name(path: &std::path::Path) -> String {
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    printable(&name).into_owned()
}

fn ms(value: f64) -> HumanDuration {
    HumanDuration(std::time::Duration::from_nanos((value * 1e6) as u64))
}

fn percent(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        part * 100.0 / whole
    } else {
        0.0
    }
}

fn write_text(out: &mut impl Write, summary: &Summary, args: &ReplayArgs) -> std::io::Result<()> {
    let s = &summary.stats;
    writeln!(
        out,
        "replayed {} calls over {} ({} through {})",
        s.events,
        ms(s.span_ms),
        file_name(&args.trace),
        file_name(&args.config)
    )?;
    writeln!(
        out,
        "  trips                      {:>8}   (+{} re-opened from half-open, {} closed again)",
        s.trips, s.reopens, s.closes
    )?;
    writeln!(
        out,
        "  time open                  {:>8}   ({:.1}% of the trace; half-open {})",
        ms(s.time_open_ms).to_string(),
        percent(s.time_open_ms, s.span_ms),
        ms(s.time_half_open_ms)
    )?;
    writeln!(
        out,
        "  calls rejected             {:>8}   ({} of them would have failed)",
        s.rejected, s.rejected_would_fail
    )?;
    if s.ramp_rejections > 0 {
        writeln!(
            out,
            "  of them by the ramp        {:>8}   (closed, admitting a growing share after recovery)",
            s.ramp_rejections
        )?;
    }
    if s.shadow_rejections > 0 {
        writeln!(
            out,
            "  shadow: would-be rejected  {:>8}   (admitted in shadow mode; {} of them failed)",
            s.shadow_rejections, s.shadow_rejections_failed
        )?;
    }
    let reasons: Vec<String> = s
        .failures_by_reason
        .iter()
        .map(|(reason, n)| format!("{reason}: {n}"))
        .collect();
    writeln!(
        out,
        "  failed calls let through   {:>8}   {}",
        s.failed_let_through,
        if reasons.is_empty() {
            String::new()
        } else {
            format!("({})", reasons.join(", "))
        }
    )?;
    writeln!(out, "  probes sent                {:>8}", s.probes)?;
    if summary.malformed > 0 {
        writeln!(out, "  malformed lines skipped    {:>8}", summary.malformed)?;
    }
    if let Some(svg) = &args.svg {
        writeln!(
            out,
            "  timeline written to {}",
            printable(&svg.display().to_string())
        )?;
    }
    Ok(())
}
