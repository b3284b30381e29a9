//! A progress bar on stderr for large traces (`indicatif`, drawn only when stderr is a
//! terminal).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Updates the bar every this many events: the replay loop pays one branch per event.
const EVERY: u64 = 1 << 16;

/// A progress bar over a trace of `total` bytes.
#[derive(Debug)]
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar for `total` bytes (0: unknown size), shown only on a terminal.
    pub fn new(total: u64) -> Progress {
        let bar = if total > 0 {
            ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr())
        } else {
            ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr())
        };
        let template = if total > 0 {
            "[{bar:30}] {percent:>3}%  {msg}"
        } else {
            "{spinner} {msg}"
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("## "));
        }
        Progress { bar }
    }

    /// Notes that `events` events and `bytes` bytes were read; updates the bar now and
    /// then (indicatif limits the redraws).
    #[inline]
    pub fn tick(&mut self, events: u64, bytes: u64) {
        if !events.is_multiple_of(EVERY) {
            return;
        }
        self.bar.set_position(bytes);
        let seconds = self.bar.elapsed().as_secs_f64().max(1e-9);
        self.bar.set_message(format!(
            "{events} events  {:.1}M events/s",
            events as f64 / seconds / 1e6
        ));
    }

    /// Clears the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
