//! Trace timestamps: milliseconds or seconds since any origin (decimals allowed), or
//! RFC 3339 (`2024-05-01T12:00:00.250Z`, `+02:00` offsets).

/// How numeric timestamps are read.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TimeUnit {
    /// Milliseconds (`1714564800250` or `12.5`).
    Ms,
    /// Seconds, with an optional fraction (`1714564800.25`).
    S,
}

impl TimeUnit {
    fn scale(self) -> i128 {
        match self {
            TimeUnit::Ms => 1_000_000,
            TimeUnit::S => 1_000_000_000,
        }
    }
}

/// Parses a timestamp into nanoseconds since its origin (the Unix epoch for RFC 3339).
pub fn parse_timestamp(text: &[u8], unit: TimeUnit) -> Option<i128> {
    if text.len() >= 10 && text[4] == b'-' {
        return parse_rfc3339(text);
    }
    parse_decimal(text, unit.scale())
}

/// `[-]digits[.digits]` times `scale` nanoseconds, truncated below a nanosecond.
pub fn parse_decimal(text: &[u8], scale: i128) -> Option<i128> {
    let (negative, text) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    if text.is_empty() {
        return None;
    }
    let mut whole: i128 = 0;
    let mut i = 0;
    while i < text.len() && text[i].is_ascii_digit() {
        whole = whole
            .checked_mul(10)?
            .checked_add(i128::from(text[i] - b'0'))?;
        i += 1;
    }
    let mut nanos = whole.checked_mul(scale)?;
    if i < text.len() {
        if text[i] != b'.' || (i == 0 && text.len() == 1) {
            return None;
        }
        let mut unit = scale;
        for &b in &text[i + 1..] {
            if !b.is_ascii_digit() {
                return None;
            }
            unit /= 10;
            nanos += i128::from(b - b'0') * unit;
        }
    }
    Some(if negative { -nanos } else { nanos })
}

fn digits(text: &[u8], from: usize, len: usize) -> Option<i128> {
    let part = text.get(from..from + len)?;
    let mut v: i128 = 0;
    for &b in part {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v * 10 + i128::from(b - b'0');
    }
    Some(v)
}

/// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` (a space may replace the `T`).
fn parse_rfc3339(text: &[u8]) -> Option<i128> {
    let year = digits(text, 0, 4)?;
    let month = digits(text, 5, 2)?;
    let day = digits(text, 8, 2)?;
    if text.get(7) != Some(&b'-') || !matches!(text.get(10), Some(b'T' | b't' | b' ')) {
        return None;
    }
    let hour = digits(text, 11, 2)?;
    let minute = digits(text, 14, 2)?;
    let second = digits(text, 17, 2)?;
    if text.get(13) != Some(&b':') || text.get(16) != Some(&b':') {
        return None;
    }
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    if second > 60 {
        return None;
    }
    let mut i = 19;
    let mut fraction: i128 = 0;
    if text.get(i) == Some(&b'.') {
        i += 1;
        let mut unit: i128 = 1_000_000_000;
        let start = i;
        while let Some(b) = text.get(i).filter(|b| b.is_ascii_digit()) {
            unit /= 10;
            fraction += i128::from(b - b'0') * unit;
            i += 1;
        }
        if i == start {
            return None;
        }
    }
    let offset_minutes = match text.get(i..)? {
        b"Z" | b"z" => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let h = digits(&[*h1, *h2], 0, 2)?;
            let m = digits(&[*m1, *m2], 0, 2)?;
            let v = h * 60 + m;
            if *sign == b'-' {
                -v
            } else {
                v
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Some(secs * 1_000_000_000 + fraction)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i128, m: i128, d: i128) -> i128 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milliseconds_and_seconds_read_with_fractions() {
        assert_eq!(parse_timestamp(b"1500", TimeUnit::Ms), Some(1_500_000_000));
        assert_eq!(parse_timestamp(b"1.25", TimeUnit::Ms), Some(1_250_000));
        assert_eq!(parse_timestamp(b"1.25", TimeUnit::S), Some(1_250_000_000));
        assert_eq!(parse_timestamp(b".5", TimeUnit::S), Some(500_000_000));
        for bad in [&b""[..], b".", b"1x", b"1.2.3", b"-"] {
            assert_eq!(parse_timestamp(bad, TimeUnit::Ms), None, "{bad:?}");
        }
    }

    #[test]
    fn rfc3339_reads_as_nanoseconds_since_the_epoch() {
        assert_eq!(
            parse_timestamp(b"1970-01-01T00:00:01.5Z", TimeUnit::Ms),
            Some(1_500_000_000)
        );
        assert_eq!(
            parse_timestamp(b"2024-05-01T12:00:00Z", TimeUnit::Ms),
            Some(1_714_564_800 * 1_000_000_000)
        );
        assert_eq!(
            parse_timestamp(b"2024-05-01T14:00:00+02:00", TimeUnit::Ms),
            Some(1_714_564_800 * 1_000_000_000)
        );
        assert_eq!(parse_timestamp(b"2024-05-01T12:00:00", TimeUnit::Ms), None);
        assert_eq!(parse_timestamp(b"2024-13-01T12:00:00Z", TimeUnit::Ms), None);
    }
}
