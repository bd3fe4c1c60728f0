//! A destination's URL as each delivery sends to it, worked out once when
//! the destination is configured: the request's URI (no user info, no
//! fragment), its `Host` header, and the `Authorization: Basic` header a
//! URL's user info stands for (`https://user:pass@host/` sends those
//! credentials, percent-decoded, as reqwest and curl do).

use std::sync::Arc;

use axum::http::{HeaderValue, Uri};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use percent_encoding::percent_decode_str;

/// Where and how a destination's deliveries are sent.
#[derive(Clone, Debug)]
pub(crate) struct Endpoint {
    /// Where to connect: scheme, host, port, path and query.
    pub uri: Uri,
    /// What the request names (origin form): its path and query.
    pub origin: Uri,
    /// Its `Host` header: the host, and the port when not the scheme's own.
    pub host: HeaderValue,
    /// `Basic` credentials from the URL's user info, if it had any.
    pub authorization: Option<HeaderValue>,
    /// The idle connections to its origin (shared with every destination
    /// there).
    pub idle: Arc<super::pool::Idle>,
}

impl Endpoint {
    /// The endpoint of an `http://` or `https://` URL, or `None` for a URL
    /// that is not one or that an HTTP request cannot name (a host the URL
    /// standard allows but a request's URI does not, such as `a{b}`):
    /// configuration refuses both before they get here.
    pub(crate) fn parse(url: &str) -> Option<Endpoint> {
        let parsed = reqwest::Url::parse(url).ok()?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return None;
        }
        let authorization = match (parsed.username(), parsed.password()) {
            ("", None) => None,
            (user, password) => {
                // The bytes as given, percent-decoded (not made UTF-8).
                let mut pair: Vec<u8> = percent_decode_str(user).collect();
                pair.push(b':');
                pair.extend(percent_decode_str(password.unwrap_or("")));
                let mut value =
                    HeaderValue::try_from(format!("Basic {}", STANDARD.encode(pair))).ok()?;
                value.set_sensitive(true);
                Some(value)
            }
        };
        let uri = crate::config::value::request_uri(&parsed)?;
        let host = match (parsed.host_str()?, parsed.port()) {
            (host, Some(port)) => format!("{host}:{port}"),
            (host, None) => host.to_owned(),
        };
        let origin = match uri.path_and_query() {
            Some(pq) => Uri::try_from(pq.as_str()).ok()?,
            None => Uri::from_static("/"),
        };
        // Every destination at this scheme, host and port shares its idle
        // connections (the host as the request names it, and as TLS does).
        let idle = super::pool::shared(&format!("{}://{host}", parsed.scheme()));
        Some(Endpoint {
            uri,
            origin,
            host: HeaderValue::try_from(host).ok()?,
            authorization,
            idle,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_info_becomes_basic_credentials_and_leaves_the_uri() {
        let e = Endpoint::parse("https://ops:s%40fe@hooks.example.com:8443/in?x=1#top").unwrap();
        assert_eq!(e.uri, "https://hooks.example.com:8443/in?x=1");
        assert_eq!(e.origin, "/in?x=1");
        assert_eq!(e.host, "hooks.example.com:8443");
        // base64 of "ops:s@fe"
        assert_eq!(e.authorization.unwrap(), "Basic b3BzOnNAZmU=");
        assert!(Endpoint::parse("ftp://example.com/").is_none());
        assert!(Endpoint::parse("not a url").is_none());
    }

    #[test]
    fn the_default_port_is_not_in_the_host_header() {
        let e = Endpoint::parse("http://example.com:80/hooks").unwrap();
        assert_eq!(e.uri, "http://example.com/hooks");
        assert_eq!(e.host, "example.com");
        assert!(e.authorization.is_none());
        let e = Endpoint::parse("https://[::1]:9000").unwrap();
        assert_eq!(e.uri, "https://[::1]:9000/");
        assert_eq!(e.origin, "/");
        assert_eq!(e.host, "[::1]:9000");
    }

    #[test]
    fn a_user_without_a_password_is_sent_with_an_empty_one() {
        let e = Endpoint::parse("http://alice@example.com/").unwrap();
        // base64 of "alice:"
        assert_eq!(e.authorization.unwrap(), "Basic YWxpY2U6");
        assert_eq!(e.uri, "http://example.com/");
    }

    #[test]
    fn an_international_name_is_sent_in_its_ascii_form() {
        let e = Endpoint::parse("https://bücher.example/").unwrap();
        assert_eq!(e.host, "xn--bcher-kva.example");
    }
}
