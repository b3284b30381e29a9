//! What a request asks for: the path (under the service's prefix) as a [`Route`], and an
//! action's `for` duration from the query or the JSON body. Pure functions of the
//! request's text; nothing here can panic on any input.

use std::time::Duration;

use breakerbox::config::parse_duration;
use serde_json::Value;

/// The longest override an action may set: 100 years (the Redis engine's limit, so a
/// request means the same whatever the engine).
pub(crate) const MAX_FOR: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// A manual operation on one breaker.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Force open (until reset, or for a while).
    Trip,
    /// Back to a fresh closed phase.
    Reset,
    /// Admit everything, record nothing (until reset, or for a while).
    Disable,
    /// Shadow mode on (rule 20): every rule runs, nothing is rejected.
    Shadow,
    /// Shadow mode off: the breaker rejects again.
    Unshadow,
}

impl Action {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Action::Trip => "trip",
            Action::Reset => "reset",
            Action::Disable => "disable",
            Action::Shadow => "shadow",
            Action::Unshadow => "unshadow",
        }
    }

    fn from_name(name: &str) -> Option<Action> {
        match name {
            "trip" => Some(Action::Trip),
            "reset" => Some(Action::Reset),
            "disable" => Some(Action::Disable),
            "shadow" => Some(Action::Shadow),
            "unshadow" => Some(Action::Unshadow),
            _ => None,
        }
    }
}

/// The actions, as the 404 for another one lists them.
pub(crate) const ACTIONS: &str = "actions: trip, reset, disable, shadow, unshadow";

/// What a path under the prefix names.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// The dashboard page: `/`, `/index.html`, `/dashboard` (and the prefix alone).
    Dashboard,
    /// `/status`.
    Status,
    /// `/metrics`.
    Metrics,
    /// `/breakers/{name}/{action}`, the name percent-decoded.
    Action { name: String, action: Action },
    /// `/breakers/{name}/{something else}`.
    UnknownAction,
    /// `/breakers/{name}/...` with a name that is not valid percent-encoded UTF-8.
    BadName,
    /// Anything else.
    NotFound,
}

/// The route of `path`, the part of the request path under the prefix.
pub(crate) fn route(path: &str) -> Route {
    match path {
        "" | "/" | "/index.html" | "/dashboard" => return Route::Dashboard,
        "/status" => return Route::Status,
        "/metrics" => return Route::Metrics,
        _ => {}
    }
    let Some(rest) = path.strip_prefix("/breakers/") else {
        return Route::NotFound;
    };
    // The action is the last segment: a name may hold an encoded `/` (`%2F`).
    let Some((encoded, action)) = rest.rsplit_once('/') else {
        return Route::NotFound;
    };
    if encoded.is_empty() || encoded.contains('/') {
        return Route::NotFound;
    }
    let Some(action) = Action::from_name(action) else {
        return Route::UnknownAction;
    };
    match percent_decode(encoded, false) {
        Some(name) => Route::Action { name, action },
        None => Route::BadName,
    }
}

/// `text` with `%XX` escapes decoded (and `+` as a space when `plus_is_space`, as in a
/// query string); `None` for a bad escape or bytes that are not UTF-8.
pub(crate) fn percent_decode(text: &str, plus_is_space: bool) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hi = hex(*bytes.get(i + 1)?)?;
                let lo = hex(*bytes.get(i + 2)?)?;
                out.push(hi << 4 | lo);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// A request parameter that was wrong: its name, and why.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BadParameter {
    pub(crate) parameter: String,
    pub(crate) detail: String,
}

impl BadParameter {
    fn new(parameter: impl Into<String>, detail: impl Into<String>) -> BadParameter {
        BadParameter {
            parameter: parameter.into(),
            detail: detail.into(),
        }
    }
}

/// The `for` duration of `action`, from the query (`?for=10m`) or the JSON body
/// (`{"for": "10m"}`), at most one of them; `None` for "until reset". An empty body is no
/// body; any other key is refused.
pub(crate) fn duration_for(
    action: Action,
    query: Option<&str>,
    body: &[u8],
) -> Result<Option<Duration>, BadParameter> {
    let from_query = query_for(query.unwrap_or(""))?;
    let from_body = body_for(body)?;
    let text = match (from_query, from_body) {
        (Some(_), Some(_)) => {
            return Err(BadParameter::new(
                "for",
                "given both in the query and in the body",
            ))
        }
        (Some(text), None) | (None, Some(text)) => text,
        (None, None) => return Ok(None),
    };
    if action == Action::Reset {
        return Err(BadParameter::new(
            "for",
            "reset takes no duration (it ends every override)",
        ));
    }
    if matches!(action, Action::Shadow | Action::Unshadow) {
        return Err(BadParameter::new(
            "for",
            "shadow and unshadow take no duration (shadow lasts until unshadow)",
        ));
    }
    let shown: String = text.chars().take(64).collect();
    let Some(duration) = parse_duration(&text) else {
        return Err(BadParameter::new(
            "for",
            format!("invalid duration {shown:?} (expected e.g. 30s, 10m, 1h30m)"),
        ));
    };
    if duration.is_zero() {
        return Err(BadParameter::new(
            "for",
            "the duration must be above zero (leave `for` out for until reset)",
        ));
    }
    if duration > MAX_FOR {
        return Err(BadParameter::new(
            "for",
            format!("{shown:?} is longer than 100 years"),
        ));
    }
    Ok(Some(duration))
}

fn query_for(query: &str) -> Result<Option<String>, BadParameter> {
    let mut found = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = percent_decode(key, true)
            .ok_or_else(|| BadParameter::new("query", "bad percent-encoding"))?;
        if key != "for" {
            let shown: String = key.chars().take(64).collect();
            return Err(BadParameter::new(shown, "unknown parameter (only `for`)"));
        }
        let value = percent_decode(value, true)
            .ok_or_else(|| BadParameter::new("for", "bad percent-encoding"))?;
        if found.replace(value).is_some() {
            return Err(BadParameter::new("for", "given more than once"));
        }
    }
    Ok(found)
}

fn body_for(body: &[u8]) -> Result<Option<String>, BadParameter> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| BadParameter::new("body", format!("not JSON: {e}")))?;
    let Value::Object(map) = value else {
        return Err(BadParameter::new("body", "expected a JSON object"));
    };
    let mut found = None;
    for (key, value) in map {
        if key != "for" {
            let shown: String = key.chars().take(64).collect();
            return Err(BadParameter::new(shown, "unknown key (only `for`)"));
        }
        match value {
            Value::Null => {}
            Value::String(text) => found = Some(text),
            _ => {
                return Err(BadParameter::new(
                    "for",
                    "expected a duration as text, e.g. \"10m\"",
                ))
            }
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_the_page_the_documents_and_actions_with_decoded_names() {
        assert_eq!(route(""), Route::Dashboard);
        assert_eq!(route("/dashboard"), Route::Dashboard);
        assert_eq!(route("/status"), Route::Status);
        assert_eq!(route("/metrics"), Route::Metrics);
        assert_eq!(
            route("/breakers/api.example.com%3A443/trip"),
            Route::Action {
                name: "api.example.com:443".into(),
                action: Action::Trip
            }
        );
        assert_eq!(
            route("/breakers/a%2Fb/disable"),
            Route::Action {
                name: "a/b".into(),
                action: Action::Disable
            }
        );
        assert_eq!(
            route("/breakers/a/shadow"),
            Route::Action {
                name: "a".into(),
                action: Action::Shadow
            }
        );
        assert_eq!(
            route("/breakers/a/unshadow"),
            Route::Action {
                name: "a".into(),
                action: Action::Unshadow
            }
        );
        assert_eq!(route("/breakers/a/ramp"), Route::UnknownAction);
        assert_eq!(route("/breakers/a%zz/trip"), Route::BadName);
        assert_eq!(route("/breakers/%ff/trip"), Route::BadName);
        assert_eq!(route("/breakers/a/b/trip"), Route::NotFound);
        assert_eq!(route("/breakers//trip"), Route::NotFound);
        assert_eq!(route("/breakers/a"), Route::NotFound);
        assert_eq!(route("/status/"), Route::NotFound);
    }

    #[test]
    fn a_duration_comes_from_the_query_or_the_body_and_bad_ones_name_the_parameter() {
        let ten = Some(Duration::from_secs(600));
        assert_eq!(duration_for(Action::Trip, Some("for=10m"), b""), Ok(ten));
        assert_eq!(
            duration_for(Action::Trip, None, br#"{"for":"10m"}"#),
            Ok(ten)
        );
        assert_eq!(
            duration_for(Action::Trip, Some("for=1m+30s"), b""),
            Ok(Some(Duration::from_secs(90)))
        );
        assert_eq!(duration_for(Action::Disable, None, b" {} "), Ok(None));
        assert_eq!(duration_for(Action::Reset, None, b""), Ok(None));
        for (query, body) in [
            (Some("for=soon"), &b""[..]),
            (Some("for=0s"), b""),
            (Some("for=900000h"), b""),
            (Some("for=1m"), br#"{"for":"1m"}"#),
            (Some("for=1m&for=2m"), b""),
            (None, br#"{"for":10}"#),
            (Some("for=%zz"), b""),
        ] {
            let err = duration_for(Action::Trip, query, body).unwrap_err();
            assert_eq!(err.parameter, "for", "{query:?} {body:?}: {err:?}");
        }
        assert_eq!(
            duration_for(Action::Reset, Some("for=1m"), b"")
                .unwrap_err()
                .parameter,
            "for"
        );
        assert_eq!(
            duration_for(Action::Trip, Some("until=1m"), b"")
                .unwrap_err()
                .parameter,
            "until"
        );
        assert_eq!(
            duration_for(Action::Trip, None, b"[1]")
                .unwrap_err()
                .parameter,
            "body"
        );
        assert_eq!(
            duration_for(Action::Trip, None, b"{")
                .unwrap_err()
                .parameter,
            "body"
        );
    }
}
