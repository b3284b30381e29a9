//! Who may use the admin service. Every request must name the service in `Host` (an IP
//! literal, `localhost`, or an allowed name), so a page served under another name cannot
//! read it through DNS rebinding. A state-changing request must not come from another
//! origin (`Origin`, when sent, must match `Host`) and must be one a browser would not send
//! cross-origin without asking first: with a token, its `Authorization` header; without
//! one, a JSON content type (and a loopback peer).

use std::net::IpAddr;

use http::header::{AUTHORIZATION, CONTENT_TYPE, HOST, ORIGIN};
use http::HeaderMap;

/// Why a request was refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Denied {
    /// A token is configured and none was sent (401 with a challenge).
    Unauthorized(&'static str),
    /// Anything else (403).
    Forbidden(&'static str),
}

/// The admin service's access rules.
#[derive(Debug)]
pub(crate) struct Access {
    token: Option<String>,
    hosts: Vec<String>,
}

impl Access {
    /// Rules with an optional `token` and extra host names (lower case) besides IP
    /// literals and `localhost`.
    pub(crate) fn new(token: Option<String>, hosts: Vec<String>) -> Access {
        Access { token, hosts }
    }

    /// Every request: `Host` names this service.
    pub(crate) fn check_host(&self, headers: &HeaderMap) -> Result<(), Denied> {
        let host = one_host(headers)?;
        let name = strip_port(host);
        let ok = name.parse::<IpAddr>().is_ok()
            || name.eq_ignore_ascii_case("localhost")
            || self.hosts.iter().any(|h| h.eq_ignore_ascii_case(name));
        if ok {
            Ok(())
        } else {
            Err(Denied::Forbidden(
                "the Host header does not name this admin service (add the name to its allowed hosts)",
            ))
        }
    }

    /// A state-changing request from `peer` (`None` when the server did not say).
    pub(crate) fn check_action(
        &self,
        headers: &HeaderMap,
        peer: Option<IpAddr>,
    ) -> Result<(), Denied> {
        self.check_host(headers)?;
        if let Some(origin) = headers.get(ORIGIN) {
            let host = one_host(headers)?;
            let same = origin
                .to_str()
                .ok()
                .and_then(|o| o.split_once("://"))
                .is_some_and(|(_, authority)| authority.eq_ignore_ascii_case(host));
            if !same {
                return Err(Denied::Forbidden("a request from another origin"));
            }
        }
        match &self.token {
            Some(token) => {
                let given = headers
                    .get(AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().split_once(' '))
                    .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
                    .map(|(_, credentials)| credentials.trim());
                match given {
                    Some(given) if constant_time_eq(given.as_bytes(), token.as_bytes()) => Ok(()),
                    Some(_) => Err(Denied::Forbidden("wrong token")),
                    None => Err(Denied::Unauthorized(
                        "an admin token is configured: send Authorization: Bearer TOKEN",
                    )),
                }
            }
            None => {
                match peer {
                    Some(peer) if peer.to_canonical().is_loopback() => {}
                    Some(_) => {
                        return Err(Denied::Forbidden(
                            "actions are allowed from loopback only unless an admin token is configured",
                        ))
                    }
                    None => {
                        return Err(Denied::Forbidden(
                            "the peer address is unknown (the server must insert breakerbox_admin::PeerAddr), \
                             so actions need an admin token",
                        ))
                    }
                }
                let json = headers
                    .get(CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.split(';').next())
                    .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"));
                if json {
                    Ok(())
                } else {
                    Err(Denied::Forbidden(
                        "send Content-Type: application/json (a browser form cannot)",
                    ))
                }
            }
        }
    }
}

fn one_host(headers: &HeaderMap) -> Result<&str, Denied> {
    let mut all = headers.get_all(HOST).iter();
    match (all.next(), all.next()) {
        (Some(host), None) => host
            .to_str()
            .map_err(|_| Denied::Forbidden("the Host header is not valid")),
        _ => Err(Denied::Forbidden("send exactly one Host header")),
    }
}

/// `host` without its port (and without brackets for an IPv6 literal).
fn strip_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    host.rsplit_once(':').map_or(host, |(h, _)| h)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    // A documentation address (TEST-NET-3): the rule is checked without sending anything.
    const REMOTE: &str = "203.0.113.5";

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    const JSON: (&str, &str) = ("content-type", "application/json; charset=utf-8");

    #[test]
    fn without_a_token_only_loopback_json_requests_under_our_host_may_act() {
        let a = Access::new(None, vec![]);
        let ok = headers(&[("host", "127.0.0.1:9090"), JSON]);
        assert_eq!(a.check_action(&ok, Some(ip("127.0.0.1"))), Ok(()));
        assert_eq!(a.check_action(&ok, Some(ip("::ffff:127.0.0.1"))), Ok(()));
        assert!(a.check_action(&ok, Some(ip(REMOTE))).is_err());
        let simple = headers(&[("host", "127.0.0.1:9090"), ("content-type", "text/plain")]);
        assert!(a.check_action(&simple, Some(ip("127.0.0.1"))).is_err());
        let foreign = headers(&[
            ("host", "127.0.0.1:9090"),
            JSON,
            ("origin", "http://x.example"),
        ]);
        assert!(a.check_action(&foreign, Some(ip("127.0.0.1"))).is_err());
        let same = headers(&[
            ("host", "localhost:9090"),
            JSON,
            ("origin", "http://localhost:9090"),
        ]);
        assert_eq!(a.check_action(&same, Some(ip("127.0.0.1"))), Ok(()));
    }

    #[test]
    fn with_a_token_everyone_must_present_it_in_any_case_scheme() {
        let a = Access::new(Some("t0ken".into()), vec![]);
        let with = |auth: &str| headers(&[("host", "10.0.0.1:9090"), ("authorization", auth)]);
        assert_eq!(
            a.check_action(&with("Bearer t0ken"), Some(ip(REMOTE))),
            Ok(())
        );
        assert_eq!(
            a.check_action(&with("bearer t0ken"), Some(ip(REMOTE))),
            Ok(())
        );
        assert_eq!(
            a.check_action(&with("Bearer nope"), Some(ip(REMOTE))),
            Err(Denied::Forbidden("wrong token"))
        );
        assert!(matches!(
            a.check_action(&headers(&[("host", "10.0.0.1")]), Some(ip("127.0.0.1"))),
            Err(Denied::Unauthorized(_))
        ));
        assert!(matches!(
            a.check_action(&with("t0ken"), Some(ip(REMOTE))),
            Err(Denied::Unauthorized(_))
        ));
    }

    #[test]
    fn an_unknown_peer_may_act_only_with_the_token() {
        let ok = headers(&[("host", "127.0.0.1:9090"), JSON]);
        assert!(matches!(
            Access::new(None, vec![]).check_action(&ok, None),
            Err(Denied::Forbidden(_))
        ));
        let with = headers(&[("host", "127.0.0.1:9090"), ("authorization", "Bearer t")]);
        assert_eq!(
            Access::new(Some("t".into()), vec![]).check_action(&with, None),
            Ok(())
        );
    }

    #[test]
    fn host_names_other_than_ip_literals_localhost_and_configured_ones_are_refused() {
        let a = Access::new(None, vec!["admin.internal".into()]);
        for good in [
            "127.0.0.1:1",
            "[::1]:1",
            "LOCALHOST:1",
            "admin.internal",
            "10.1.2.3",
        ] {
            assert_eq!(a.check_host(&headers(&[("host", good)])), Ok(()), "{good}");
        }
        for bad in ["evil.example", "evil.example:9090", "127.0.0.1.nip.io"] {
            assert!(a.check_host(&headers(&[("host", bad)])).is_err(), "{bad}");
        }
        assert!(a.check_host(&headers(&[])).is_err());
        assert!(a
            .check_host(&headers(&[("host", "127.0.0.1"), ("host", "127.0.0.1")]))
            .is_err());
    }
}
