//! What went wrong in an exchange on an HTTP/1.1 connection of the inline client.

use breakerbox_http::TransportError;

/// Why an exchange got no (usable) response.
#[derive(Debug)]
pub enum H1Error {
    /// The connection failed (reset, broken pipe...).
    Io(std::io::Error),
    /// The upstream closed the connection before a whole response head.
    Closed,
    /// The response was not valid HTTP/1.1 (what was wrong).
    Malformed(&'static str),
}

impl H1Error {
    /// How the judge sees it.
    pub fn transport(&self) -> TransportError {
        match self {
            H1Error::Io(e) => match TransportError::from_io_kind(e.kind()) {
                TransportError::Other => TransportError::classify(e),
                kind => kind,
            },
            H1Error::Closed => TransportError::NoResponse,
            H1Error::Malformed(_) => TransportError::Other,
        }
    }
}

impl std::fmt::Display for H1Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            H1Error::Io(e) => write!(f, "connection error: {e}"),
            H1Error::Closed => f.write_str("connection closed before a complete response head"),
            H1Error::Malformed(what) => write!(f, "invalid response: {what}"),
        }
    }
}

impl std::error::Error for H1Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            H1Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// A failed exchange, with what it had done: a reused connection's failure is retried
/// when nothing was written, or when nothing came back for a request that may be sent
/// twice.
#[derive(Debug)]
pub struct Failure {
    /// The error.
    pub error: H1Error,
    /// Whether any byte of the request was written.
    pub wrote: bool,
    /// Whether any byte of a response came back.
    pub answered: bool,
}
