//! Upgrades (WebSocket, or any HTTP/1.1 `Upgrade`) passed through: the handshake is an
//! exchange like any other, judged on its response head (`101 Switching Protocols`
//! succeeds by the judge's defaults; a refusal is judged by its status), and once both
//! sides have switched, the proxy relays bytes both ways without looking at them. The
//! tunnel itself is not judged: a WebSocket that closes after an hour says nothing about
//! the upstream's health.
//!
//! A tunnel keeps its upstream's concurrency place (if any) while it is open, so
//! `max_in_flight` bounds an upstream's tunnels too. Tunnels end when either side closes,
//! or when their worker stops at shutdown.

use http::header::{self, HeaderMap, HeaderValue};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;

use super::concurrency::InFlight;

/// What an upgrade request asked for: the protocol (its `Upgrade` header) and the
/// client's side of the connection, handed over once the answer is written.
pub struct Requested {
    protocol: HeaderValue,
    client: OnUpgrade,
}

/// Whether `headers` ask to switch protocols: `Connection` lists the `upgrade` token and
/// an `Upgrade` header names the protocol.
fn asks_to_upgrade(headers: &HeaderMap) -> Option<&HeaderValue> {
    let listed = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case("upgrade"));
    if !listed {
        return None;
    }
    headers.get(header::UPGRADE).filter(|v| !v.is_empty())
}

impl Requested {
    /// The upgrade `request` asks for, if any (HTTP/1.1 only; HTTP/2 has no `Upgrade`).
    pub fn take<B>(request: &mut http::Request<B>) -> Option<Requested> {
        if request.version() != http::Version::HTTP_11 {
            return None;
        }
        let protocol = asks_to_upgrade(request.headers())?.clone();
        Some(Requested {
            protocol,
            client: hyper::upgrade::on(request),
        })
    }

    /// Puts back on the forwarded request's `headers` (hop-by-hop headers already
    /// removed) what asks the upstream to switch: `Upgrade` and `Connection: upgrade`.
    pub fn ask_upstream(&self, headers: &mut HeaderMap) {
        headers.insert(header::UPGRADE, self.protocol.clone());
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    }

    /// The upstream switched (`response` is its 101, hop-by-hop headers already removed
    /// from `headers`): tells the client the same, and relays bytes between the two
    /// connections once both are handed over, holding `place` meanwhile.
    pub fn open<B>(
        self,
        response: &mut http::Response<B>,
        headers: &mut HeaderMap,
        place: Option<InFlight>,
    ) {
        let protocol = response
            .headers()
            .get(header::UPGRADE)
            .cloned()
            .unwrap_or_else(|| self.protocol.clone());
        headers.insert(header::UPGRADE, protocol);
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        let upstream = hyper::upgrade::on(response);
        let client = self.client;
        tokio::spawn(async move {
            let _place = place;
            // Either side failing to hand over (the client went away before the 101
            // reached it) ends the tunnel; the other side is closed by dropping it.
            let (Ok(client), Ok(upstream)) = (client.await, upstream.await) else {
                return;
            };
            let mut client = TokioIo::new(client);
            let mut upstream = TokioIo::new(upstream);
            let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upgrade_needs_the_connection_token_and_a_protocol() {
        let mut h = HeaderMap::new();
        h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        assert!(asks_to_upgrade(&h).is_none(), "no Connection: upgrade");
        h.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, Upgrade"),
        );
        assert_eq!(asks_to_upgrade(&h).unwrap(), "websocket");
        h.insert(header::UPGRADE, HeaderValue::from_static(""));
        assert!(asks_to_upgrade(&h).is_none(), "an empty protocol");
        let mut h = HeaderMap::new();
        h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        assert!(asks_to_upgrade(&h).is_none(), "no Upgrade header");
    }
}
