//! Classifying errors that came instead of a response.

use std::error::Error as StdError;
use std::io;

use breakerbox_http::TransportError;

/// The kind of transport failure behind a request error: a timeout (the client's or a
/// connect timeout), a connect failure, a reset, a connection closed before any response,
/// or anything else.
pub fn transport_error(error: &reqwest_middleware::Error) -> TransportError {
    match error {
        reqwest_middleware::Error::Reqwest(e) => classify(e),
        reqwest_middleware::Error::Middleware(inner) => inner
            .chain()
            .find_map(|cause| cause.downcast_ref::<reqwest::Error>())
            .map_or(TransportError::Other, classify),
    }
}

fn classify(error: &reqwest::Error) -> TransportError {
    if error.is_timeout() {
        return TransportError::Timeout;
    }
    if error.is_connect() {
        return TransportError::Connect;
    }
    let mut cause: Option<&(dyn StdError + 'static)> = error.source();
    while let Some(current) = cause {
        if let Some(io) = current.downcast_ref::<io::Error>() {
            match io.kind() {
                io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::BrokenPipe => return TransportError::Reset,
                io::ErrorKind::TimedOut => return TransportError::Timeout,
                _ => {}
            }
        }
        if let Some(hyper) = current.downcast_ref::<hyper::Error>() {
            if hyper.is_incomplete_message() {
                return TransportError::NoResponse;
            }
            if hyper.is_timeout() {
                return TransportError::Timeout;
            }
        }
        cause = current.source();
    }
    TransportError::Other
}
