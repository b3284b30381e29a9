//! `protocol` of an `[[upstream]]`: the HTTP version the proxy speaks to it. `"http1"`
//! (the default) or `"http2"`: h2c (prior knowledge) for an `http://` url, ALPN `h2` for
//! an `https://` one. Clients choose their own version (HTTP/1.1, or HTTP/2 by its
//! preface or ALPN) whatever the upstream's.

use toml::{Table, Value};

use super::fields::{join, Errors};

/// The HTTP version spoken to an upstream.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1, a pool of keep-alive connections (the default).
    #[default]
    Http1,
    /// HTTP/2: a few connections per worker thread, each carrying many streams.
    Http2,
}

impl Protocol {
    /// The ALPN protocol names offered to a TLS upstream.
    pub fn alpn(self) -> Vec<Vec<u8>> {
        match self {
            Protocol::Http1 => vec![b"http/1.1".to_vec()],
            Protocol::Http2 => vec![b"h2".to_vec()],
        }
    }
}

/// The upstream's `protocol`, the default when absent or after an error (reported).
pub(super) fn protocol(table: &Table, path: &str, errors: &mut Errors) -> Protocol {
    match table.get("protocol") {
        None => Protocol::Http1,
        Some(Value::String(p)) if p == "http1" => Protocol::Http1,
        Some(Value::String(p)) if p == "http2" => Protocol::Http2,
        Some(other) => {
            errors.push(
                &join(path, "protocol"),
                format_args!("invalid value {other}: expected \"http1\" or \"http2\""),
            );
            Protocol::Http1
        }
    }
}
