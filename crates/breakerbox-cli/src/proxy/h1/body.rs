//! A response body read by the inline client, frame by frame as the client asks for
//! it: `Content-Length` bytes, chunks (trailers included), or all up to the close. The
//! connection goes back to its pool at the body's end when it may carry another
//! request; a body dropped before its end closes it.

use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};

use super::super::body::BoxError;
use super::super::pool::Home;
use super::conn::Conn;
use super::head::{Framing, ResponseHead};

/// The longest chunk-size line (with extensions) and trailer section accepted.
const MAX_LINE: usize = 4096;

/// How much of the body is left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Left {
    /// This many bytes.
    Bytes(u64),
    /// A chunk-size line.
    ChunkSize,
    /// This many bytes of the current chunk, then its CRLF.
    Chunk(u64),
    /// The CRLF after a chunk.
    ChunkEnd,
    /// The trailer section after the last chunk.
    Trailers,
    /// Everything up to the close.
    ToClose,
    /// Nothing: the body ended.
    Done,
}

/// The body of a response read by the inline client.
pub struct InlineBody {
    conn: Option<Conn>,
    left: Left,
    keep_alive: bool,
    home: Option<Home>,
}

/// A body that broke: cut short or malformed.
#[derive(Debug)]
struct Broken(&'static str);

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for Broken {}

impl InlineBody {
    /// The body framed by `head` on `conn`, which goes `home` at its end. An empty body
    /// ends (and gives the connection back) at once.
    pub fn new(conn: Conn, head: ResponseHead, home: Home) -> InlineBody {
        let left = match head.framing {
            Framing::Empty | Framing::Length(0) => Left::Done,
            Framing::Length(n) => Left::Bytes(n),
            Framing::Chunked => Left::ChunkSize,
            Framing::Close => Left::ToClose,
        };
        let mut body = InlineBody {
            conn: Some(conn),
            left,
            keep_alive: head.keep_alive && head.framing != Framing::Close,
            home: Some(home),
        };
        if left == Left::Done {
            body.finish();
        }
        body
    }

    /// The body ended: the connection goes back when it may carry another request (kept
    /// alive, and no byte beyond the body arrived).
    fn finish(&mut self) {
        self.left = Left::Done;
        if let (Some(conn), Some(home)) = (self.conn.take(), self.home.take()) {
            if self.keep_alive && conn.buf.is_empty() {
                home.put(conn);
            }
        }
    }

    fn broken(&mut self, why: &'static str) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.left = Left::Done;
        self.conn = None;
        Poll::Ready(Some(Err(Box::new(Broken(why)))))
    }

    /// Reads more; `Ok(false)` at the end of the stream.
    fn poll_more(&mut self, cx: &mut Context<'_>) -> Poll<Result<bool, &'static str>> {
        let Some(conn) = self.conn.as_mut() else {
            return Poll::Ready(Ok(false));
        };
        match ready!(conn.poll_fill(cx)) {
            Ok(0) => Poll::Ready(Ok(false)),
            Ok(_) => Poll::Ready(Ok(true)),
            Err(_) => Poll::Ready(Err("body read failed")),
        }
    }

    /// Up to `max` bytes already read.
    fn take(&mut self, max: u64) -> Option<Bytes> {
        let conn = self.conn.as_mut()?;
        if conn.buf.is_empty() {
            return None;
        }
        let n = usize::try_from(max)
            .unwrap_or(usize::MAX)
            .min(conn.buf.len());
        Some(conn.buf.split_to(n).freeze())
    }

    /// A complete line (without its CRLF) at the start of the buffer, if one is there.
    fn line(&mut self) -> Result<Option<Bytes>, &'static str> {
        let Some(conn) = self.conn.as_mut() else {
            return Ok(None);
        };
        match conn.buf.windows(2).position(|w| w == b"\r\n") {
            Some(at) => {
                let line = conn.buf.split_to(at + 2).freeze();
                Ok(Some(line.slice(..at)))
            }
            None if conn.buf.len() > MAX_LINE => Err("chunk line too long"),
            None => Ok(None),
        }
    }

    /// The trailer section, when it has all arrived: `Some(None)` when it is empty.
    fn trailers(&mut self) -> Result<Option<Option<HeaderMap>>, &'static str> {
        let Some(conn) = self.conn.as_mut() else {
            return Ok(None);
        };
        if conn.buf.starts_with(b"\r\n") {
            let _ = conn.buf.split_to(2);
            return Ok(Some(None));
        }
        let mut storage = [httparse::EMPTY_HEADER; 64];
        match httparse::parse_headers(&conn.buf, &mut storage) {
            Ok(httparse::Status::Complete((len, fields))) => {
                let mut map = HeaderMap::with_capacity(fields.len());
                for field in fields.iter() {
                    let name = http::HeaderName::from_bytes(field.name.as_bytes())
                        .map_err(|_| "invalid trailer name")?;
                    let value = http::HeaderValue::from_bytes(field.value)
                        .map_err(|_| "invalid trailer value")?;
                    map.append(name, value);
                }
                let _ = conn.buf.split_to(len);
                Ok(Some(Some(map)))
            }
            Ok(httparse::Status::Partial) if conn.buf.len() > MAX_LINE * 4 => {
                Err("trailers too long")
            }
            Ok(httparse::Status::Partial) => Ok(None),
            Err(_) => Err("malformed trailers"),
        }
    }
}

/// The size of a chunk from its size line (extensions ignored).
fn chunk_size(line: &[u8]) -> Result<u64, &'static str> {
    let digits = line.split(|&b| b == b';').next().unwrap_or_default();
    let digits = std::str::from_utf8(digits)
        .map_err(|_| "invalid chunk size")?
        .trim_matches(|c| c == ' ' || c == '\t');
    if digits.is_empty() || digits.len() > 16 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("invalid chunk size");
    }
    u64::from_str_radix(digits, 16).map_err(|_| "invalid chunk size")
}

impl Body for InlineBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        loop {
            match this.left {
                Left::Done => return Poll::Ready(None),
                Left::Bytes(n) | Left::Chunk(n) => {
                    if let Some(data) = this.take(n) {
                        let rest = n - data.len() as u64;
                        this.left = match (this.left, rest) {
                            (Left::Bytes(_), 0) => {
                                this.finish();
                                Left::Done
                            }
                            (Left::Bytes(_), rest) => Left::Bytes(rest),
                            (_, 0) => Left::ChunkEnd,
                            (_, rest) => Left::Chunk(rest),
                        };
                        return Poll::Ready(Some(Ok(Frame::data(data))));
                    }
                }
                Left::ToClose => {
                    if let Some(data) = this.take(u64::MAX) {
                        return Poll::Ready(Some(Ok(Frame::data(data))));
                    }
                }
                Left::ChunkSize => match this.line() {
                    Err(why) => return this.broken(why),
                    Ok(Some(line)) => {
                        this.left = match chunk_size(&line) {
                            Err(why) => return this.broken(why),
                            Ok(0) => Left::Trailers,
                            Ok(n) => Left::Chunk(n),
                        };
                        continue;
                    }
                    Ok(None) => {}
                },
                Left::ChunkEnd => {
                    let buffered = this.conn.as_ref().map_or(0, |c| c.buf.len());
                    if buffered >= 2 {
                        match this.line() {
                            Ok(Some(line)) if line.is_empty() => {
                                this.left = Left::ChunkSize;
                                continue;
                            }
                            _ => return this.broken("chunk without its CRLF"),
                        }
                    }
                }
                Left::Trailers => match this.trailers() {
                    Err(why) => return this.broken(why),
                    Ok(Some(trailers)) => {
                        this.finish();
                        return Poll::Ready(trailers.map(|t| Ok(Frame::trailers(t))));
                    }
                    Ok(None) => {}
                },
            }
            // Nothing usable buffered: read more.
            match ready!(this.poll_more(cx)) {
                Ok(true) => {}
                Ok(false) if this.left == Left::ToClose => {
                    this.left = Left::Done;
                    this.conn = None;
                    return Poll::Ready(None);
                }
                Ok(false) => return this.broken("body truncated"),
                Err(why) => return this.broken(why),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.left == Left::Done
    }

    fn size_hint(&self) -> SizeHint {
        match self.left {
            Left::Done => SizeHint::with_exact(0),
            Left::Bytes(n) => SizeHint::with_exact(n),
            _ => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::chunk_size;

    #[test]
    fn chunk_sizes_are_hex_with_extensions_ignored() {
        assert_eq!(chunk_size(b"1a"), Ok(26));
        assert_eq!(chunk_size(b"0"), Ok(0));
        assert_eq!(chunk_size(b"FF;name=value"), Ok(255));
        assert!(chunk_size(b"").is_err());
        assert!(chunk_size(b"-1").is_err());
        assert!(chunk_size(b"0x10").is_err());
        assert!(chunk_size(b"11111111111111111").is_err());
    }
}
