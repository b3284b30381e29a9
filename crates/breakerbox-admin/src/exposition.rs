//! `/metrics` when no renderer is given: the phase of every breaker as the gauge
//! `breakerbox_state` (the name and labels of the core's `metrics` feature), in the
//! Prometheus text format 0.0.4.

use std::fmt::Write as _;

use breakerbox::contract::Breaker;
use breakerbox::Phase;

use crate::source::Listed;

/// The exposition of `listed`: for each breaker, 1 for the phase this process sees it in
/// (without I/O, as the core's own gauge) and 0 for the others.
pub(crate) fn states(listed: &[Listed]) -> String {
    let mut out = String::with_capacity(128 + listed.len() * 5 * 64);
    out.push_str(
        "# HELP breakerbox_state 1 for the phase each breaker is in, 0 for the others.\n\
         # TYPE breakerbox_state gauge\n",
    );
    for listed in listed {
        let phase = listed.breaker().phase();
        let name = escape_label(listed.name());
        for p in Phase::ALL {
            // Writing to a String cannot fail.
            let _ = writeln!(
                out,
                "breakerbox_state{{breaker=\"{name}\",phase=\"{}\"}} {}",
                p.as_str(),
                u8::from(p == phase)
            );
        }
    }
    out
}

/// A label value with `\`, `"` and line feeds escaped, as the text format requires.
fn escape_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
