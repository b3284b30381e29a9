//! Reading a response head: parsed with `httparse`, 1xx interim answers skipped, and the
//! body's framing decided (RFC 9112 §6.3).

use std::mem::MaybeUninit;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::response::Parts;
use http::{Response, StatusCode, Version};

use super::conn::Conn;
use super::error::{Failure, H1Error};

/// The most header fields a response head may have.
const MAX_HEADERS: usize = 128;

/// The most bytes a response head may take.
const MAX_HEAD_BYTES: usize = 128 * 1024;

/// How a response's body is delimited, and whether the connection outlives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseHead {
    /// How the body ends.
    pub framing: Framing,
    /// Whether the connection may carry another request after the body.
    pub keep_alive: bool,
}

/// How a response body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body (`HEAD`, 204, 304).
    Empty,
    /// `Content-Length` bytes.
    Length(u64),
    /// Chunked transfer coding.
    Chunked,
    /// Up to the close of the connection.
    Close,
}

/// Reads the final response head from `conn` (skipping 1xx interim answers). The bytes
/// after it stay in the connection's buffer for the body.
pub(super) async fn read(conn: &mut Conn, is_head: bool) -> Result<(Parts, ResponseHead), Failure> {
    let mut answered = false;
    loop {
        if !conn.buf.is_empty() {
            answered = true;
            match parse(&conn.buf) {
                Err(what) => return Err(failure(H1Error::Malformed(what), answered)),
                Ok(Parsed::Partial) if conn.buf.len() > MAX_HEAD_BYTES => {
                    return Err(failure(
                        H1Error::Malformed("response head too large"),
                        answered,
                    ))
                }
                Ok(Parsed::Partial) => {}
                Ok(Parsed::Interim(len)) => {
                    let _ = conn.buf.split_to(len);
                    continue;
                }
                Ok(Parsed::Final { len, fields }) => {
                    let bytes = conn.buf.split_to(len).freeze();
                    return build(&bytes, fields, is_head)
                        .map_err(|what| failure(H1Error::Malformed(what), answered));
                }
            }
        }
        match conn.fill().await {
            Ok(0) => return Err(failure(H1Error::Closed, answered)),
            Ok(_) => {}
            Err(e) => return Err(failure(H1Error::Io(e), answered)),
        }
    }
}

fn failure(error: H1Error, answered: bool) -> Failure {
    Failure {
        error,
        wrote: true,
        answered,
    }
}

/// Where each part of a parsed head lies in its bytes.
struct Fields {
    status: u16,
    minor: u8,
    headers: Vec<(usize, usize, usize, usize)>,
}

enum Parsed {
    Partial,
    /// A 1xx answer (not 101) of this many bytes: skipped.
    Interim(usize),
    Final {
        len: usize,
        fields: Fields,
    },
}

/// Parses a head at the start of `buf`, noting where its fields lie.
fn parse(buf: &[u8]) -> Result<Parsed, &'static str> {
    // Left uninitialised: httparse writes the fields it finds (an initialised array of
    // 128 empty fields cost about 500 instructions a response).
    let mut storage = [MaybeUninit::<httparse::Header<'_>>::uninit(); MAX_HEADERS];
    let mut response = httparse::Response::new(&mut []);
    let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut response,
        buf,
        &mut storage,
    );
    let len = match parsed {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(Parsed::Partial),
        Err(httparse::Error::TooManyHeaders) => return Err("too many header fields"),
        Err(_) => return Err("malformed response head"),
    };
    let status = response.code.ok_or("no status code")?;
    if status == 101 {
        // Never asked for: upgrades go through the other client.
        return Err("unexpected 101 Switching Protocols");
    }
    if (100..200).contains(&status) {
        return Ok(Parsed::Interim(len));
    }
    let base = buf.as_ptr() as usize;
    let offset = |s: &[u8]| s.as_ptr() as usize - base;
    let headers = response
        .headers
        .iter()
        .map(|h| {
            let name = offset(h.name.as_bytes());
            let value = offset(h.value);
            (name, name + h.name.len(), value, value + h.value.len())
        })
        .collect();
    Ok(Parsed::Final {
        len,
        fields: Fields {
            status,
            minor: response.version.unwrap_or(1),
            headers,
        },
    })
}

/// The response's parts, the header values sharing `bytes` (no copy), and its framing.
fn build(
    bytes: &Bytes,
    fields: Fields,
    is_head: bool,
) -> Result<(Parts, ResponseHead), &'static str> {
    let status = StatusCode::from_u16(fields.status).map_err(|_| "invalid status code")?;
    let mut headers = HeaderMap::with_capacity(fields.headers.len());
    for (name_start, name_end, value_start, value_end) in fields.headers {
        let name = HeaderName::from_bytes(&bytes[name_start..name_end])
            .map_err(|_| "invalid header name")?;
        let value = HeaderValue::from_maybe_shared(bytes.slice(value_start..value_end))
            .map_err(|_| "invalid header value")?;
        headers.append(name, value);
    }
    let version = if fields.minor == 0 {
        Version::HTTP_10
    } else {
        Version::HTTP_11
    };
    let head = framing(status, version, &mut headers, is_head)?;
    let mut parts = Response::new(()).into_parts().0;
    parts.status = status;
    parts.version = version;
    parts.headers = headers;
    Ok((parts, head))
}

/// Whether `headers`' `Connection` lists `token`.
fn connection_has(headers: &HeaderMap, token: &str) -> bool {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// RFC 9112 §6.3: how the body ends, and whether the connection outlives it. A
/// `Content-Length` beside a `Transfer-Encoding` is removed (the coding wins, and the
/// connection closes after the body).
fn framing(
    status: StatusCode,
    version: Version,
    headers: &mut HeaderMap,
    is_head: bool,
) -> Result<ResponseHead, &'static str> {
    let mut keep_alive = if version == Version::HTTP_10 {
        connection_has(headers, "keep-alive")
    } else {
        !connection_has(headers, "close")
    };
    if is_head || status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED {
        return Ok(ResponseHead {
            framing: Framing::Empty,
            keep_alive,
        });
    }
    if headers.contains_key(header::TRANSFER_ENCODING) {
        let chunked_last = headers
            .get_all(header::TRANSFER_ENCODING)
            .iter()
            .next_back()
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.rsplit(',').next())
            .is_some_and(|t| t.trim().eq_ignore_ascii_case("chunked"));
        if headers.remove(header::CONTENT_LENGTH).is_some() {
            keep_alive = false;
        }
        if !chunked_last {
            keep_alive = false;
        }
        let framing = if chunked_last {
            Framing::Chunked
        } else {
            Framing::Close
        };
        return Ok(ResponseHead {
            framing,
            keep_alive,
        });
    }
    let mut length: Option<u64> = None;
    for value in headers.get_all(header::CONTENT_LENGTH) {
        for part in value.as_bytes().split(|&b| b == b',') {
            let text = std::str::from_utf8(part).map_err(|_| "invalid content-length")?;
            let text = text.trim();
            if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
                return Err("invalid content-length");
            }
            let n: u64 = text.parse().map_err(|_| "invalid content-length")?;
            if length.is_some_and(|l| l != n) {
                return Err("differing content-length values");
            }
            length = Some(n);
        }
    }
    Ok(match length {
        Some(n) => ResponseHead {
            framing: Framing::Length(n),
            keep_alive,
        },
        None => ResponseHead {
            framing: Framing::Close,
            keep_alive: false,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str, is_head: bool) -> Result<(Parts, ResponseHead), &'static str> {
        let bytes = Bytes::copy_from_slice(text.as_bytes());
        match parse(&bytes)? {
            Parsed::Final { len, fields } => {
                assert_eq!(len, bytes.len());
                build(&bytes, fields, is_head)
            }
            Parsed::Partial => Err("partial"),
            Parsed::Interim(_) => Err("interim"),
        }
    }

    #[test]
    fn content_length_frames_the_body() {
        let (parts, h) = head(
            "HTTP/1.1 200 OK\r\nContent-Length: 12\r\nX-A: b\r\n\r\n",
            false,
        )
        .unwrap();
        assert_eq!(parts.status, StatusCode::OK);
        assert_eq!(parts.headers["x-a"], "b");
        assert_eq!(
            h,
            ResponseHead {
                framing: Framing::Length(12),
                keep_alive: true
            }
        );
    }

    #[test]
    fn head_204_and_304_have_no_body() {
        let (_, h) = head("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", true).unwrap();
        assert_eq!(h.framing, Framing::Empty);
        let (_, h) = head("HTTP/1.1 204 No Content\r\n\r\n", false).unwrap();
        assert_eq!(h.framing, Framing::Empty);
        let (_, h) = head(
            "HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n",
            false,
        )
        .unwrap();
        assert_eq!(h.framing, Framing::Empty);
    }

    #[test]
    fn chunked_wins_over_content_length_and_closes() {
        let (parts, h) = head(
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            false,
        )
        .unwrap();
        assert!(!parts.headers.contains_key(header::CONTENT_LENGTH));
        assert_eq!(
            h,
            ResponseHead {
                framing: Framing::Chunked,
                keep_alive: false
            }
        );
        let (_, h) = head(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            false,
        )
        .unwrap();
        assert_eq!(
            h,
            ResponseHead {
                framing: Framing::Chunked,
                keep_alive: true
            }
        );
        let (_, h) = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", false).unwrap();
        assert_eq!(
            h,
            ResponseHead {
                framing: Framing::Close,
                keep_alive: false
            }
        );
    }

    #[test]
    fn bad_lengths_are_errors() {
        for bad in ["12x", "-1", "", "1 2", "99999999999999999999999"] {
            let text = format!("HTTP/1.1 200 OK\r\nContent-Length: {bad}\r\n\r\n");
            assert!(head(&text, false).is_err(), "{bad}");
        }
        assert!(head(
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
            false
        )
        .is_err());
        let (_, h) = head("HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\n\r\n", false).unwrap();
        assert_eq!(h.framing, Framing::Length(3));
    }

    #[test]
    fn no_length_reads_to_the_close_and_http10_closes() {
        let (_, h) = head("HTTP/1.1 200 OK\r\n\r\n", false).unwrap();
        assert_eq!(
            h,
            ResponseHead {
                framing: Framing::Close,
                keep_alive: false
            }
        );
        let (_, h) = head("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", false).unwrap();
        assert!(!h.keep_alive);
        let (_, h) = head(
            "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n",
            false,
        )
        .unwrap();
        assert!(h.keep_alive);
        let (_, h) = head(
            "HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 1\r\n\r\n",
            false,
        )
        .unwrap();
        assert!(!h.keep_alive);
    }

    #[test]
    fn interim_answers_are_skipped_and_101_refused() {
        let bytes = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n";
        assert!(matches!(parse(bytes), Ok(Parsed::Interim(25))));
        assert!(parse(b"HTTP/1.1 101 Switching Protocols\r\n\r\n").is_err());
        assert!(matches!(
            parse(b"HTTP/1.1 200 OK\r\nA: b\r\n"),
            Ok(Parsed::Partial)
        ));
        assert!(parse(b"HTTP/1.1 2000 OK\r\n\r\n").is_err());
        assert!(parse(b"garbage\r\n\r\n").is_err());
    }
}
