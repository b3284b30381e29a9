//! Text from files, traces and Redis, made safe to print on a terminal: control characters
//! (escape sequences among them) are shown escaped instead of acting on the terminal.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` with every control character (C0, DEL, C1) written as `\x1b` or `\u{9b}`.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !c.is_control() {
            out.push(c);
        } else if (c as u32) < 0x80 {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(printable("plain é ✓"), "plain é ✓");
        assert_eq!(printable("\u{1b}[2Jx\u{7}"), "\\x1b[2Jx\\x07");
        assert_eq!(printable("a\nb\tc"), "a\\x0ab\\x09c");
        assert_eq!(printable("\u{9b}31m"), "\\u{9b}31m");
    }
}
