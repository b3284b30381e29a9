//! Keeping credentials out of what the program prints.

use std::borrow::Cow;

/// `url` with any `user:password@` replaced by `***@`: safe to print in messages.
///
/// Works on text that is not a valid URL too (it is often printed because it is not).
pub fn url(url: &str) -> Cow<'_, str> {
    let Some((scheme, rest)) = url.split_once("://") else {
        // No scheme: an `@` may still hide a password (`user:pw@host`).
        return match url.rsplit_once('@') {
            Some((_, host)) => Cow::Owned(format!("***@{host}")),
            None => Cow::Borrowed(url),
        };
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    match authority.rsplit_once('@') {
        Some((_, host)) => Cow::Owned(format!("{scheme}://***@{host}{tail}")),
        None => Cow::Borrowed(url),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn credentials_never_survive() {
        assert_eq!(
            super::url("redis://127.0.0.1:6379/"),
            "redis://127.0.0.1:6379/"
        );
        assert_eq!(
            super::url("redis://user:s3cret@host:6379/0"),
            "redis://***@host:6379/0"
        );
        assert_eq!(super::url("redis://:s3cret@host"), "redis://***@host");
        assert_eq!(super::url("user:s3cret@host"), "***@host");
        assert_eq!(
            super::url("redis+cluster://u:s3cret@h1:7000,h2:7001"),
            "redis+cluster://***@h1:7000,h2:7001"
        );
        assert_eq!(
            super::url("redis+sentinel://:s3cret@s1,s2:26380/main/1"),
            "redis+sentinel://***@s1,s2:26380/main/1"
        );
    }
}
