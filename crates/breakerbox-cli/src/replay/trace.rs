//! Reading traces: CSV (`timestamp,status,latency_ms[,error_code]`, header optional) or
//! JSON Lines (`{"timestamp":..,"status":..,"latency_ms":..,"error_code":..}`), one call
//! attempt per line. Status 0, empty or null means no response (a transport failure).

mod json;

use std::borrow::Cow;
use std::io::BufRead;

use super::time::{parse_decimal, parse_timestamp, TimeUnit};

/// One call attempt of a trace.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceEvent<'a> {
    /// When the call started, in nanoseconds since the trace's time origin.
    pub timestamp: i128,
    /// The response status; 0 for no response.
    pub status: u16,
    /// How long the call took, in nanoseconds.
    pub latency: u64,
    /// The business error code in the response, if any.
    pub error_code: Option<Cow<'a, str>>,
}

/// The format of a trace, told by its first non-blank line.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Format {
    Csv(Columns),
    Json,
}

/// Where each field is in a CSV line.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Columns {
    timestamp: usize,
    status: usize,
    latency: usize,
    error_code: Option<usize>,
}

const DEFAULT_COLUMNS: Columns = Columns {
    timestamp: 0,
    status: 1,
    latency: 2,
    error_code: Some(3),
};

/// A line that could not be read, with its 1-based line number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Malformed {
    /// The line's number, from 1.
    pub line: u64,
    /// What is wrong with it.
    pub message: String,
}

/// Reads a trace line by line.
pub struct TraceReader<R> {
    input: R,
    unit: TimeUnit,
    format: Option<Format>,
    buf: Vec<u8>,
    line: u64,
    bytes_read: u64,
}

/// What [`TraceReader::next_event`] found.
pub enum Next<'a> {
    /// A call attempt.
    Event(TraceEvent<'a>),
    /// A line that could not be read.
    Malformed(Malformed),
    /// The end of the trace.
    End,
}

impl<R: BufRead> TraceReader<R> {
    /// A reader of `input` whose numeric timestamps are in `unit`.
    pub fn new(input: R, unit: TimeUnit) -> TraceReader<R> {
        TraceReader {
            input,
            unit,
            format: None,
            buf: Vec::with_capacity(256),
            line: 0,
            bytes_read: 0,
        }
    }

    /// Bytes consumed so far (for progress).
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// The next event, malformed line or the end; an I/O error ends the trace with an error.
    pub fn next_event(&mut self) -> std::io::Result<Next<'_>> {
        loop {
            self.buf.clear();
            let n = self.input.read_until(b'\n', &mut self.buf)?;
            if n == 0 {
                return Ok(Next::End);
            }
            self.bytes_read += n as u64;
            self.line += 1;
            let mut end = self.buf.len();
            while end > 0 && matches!(self.buf[end - 1], b'\n' | b'\r') {
                end -= 1;
            }
            let mut start = 0;
            if self.line == 1 && self.buf.starts_with(b"\xEF\xBB\xBF") {
                start = 3;
            }
            let text = trim(&self.buf[start..end]);
            if text.is_empty() || text.starts_with(b"#") {
                continue;
            }
            let format = match self.format {
                Some(format) => format,
                None => {
                    let format = detect(text);
                    self.format = Some(format);
                    if format != Format::Json && is_header(text) {
                        match header_columns(text) {
                            Ok(columns) => self.format = Some(Format::Csv(columns)),
                            Err(message) => {
                                return Ok(Next::Malformed(Malformed {
                                    line: self.line,
                                    message,
                                }))
                            }
                        }
                        continue;
                    }
                    format
                }
            };
            let line = self.line;
            let unit = self.unit;
            let text = trim(&self.buf[start..end]);
            let parsed = match format {
                Format::Csv(columns) => parse_csv(text, columns, unit),
                Format::Json => json::parse_json(text, unit),
            };
            return Ok(match parsed {
                Ok(event) => Next::Event(event),
                Err(message) => Next::Malformed(Malformed { line, message }),
            });
        }
    }
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if first.is_ascii_whitespace() {
            s = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = s {
        if last.is_ascii_whitespace() {
            s = rest;
        } else {
            break;
        }
    }
    s
}

fn detect(first: &[u8]) -> Format {
    if first.starts_with(b"{") {
        Format::Json
    } else {
        Format::Csv(DEFAULT_COLUMNS)
    }
}

fn is_header(line: &[u8]) -> bool {
    line.first()
        .is_some_and(|b| b.is_ascii_alphabetic() || *b == b'"')
}

fn header_columns(line: &[u8]) -> Result<Columns, String> {
    let mut timestamp = None;
    let mut status = None;
    let mut latency = None;
    let mut error_code = None;
    for (i, name) in line.split(|b| *b == b',').enumerate() {
        let name = unquote(trim(name)).to_ascii_lowercase();
        match &name[..] {
            b"timestamp" => timestamp = Some(i),
            b"status" => status = Some(i),
            b"latency_ms" => latency = Some(i),
            b"error_code" => error_code = Some(i),
            _ => {}
        }
    }
    let missing = |what: &str| {
        format!("header has no `{what}` column (expected timestamp,status,latency_ms[,error_code])")
    };
    Ok(Columns {
        timestamp: timestamp.ok_or_else(|| missing("timestamp"))?,
        status: status.ok_or_else(|| missing("status"))?,
        latency: latency.ok_or_else(|| missing("latency_ms"))?,
        error_code,
    })
}

fn unquote(s: &[u8]) -> &[u8] {
    match s {
        [b'"', inner @ .., b'"'] => inner,
        _ => s,
    }
}

fn parse_csv(line: &[u8], columns: Columns, unit: TimeUnit) -> Result<TraceEvent<'_>, String> {
    let mut fields: [&[u8]; 8] = [b""; 8];
    let mut count = 0;
    for field in line.split(|b| *b == b',') {
        if count < fields.len() {
            fields[count] = unquote(trim(field));
        }
        count += 1;
    }
    let get = |i: usize, name: &str| -> Result<&[u8], String> {
        if i < count.min(fields.len()) {
            Ok(fields[i])
        } else {
            Err(format!("missing field `{name}` (found {count} fields)"))
        }
    };
    let ts = get(columns.timestamp, "timestamp")?;
    let timestamp = parse_timestamp(ts, unit)
        .ok_or_else(|| format!("invalid timestamp \"{}\"", String::from_utf8_lossy(ts)))?;
    let status = parse_status(get(columns.status, "status")?)?;
    let latency = parse_latency(get(columns.latency, "latency_ms")?)?;
    let error_code = match columns.error_code {
        Some(i) if i < count.min(fields.len()) && !fields[i].is_empty() => Some(
            std::str::from_utf8(fields[i])
                .map(Cow::Borrowed)
                .map_err(|_| "error_code is not UTF-8".to_owned())?,
        ),
        _ => None,
    };
    Ok(TraceEvent {
        timestamp,
        status,
        latency,
        error_code,
    })
}

fn parse_status(text: &[u8]) -> Result<u16, String> {
    if text.is_empty() {
        return Ok(0);
    }
    let mut v: u32 = 0;
    for &b in text {
        if !b.is_ascii_digit() || v > 1000 {
            return Err(format!(
                "invalid status \"{}\"",
                String::from_utf8_lossy(text)
            ));
        }
        v = v * 10 + u32::from(b - b'0');
    }
    check_status(v)
}

fn check_status(v: u32) -> Result<u16, String> {
    match v {
        0 => Ok(0),
        100..=999 => Ok(v as u16),
        _ => Err(format!(
            "invalid status {v} (expected 100..=999, or 0 for no response)"
        )),
    }
}

fn parse_latency(text: &[u8]) -> Result<u64, String> {
    if text.is_empty() {
        return Ok(0);
    }
    match parse_decimal(text, 1_000_000) {
        Some(n) if n >= 0 => u64::try_from(n).map_err(|_| "latency_ms too large".to_owned()),
        _ => Err(format!(
            "invalid latency_ms \"{}\"",
            String::from_utf8_lossy(text)
        )),
    }
}

#[cfg(test)]
mod tests;
