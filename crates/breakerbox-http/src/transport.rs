//! Why no usable response arrived, and how to tell from an error chain.

use std::error::Error;
use std::fmt;
use std::io;

/// Why no usable response arrived. Every kind is judged [`Verdict::Failure`]: the
/// dependency (or the path to it) did not do its job.
///
/// It is an error in its own right (`Display` is its [reason](TransportError::reason)), so
/// a service can fail with it and be judged by its kind; adapters find it in an error's
/// source chain with [`TransportError::classify`].
///
/// ```
/// use breakerbox_http::TransportError;
/// use std::io;
///
/// let refused = io::Error::new(io::ErrorKind::ConnectionRefused, "refused");
/// assert_eq!(TransportError::classify(&refused), TransportError::Connect);
/// assert_eq!(TransportError::Timeout.to_string(), "timeout");
/// let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(TransportError::Reset);
/// assert_eq!(TransportError::classify(&*boxed), TransportError::Reset);
/// ```
///
/// [`Verdict::Failure`]: breakerbox::Verdict::Failure
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransportError {
    /// The connection could not be made (refused, unreachable, DNS failure).
    Connect,
    /// The connection was reset or closed while the request was in flight.
    Reset,
    /// The request took longer than the client allowed.
    Timeout,
    /// The server closed the connection without sending a (complete) response.
    NoResponse,
    /// Any other transport failure (protocol error, broken body...).
    Other,
}

impl TransportError {
    /// The reason given in the [`Judgement`](crate::Judgement) of an exchange that got no
    /// response head.
    pub const fn reason(self) -> &'static str {
        match self {
            TransportError::Connect => "transport: connect failed",
            TransportError::Reset => "transport: connection reset",
            TransportError::Timeout => "timeout",
            TransportError::NoResponse => "transport: no response",
            TransportError::Other => "transport: error",
        }
    }

    /// The reason given when the body failed after its head
    /// ([`Exchange::on_body_error`](crate::Exchange::on_body_error)): `timeout: body read`
    /// for a timeout, `transport: body read failed` for every other kind.
    pub const fn body_reason(self) -> &'static str {
        match self {
            TransportError::Timeout => "timeout: body read",
            _ => "transport: body read failed",
        }
    }

    /// The kind of an I/O error: refused or unreachable is [`Connect`], reset, aborted or
    /// a broken pipe is [`Reset`], an unexpected end of stream is [`NoResponse`], timed
    /// out is [`Timeout`]; anything else is [`Other`].
    ///
    /// [`Connect`]: TransportError::Connect
    /// [`Reset`]: TransportError::Reset
    /// [`NoResponse`]: TransportError::NoResponse
    /// [`Timeout`]: TransportError::Timeout
    /// [`Other`]: TransportError::Other
    pub fn from_io_kind(kind: io::ErrorKind) -> TransportError {
        match kind {
            io::ErrorKind::ConnectionRefused
            | io::ErrorKind::NotConnected
            | io::ErrorKind::AddrNotAvailable
            | io::ErrorKind::HostUnreachable
            | io::ErrorKind::NetworkUnreachable => TransportError::Connect,
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => TransportError::Reset,
            io::ErrorKind::UnexpectedEof => TransportError::NoResponse,
            io::ErrorKind::TimedOut => TransportError::Timeout,
            _ => TransportError::Other,
        }
    }

    /// The kind of `error`, from the first link of its source chain that says: a
    /// `TransportError` itself, a [`breakerbox::DeadlineElapsed`] (a call cancelled at its
    /// deadline: [`TransportError::Timeout`]), a `hyper::Error` (with the `hyper` feature: an incomplete
    /// message or a closed connection is [`TransportError::NoResponse`], a timeout is
    /// [`TransportError::Timeout`]), or an [`io::Error`]
    /// ([`TransportError::from_io_kind`]); [`TransportError::Other`] when none does.
    pub fn classify(error: &(dyn Error + 'static)) -> TransportError {
        TransportError::classify_with(error, |_| None)
    }

    /// Like [`TransportError::classify`], asking `recognise` first at every link of the
    /// chain: adapters pass what they know of their client's error types (reqwest's
    /// `is_timeout`, hyper's incomplete message) without this crate depending on them.
    pub fn classify_with(
        error: &(dyn Error + 'static),
        recognise: impl Fn(&(dyn Error + 'static)) -> Option<TransportError>,
    ) -> TransportError {
        let mut next = Some(error);
        while let Some(link) = next {
            if let Some(kind) = recognise(link) {
                return kind;
            }
            if let Some(kind) = link.downcast_ref::<TransportError>() {
                return *kind;
            }
            // Rule 22: a call an inner breaker cancelled at its deadline.
            if link.downcast_ref::<breakerbox::DeadlineElapsed>().is_some() {
                return TransportError::Timeout;
            }
            #[cfg(feature = "hyper")]
            if let Some(kind) = link.downcast_ref::<hyper::Error>().and_then(hyper_kind) {
                return kind;
            }
            if let Some(io) = link.downcast_ref::<io::Error>() {
                let kind = TransportError::from_io_kind(io.kind());
                if kind != TransportError::Other {
                    return kind;
                }
                // An `io::Error` wrapping another error hides it from `source()`.
                if let Some(inner) = io.get_ref() {
                    next = Some(inner);
                    continue;
                }
            }
            next = link.source();
        }
        TransportError::Other
    }
}

/// What a hyper error says of the transport, when it says something its source chain
/// does not (hyper's own states carry no `io::Error`).
#[cfg(feature = "hyper")]
fn hyper_kind(error: &hyper::Error) -> Option<TransportError> {
    if error.is_incomplete_message() || error.is_closed() {
        Some(TransportError::NoResponse)
    } else if error.is_timeout() {
        Some(TransportError::Timeout)
    } else {
        None
    }
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}

impl Error for TransportError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Wrapper(io::Error);

    impl fmt::Display for Wrapper {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("client error")
        }
    }

    impl Error for Wrapper {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn the_kind_is_read_from_the_io_error_in_the_source_chain() {
        let refused = Wrapper(io::Error::from(io::ErrorKind::ConnectionRefused));
        assert_eq!(TransportError::classify(&refused), TransportError::Connect);
        let reset = Wrapper(io::Error::from(io::ErrorKind::ConnectionReset));
        assert_eq!(TransportError::classify(&reset), TransportError::Reset);
        let eof = Wrapper(io::Error::from(io::ErrorKind::UnexpectedEof));
        assert_eq!(TransportError::classify(&eof), TransportError::NoResponse);
        let timeout = io::Error::from(io::ErrorKind::TimedOut);
        assert_eq!(TransportError::classify(&timeout), TransportError::Timeout);
        assert_eq!(
            TransportError::classify(&std::fmt::Error),
            TransportError::Other
        );
    }

    #[test]
    fn a_call_cancelled_at_its_deadline_is_a_timeout() {
        let elapsed = breakerbox::DeadlineElapsed::new(std::time::Duration::from_secs(1), true);
        assert_eq!(TransportError::classify(&elapsed), TransportError::Timeout);
        let wrapped = io::Error::other(elapsed);
        assert_eq!(TransportError::classify(&wrapped), TransportError::Timeout);
    }

    #[test]
    fn a_transport_error_in_the_chain_is_its_own_kind() {
        let wrapped = io::Error::other(TransportError::Timeout);
        assert_eq!(TransportError::classify(&wrapped), TransportError::Timeout);
    }

    #[test]
    fn the_recogniser_is_asked_first() {
        let reset = Wrapper(io::Error::from(io::ErrorKind::ConnectionReset));
        let kind = TransportError::classify_with(&reset, |link| {
            link.downcast_ref::<Wrapper>()
                .map(|_| TransportError::NoResponse)
        });
        assert_eq!(kind, TransportError::NoResponse);
    }
}
