//! The HTTP/1.1 client for requests without a body: the request's own task writes the
//! head to a pooled connection, reads the response head and then the body, with no
//! task per connection and no channels between the two (hyper's client, kept for
//! uploads and upgrades, moves each request through a dispatch channel to a connection
//! task and back, about a sixth of the proxy's CPU per request).
//!
//! Framing follows RFC 9112 §6.3: no body for `HEAD`, 1xx, 204 and 304; a chunked final
//! transfer coding; else `Content-Length` (differing or malformed values are an error);
//! else the body runs to the close. A connection goes back to its pool only when its
//! body was read to the end and both sides keep it alive.

mod body;
mod conn;
mod error;
mod head;
mod request;

pub use body::InlineBody;
pub use conn::{Conn, UpstreamIo};
pub use error::{Failure, H1Error};
pub use head::ResponseHead;
pub use request::{encode_head, wants_inline};

use http::Response;

/// Writes `head` (a whole request, [`encode_head`]) on `conn` and reads the response
/// head; `is_head` for a `HEAD` request (its response has no body). The failure says
/// whether any byte was written and whether any byte of a response came back, which
/// decides whether a reused connection's failure may be retried.
pub async fn exchange(
    mut conn: Conn,
    head: &[u8],
    is_head: bool,
) -> Result<(Response<()>, ResponseHead, Conn), Failure> {
    conn.write_request(head).await?;
    let response = head::read(&mut conn, is_head).await?;
    let (parts, framing) = response;
    Ok((Response::from_parts(parts, ()), framing, conn))
}
