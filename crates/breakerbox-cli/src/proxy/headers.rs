//! The headers a forwarded request gets and loses: its size as on the wire, the
//! hop-by-hop headers removed, `X-Forwarded-For` appended.

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};

use bytes::Bytes;
use http::header::{self, Entry, HeaderMap, HeaderName, HeaderValue};
use http::Request;

/// Headers that concern one connection only, never forwarded (`Connection` first). A
/// static, not a const: a const array of names is built and dropped at every use.
/// `Trailer` is not one (RFC 9110 §6.6.2: it announces end-to-end trailer fields, and
/// hyper relays trailers to an HTTP/1.1 client only when they are announced).
static HOP_BY_HOP: [HeaderName; 7] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// The request line and headers, in bytes, as they were (about) on the wire.
pub(super) fn header_bytes<B>(request: &Request<B>) -> usize {
    let target = request
        .uri()
        .path_and_query()
        .map_or(1, |pq| pq.as_str().len());
    let line = request.method().as_str().len() + target + 12;
    request
        .headers()
        .iter()
        .fold(line, |n, (k, v)| n + k.as_str().len() + v.len() + 4)
}

/// Removes the hop-by-hop headers: the fixed ones and those `Connection` lists. One scan
/// over the names finds the fixed ones that are there (a removal hashes its name, and
/// most messages carry none or one); a listed name is made (which allocates) only when
/// such a header is there.
pub(super) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let mut present = [false; HOP_BY_HOP.len()];
    for name in headers.keys() {
        if let Some(i) = hop_by_hop_index(name.as_str()) {
            present[i] = true;
        }
    }
    if !present.contains(&true) {
        return;
    }
    if present[0] {
        // The fixed names go below; the others that `Connection` lists go here.
        let listed: Vec<HeaderName> = headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|t| hop_by_hop_place(t, str::eq_ignore_ascii_case).is_none())
            .filter(|t| headers.contains_key(*t))
            .filter_map(|t| HeaderName::from_bytes(t.as_bytes()).ok())
            .collect();
        for name in listed {
            headers.remove(name);
        }
    }
    for (name, here) in HOP_BY_HOP.iter().zip(present) {
        if here {
            headers.remove(name);
        }
    }
}

/// The place in [`HOP_BY_HOP`] of a name that `same` finds equal to one there: its length
/// picks the one or two names it can be, so a name that is none of them costs one
/// branch, where comparing it with each of the seven cost most of a request's header
/// handling (`scripts/proxy_instructions.sh`). The lengths are written out: comparing
/// with each name's length at run time cost 350 instructions a request more, since a
/// `HeaderName`'s text is not folded. A unit test holds them to [`HOP_BY_HOP`].
#[inline(always)]
fn hop_by_hop_place(name: &str, same: impl Fn(&str, &str) -> bool) -> Option<usize> {
    let i = match name.len() {
        10 if same(name, HOP_BY_HOP[0].as_str()) => return Some(0),
        10 => 1,
        18 => 2,
        19 => 3,
        2 => 4,
        17 => 5,
        7 => 6,
        _ => return None,
    };
    same(name, HOP_BY_HOP[i].as_str()).then_some(i)
}

/// The place of `name` (lower case, as a [`HeaderName`] holds it) in [`HOP_BY_HOP`].
fn hop_by_hop_index(name: &str) -> Option<usize> {
    hop_by_hop_place(name, |a, b| a == b)
}

/// Appends `ip` in its usual text form; IPv4 (the common case) without the formatting
/// machinery, which was a visible share of a request's cost.
fn push_ip(out: &mut String, ip: IpAddr) {
    match ip {
        IpAddr::V4(v4) => {
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push('.');
                }
                if octet >= 100 {
                    out.push(char::from(b'0' + octet / 100));
                }
                if octet >= 10 {
                    out.push(char::from(b'0' + octet / 10 % 10));
                }
                out.push(char::from(b'0' + octet % 10));
            }
        }
        IpAddr::V6(v6) => {
            let _ = write!(out, "{v6}");
        }
    }
}

/// Appends the peer's address to `X-Forwarded-For` (one header, comma-separated).
pub(super) fn forwarded_for(headers: &mut HeaderMap, peer: SocketAddr) {
    // One lookup for reading and writing; the value is built in place and not copied.
    let mut value = String::with_capacity(48);
    match headers.entry(&X_FORWARDED_FOR) {
        Entry::Occupied(mut prior) => {
            if let Ok(prior) = prior.get().to_str() {
                if !prior.is_empty() {
                    value.push_str(prior);
                    value.push_str(", ");
                }
            }
            push_ip(&mut value, peer.ip());
            if let Ok(value) = HeaderValue::from_maybe_shared(Bytes::from(value)) {
                prior.insert(value);
            }
        }
        Entry::Vacant(slot) => {
            push_ip(&mut value, peer.ip());
            if let Ok(value) = HeaderValue::from_maybe_shared(Bytes::from(value)) {
                slot.insert(value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_addresses_print_as_std_prints_them() {
        for ip in [
            "0.0.0.0",
            "127.0.0.1",
            "10.20.255.9",
            "192.168.100.1",
            "::1",
            "::ffff:1.2.3.4",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            let mut out = String::new();
            push_ip(&mut out, ip);
            assert_eq!(out, ip.to_string());
        }
    }

    #[test]
    fn x_forwarded_for_gets_the_peer_appended() {
        let peer: SocketAddr = "10.0.0.7:5000".parse().unwrap();
        let mut h = HeaderMap::new();
        forwarded_for(&mut h, peer);
        assert_eq!(h[&X_FORWARDED_FOR], "10.0.0.7");
        let mut h = HeaderMap::new();
        h.append(&X_FORWARDED_FOR, HeaderValue::from_static("1.1.1.1"));
        h.append(&X_FORWARDED_FOR, HeaderValue::from_static("2.2.2.2"));
        forwarded_for(&mut h, peer);
        assert_eq!(h.get_all(&X_FORWARDED_FOR).iter().count(), 1);
        assert_eq!(h[&X_FORWARDED_FOR], "1.1.1.1, 10.0.0.7");
    }

    #[test]
    fn every_hop_by_hop_name_is_found_at_its_place_and_no_other_name_is() {
        for (i, name) in HOP_BY_HOP.iter().enumerate() {
            assert_eq!(hop_by_hop_index(name.as_str()), Some(i), "{name}");
            let upper = name.as_str().to_ascii_uppercase();
            assert_eq!(hop_by_hop_index(&upper), None, "{upper}");
            assert_eq!(
                hop_by_hop_place(&upper, str::eq_ignore_ascii_case),
                Some(i),
                "{upper}"
            );
        }
        for other in [
            "te-x",
            "tf",
            "upgradx",
            "connectioN",
            "keep_alive",
            "transfer-encodinG",
            "proxy-authenticatx",
            "proxy-authorizatioN",
            "content-length",
            "x-connection",
            "",
        ] {
            assert_eq!(hop_by_hop_index(other), None, "{other}");
        }
    }

    #[test]
    fn hop_by_hop_headers_and_the_ones_connection_lists_are_removed() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, X-Private, close, te"),
        );
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert("x-private", HeaderValue::from_static("1"));
        h.append("x-private", HeaderValue::from_static("2"));
        h.insert(header::TE, HeaderValue::from_static("trailers"));
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key(header::CONTENT_TYPE));
        let mut none = HeaderMap::new();
        none.insert(header::HOST, HeaderValue::from_static("a"));
        strip_hop_by_hop(&mut none);
        assert_eq!(none.len(), 1);
    }
}
