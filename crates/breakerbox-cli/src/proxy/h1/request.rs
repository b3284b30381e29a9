//! The requests the inline client carries, and their heads as written on the wire.

use http::header::{self, HeaderMap};
use http::{Method, Request};
use http_body::Body;

/// Whether the inline client carries `request`: it has no body to stream and asks for
/// no upgrade (uploads and upgrades go through hyper's client, which writes a body while
/// it reads an early answer, and hands an upgraded connection over).
pub fn wants_inline<B: Body>(request: &Request<B>) -> bool {
    request.body().is_end_stream() && !request.headers().contains_key(header::UPGRADE)
}

/// Whether a request with this method and no framing headers needs `Content-Length: 0`
/// (methods whose requests usually carry a body, as hyper's client does).
fn needs_zero_length(method: &Method, headers: &HeaderMap) -> bool {
    matches!(*method, Method::POST | Method::PUT | Method::PATCH)
        && !headers.contains_key(header::CONTENT_LENGTH)
        && !headers.contains_key(header::TRANSFER_ENCODING)
}

/// The request line and headers of a body-less `request`, ready to write (its URI in
/// origin-form, or `/` without a path).
pub fn encode_head<B>(request: &Request<B>) -> Vec<u8> {
    let target = request.uri().path_and_query().map_or("/", |pq| pq.as_str());
    let target = if target.is_empty() { "/" } else { target };
    let headers = request.headers();
    let size = headers.iter().fold(target.len() + 32, |n, (k, v)| {
        n + k.as_str().len() + v.len() + 4
    });
    let mut out = Vec::with_capacity(size + 24);
    out.extend_from_slice(request.method().as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    for (name, value) in headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if needs_zero_length(request.method(), headers) {
        out.extend_from_slice(b"content-length: 0\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_are_written_in_origin_form() {
        let request = Request::get("http://example.com/a/b?c=d")
            .header("host", "example.com")
            .header("x-y", "z")
            .body(())
            .unwrap();
        let text = String::from_utf8(encode_head(&request)).unwrap();
        assert_eq!(
            text,
            "GET /a/b?c=d HTTP/1.1\r\nhost: example.com\r\nx-y: z\r\n\r\n"
        );
    }

    #[test]
    fn bodyless_posts_say_their_length() {
        let request = Request::post("/x").body(()).unwrap();
        let text = String::from_utf8(encode_head(&request)).unwrap();
        assert_eq!(text, "POST /x HTTP/1.1\r\ncontent-length: 0\r\n\r\n");
        let request = Request::post("/x")
            .header("content-length", "0")
            .body(())
            .unwrap();
        let text = String::from_utf8(encode_head(&request)).unwrap();
        assert_eq!(text, "POST /x HTTP/1.1\r\ncontent-length: 0\r\n\r\n");
    }
}
