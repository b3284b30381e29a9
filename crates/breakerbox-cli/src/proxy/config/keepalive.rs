//! `keepalive_interval` and `keepalive_timeout` of an HTTP/2 `[[upstream]]`: the proxy
//! sends a PING on each of its upstream connections every interval (idle or not) and
//! closes one whose answer does not come within the timeout, so a connection that died
//! silently (a NAT or firewall that forgot it, a host gone without a FIN) is found before
//! a request is lost on it: the next request opens a new connection instead of waiting
//! out `request_timeout` and counting against a healthy upstream.

use std::time::Duration;

use toml::Table;

use super::fields::{duration, join, Errors};
use super::Protocol;

/// The PING every connection gets, by default, this often.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(30);
/// How long a PING's answer may take, by default, before the connection is closed.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// HTTP/2 keep-alive of an upstream's connections.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Keepalive {
    /// How often each connection is pinged.
    pub interval: Duration,
    /// How long an answer may take before the connection is closed.
    pub timeout: Duration,
}

/// The upstream's keep-alive: `Some` (the defaults where a key is absent) for an HTTP/2
/// upstream; `None` for HTTP/1.1, where either key is an error (HTTP/1.1 has no PING).
pub(super) fn keepalive(
    table: &Table,
    protocol: Protocol,
    path: &str,
    errors: &mut Errors,
) -> Option<Keepalive> {
    let keys = ["keepalive_interval", "keepalive_timeout"];
    if protocol != Protocol::Http2 {
        for key in keys.into_iter().filter(|k| table.contains_key(*k)) {
            errors.push(
                &join(path, key),
                "needs protocol = \"http2\" (HTTP/1.1 connections have no PING)",
            );
        }
        return None;
    }
    let interval = table
        .contains_key(keys[0])
        .then(|| duration(table, keys[0], path, errors));
    let timeout = table
        .contains_key(keys[1])
        .then(|| duration(table, keys[1], path, errors));
    Some(Keepalive {
        interval: interval.map_or(Some(DEFAULT_INTERVAL), |d| d)?,
        timeout: timeout.map_or(Some(DEFAULT_TIMEOUT), |d| d)?,
    })
}
