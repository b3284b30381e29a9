//! The state-changing requests a web page (or a rebound DNS name) can make a browser send
//! to an admin listener on the same machine: every one must be refused with 403 when no
//! token is set. Shared by the embeddable service's tests and the proxy's, which serve the
//! same guard.

/// `(what, headers)` of each hostile `POST`.
pub fn cross_origin_posts() -> Vec<(&'static str, Vec<(&'static str, &'static str)>)> {
    vec![
        (
            "a simple text/plain form post from another origin",
            vec![
                ("content-type", "text/plain"),
                ("origin", "http://evil.example"),
            ],
        ),
        ("a simple post with no content type", vec![]),
        (
            "a JSON post from another origin",
            vec![
                ("content-type", "application/json"),
                ("origin", "http://evil.example"),
            ],
        ),
        (
            "a JSON post through a rebound DNS name",
            vec![
                ("content-type", "application/json"),
                ("host", "evil.example:9090"),
                ("origin", "http://evil.example:9090"),
            ],
        ),
        (
            "a JSON post with an opaque origin",
            vec![("content-type", "application/json"), ("origin", "null")],
        ),
    ]
}
