//! Which breaker a request goes through.

/// The default key: the request's `host:port` (the port made explicit, so
/// `http://api.example.com/` and `http://api.example.com:80/` share a breaker).
///
/// ```
/// let request = reqwest::Request::new(
///     reqwest::Method::GET,
///     "https://api.example.com/v1/charge".parse().unwrap(),
/// );
/// assert_eq!(breakerbox_reqwest::host_key(&request), "api.example.com:443");
/// ```
pub fn host_key(request: &reqwest::Request) -> String {
    let url = request.url();
    let host = url.host_str().unwrap_or("");
    match url.port_or_known_default() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    }
}
