//! An `[[upstream]]`'s `url`: `http://` or `https://`, a host and a port in range, an
//! optional base path, no credentials and no query; every error names the key.

use super::fields::Errors;

/// The authority, the base path and whether the URL is `https`.
pub(super) fn target(
    url: &str,
    key: &str,
    errors: &mut Errors,
) -> Option<(http::uri::Authority, String, bool)> {
    // Never echo a URL with credentials in it.
    if authority_text(url).is_some_and(|a| a.contains('@')) {
        errors.push(
            key,
            "credentials (user:password@) are not allowed in an upstream URL",
        );
        return None;
    }
    let uri: http::Uri = match url.parse() {
        Ok(uri) => uri,
        Err(e) => {
            errors.push(key, format_args!("invalid value {url:?}: {e}"));
            return None;
        }
    };
    let https = uri.scheme_str() == Some("https");
    if uri.scheme_str() != Some("http") && !https {
        errors.push(
            key,
            format_args!("invalid value {url:?}: expected an http:// or https:// URL"),
        );
        return None;
    }
    let Some(authority) = uri.authority().cloned() else {
        errors.push(key, format_args!("invalid value {url:?}: no host"));
        return None;
    };
    if let Err(why) = check_authority(authority.as_str()) {
        errors.push(key, why);
        return None;
    }
    if uri.query().is_some() {
        errors.push(
            key,
            format_args!("invalid value {url:?}: a query is not allowed"),
        );
        return None;
    }
    let base = uri.path().trim_end_matches('/').to_string();
    Some((authority, base, https))
}

/// The authority part of `scheme://authority/...`, as written.
fn authority_text(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    Some(rest.split(['/', '?', '#']).next().unwrap_or(rest))
}

/// A host and an optional port in 1-65535 (the `http` crate takes `:99999` and `:abc`,
/// then falls back to port 80).
fn check_authority(authority: &str) -> Result<(), String> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        match rest.split_once(']') {
            Some((host, after)) => (host, after.strip_prefix(':')),
            None => return Err("unclosed IPv6 literal".into()),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err("no host".into());
    }
    match port {
        None => Ok(()),
        Some("") => Err("empty port".into()),
        Some(p) if !p.bytes().all(|b| b.is_ascii_digit()) => {
            Err(format!("port {p:?} is not a number"))
        }
        Some(p) => match p.parse::<u32>() {
            Ok(n) if (1..=65535).contains(&n) => Ok(()),
            _ => Err(format!("port {p} is out of range (1-65535)")),
        },
    }
}
