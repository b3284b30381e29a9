//! Classifying errors that came instead of a response.

use std::error::Error as StdError;

use breakerbox_http::TransportError;

/// The kind of transport failure behind a request error: a timeout (the client's or a
/// connect timeout), a connect failure, a reset, a connection closed before any response,
/// or anything else.
///
/// It is [`TransportError::classify_with`] over the error's whole source chain, knowing
/// reqwest's own `is_timeout` and `is_connect`; the rest (hyper's incomplete messages,
/// `io::Error` kinds) is the classification every adapter shares.
pub fn transport_error(error: &reqwest_middleware::Error) -> TransportError {
    match error {
        reqwest_middleware::Error::Reqwest(e) => TransportError::classify_with(e, recognise),
        reqwest_middleware::Error::Middleware(inner) => {
            TransportError::classify_with(inner.as_ref(), recognise)
        }
    }
}

/// What a `reqwest::Error` says of the transport that its source chain may not.
fn recognise(error: &(dyn StdError + 'static)) -> Option<TransportError> {
    let error = error.downcast_ref::<reqwest::Error>()?;
    if error.is_timeout() {
        Some(TransportError::Timeout)
    } else if error.is_connect() {
        Some(TransportError::Connect)
    } else {
        None
    }
}
