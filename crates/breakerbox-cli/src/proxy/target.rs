//! The request target: which host a request is for (RFC 9112 §3.2), its path with
//! dot-segments resolved (RFC 3986 §5.2.4, `%2e` included), and the origin-form target
//! sent upstream.

use std::borrow::Cow;

use http::header::HOST;
use http::{Request, Uri, Version};

use super::config::UpstreamConfig;

/// The host a request is for: the authority of an absolute-form target, else its one
/// `Host` header. `Err` names why the request is malformed (answered 400).
pub fn request_host<B>(request: &Request<B>) -> Result<Option<&str>, &'static str> {
    let mut hosts = request.headers().get_all(HOST).iter();
    let first = hosts.next();
    if hosts.next().is_some() {
        return Err("more than one Host header");
    }
    if first.is_none() && request.version() == Version::HTTP_11 {
        return Err("an HTTP/1.1 request needs a Host header");
    }
    if let Some(authority) = request.uri().authority() {
        // Absolute-form: the target's authority wins over `Host`.
        return Ok(Some(authority.host()));
    }
    match first {
        Some(value) => match value.to_str() {
            Ok(host) if !host.is_empty() => Ok(Some(strip_port(host))),
            Ok(_) => Ok(None),
            Err(_) => Err("the Host header is not valid"),
        },
        None => Ok(None),
    }
}

/// `host` without its port (and without brackets for an IPv6 literal).
pub fn strip_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    host.rsplit_once(':').map_or(host, |(h, _)| h)
}

enum Segment {
    Dot,
    DotDot,
    Other,
}

fn segment(s: &str) -> Segment {
    let bytes = s.as_bytes();
    let dot_at = |i: usize| -> Option<usize> {
        match bytes.get(i)? {
            b'.' => Some(i + 1),
            b'%' if bytes.get(i + 1) == Some(&b'2')
                && bytes
                    .get(i + 2)
                    .is_some_and(|b| b.eq_ignore_ascii_case(&b'e')) =>
            {
                Some(i + 3)
            }
            _ => None,
        }
    };
    match dot_at(0) {
        Some(end) if end == bytes.len() => Segment::Dot,
        Some(end) => match dot_at(end) {
            Some(end2) if end2 == bytes.len() => Segment::DotDot,
            _ => Segment::Other,
        },
        None => Segment::Other,
    }
}

/// `path` with `.` and `..` segments (also written `%2e`) resolved; `Err` when `..` would
/// climb above the root. Borrowed when there was nothing to resolve.
pub fn normalize_path(path: &str) -> Result<Cow<'_, str>, &'static str> {
    let Some(rest) = path.strip_prefix('/') else {
        return Ok(Cow::Borrowed(path));
    };
    if !rest
        .split('/')
        .any(|s| !matches!(segment(s), Segment::Other))
    {
        return Ok(Cow::Borrowed(path));
    }
    let mut out: Vec<&str> = Vec::new();
    let mut segments = rest.split('/').peekable();
    while let Some(s) = segments.next() {
        let last = segments.peek().is_none();
        match segment(s) {
            Segment::Dot => {}
            Segment::DotDot => {
                if out.pop().is_none() {
                    return Err("the path climbs above the root");
                }
            }
            Segment::Other => {
                out.push(s);
                continue;
            }
        }
        if last {
            // `/a/b/..` is the directory `/a/`.
            out.push("");
        }
    }
    Ok(Cow::Owned(format!("/{}", out.join("/"))))
}

/// The origin-form target to send to `upstream`: `uri`'s path (or `rewritten`, its
/// normalised form, when it had dot-segments) and query.
pub fn target_uri(upstream: &UpstreamConfig, uri: &Uri, rewritten: Option<&str>) -> Option<Uri> {
    if !upstream.strip_prefix && upstream.base_path.is_empty() && rewritten.is_none() {
        if let Some(pq) = uri.path_and_query() {
            let mut parts = http::uri::Parts::default();
            parts.path_and_query = Some(pq.clone());
            return Uri::from_parts(parts).ok();
        }
    }
    let mut path: &str = rewritten.unwrap_or(uri.path());
    if upstream.strip_prefix {
        if let Some(route) = &upstream.route {
            let trimmed = route.trim_end_matches('/');
            path = path.strip_prefix(trimmed).unwrap_or(path);
        }
    }
    let mut pq = String::with_capacity(upstream.base_path.len() + path.len() + 64);
    pq.push_str(&upstream.base_path);
    if !path.starts_with('/') {
        pq.push('/');
    }
    pq.push_str(path);
    if let Some(q) = uri.query() {
        pq.push('?');
        pq.push_str(q);
    }
    Uri::try_from(pq).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_segments_resolve_and_may_not_climb_above_the_root() {
        let n = |p| normalize_path(p).map(|c| c.into_owned());
        assert_eq!(n("/a/b"), Ok("/a/b".into()));
        assert!(matches!(normalize_path("/a/b"), Ok(Cow::Borrowed(_))));
        assert_eq!(n("/a/./b"), Ok("/a/b".into()));
        assert_eq!(n("/a/../b"), Ok("/b".into()));
        assert_eq!(n("/a/%2e%2E/b"), Ok("/b".into()));
        assert_eq!(n("/a/.%2e/b"), Ok("/b".into()));
        assert_eq!(n("/a/b/.."), Ok("/a/".into()));
        assert_eq!(n("/a/b/."), Ok("/a/b/".into()));
        assert_eq!(n("/a/..b/c"), Ok("/a/..b/c".into()));
        assert_eq!(n("/a/.../c"), Ok("/a/.../c".into()));
        assert!(n("/..").is_err());
        assert!(n("/a/../../b").is_err());
        assert_eq!(n("*"), Ok("*".into()));
    }

    #[test]
    fn the_host_comes_from_an_absolute_target_before_the_host_header() {
        let req = |target: &str, hosts: &[&str], version| {
            let mut b = Request::builder().uri(target).version(version);
            for h in hosts {
                b = b.header(HOST, *h);
            }
            b.body(()).unwrap()
        };
        assert_eq!(
            request_host(&req("/x", &["a.example:8080"], Version::HTTP_11)),
            Ok(Some("a.example"))
        );
        assert_eq!(
            request_host(&req("http://b.example/x", &["a.example"], Version::HTTP_11)),
            Ok(Some("b.example"))
        );
        assert!(request_host(&req("/x", &["a", "b"], Version::HTTP_11)).is_err());
        assert!(request_host(&req("/x", &[], Version::HTTP_11)).is_err());
        assert_eq!(request_host(&req("/x", &[], Version::HTTP_10)), Ok(None));
    }
}
