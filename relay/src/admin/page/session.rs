//! Signing a browser in: a browser cannot send `Authorization: Bearer`,
//! so the page's form takes the admin token once and sets it (hex) as the
//! cookie [`COOKIE`] (`HttpOnly`, `SameSite=Strict`, `Secure` over TLS),
//! checked as the bearer token is. A request that changes something and
//! says where it comes from (`Origin`, as every browser does) must come
//! from the admin listener itself.

use axum::http::{HeaderMap, HeaderValue, header};

use crate::config::digest::KeyDigest;

/// The cookie holding the admin token, hex-encoded.
pub const COOKIE: &str = "dripfeed_admin";

/// The token the cookie holds, if any (its bytes).
fn cookie_token(headers: &HeaderMap) -> Option<Vec<u8>> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == COOKIE).then(|| hex_decode(value)).flatten()
        })
}

/// Whether `headers` carry the cookie of `token`.
pub fn signed_in(headers: &HeaderMap, token: &KeyDigest) -> bool {
    cookie_token(headers).is_some_and(|t| KeyDigest::of(&t).same(token))
}

/// Whether a request may change something: without `Origin` (not a
/// browser), or with the listener's own (its host and port as `Host` says).
pub fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let authority = origin.to_str().ok().and_then(|o| {
        o.strip_prefix("http://")
            .or_else(|| o.strip_prefix("https://"))
    });
    matches!((authority, host), (Some(a), Some(h)) if a.eq_ignore_ascii_case(h))
}

/// The `Set-Cookie` signing a browser in with `token`.
pub fn set_cookie(token: &[u8], tls: bool) -> Option<HeaderValue> {
    let secure = if tls { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict{secure}",
        hex_encode(token)
    ))
    .ok()
}

fn hex_encode(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn hex_decode(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(k.clone(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn the_cookie_signs_in_with_the_token_only() {
        let token = KeyDigest::of(b"s3cret token");
        let set = set_cookie(b"s3cret token", true).unwrap();
        let set = set.to_str().unwrap();
        assert!(
            set.contains("HttpOnly") && set.contains("SameSite=Strict") && set.ends_with("Secure")
        );
        let value = set.split(';').next().unwrap();
        let ok = headers(&[(header::COOKIE, &format!("a=b; {value}"))]);
        assert!(signed_in(&ok, &token));
        let other = set_cookie(b"guess", false).unwrap();
        let other = other
            .to_str()
            .unwrap()
            .split(';')
            .next()
            .unwrap()
            .to_owned();
        assert!(!signed_in(&headers(&[(header::COOKIE, &other)]), &token));
        for bad in ["dripfeed_admin=zz", "dripfeed_admin=abc", "other=00"] {
            assert!(
                !signed_in(&headers(&[(header::COOKIE, bad)]), &token),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_change_from_another_origin_is_refused() {
        let from = |origin: Option<&str>| {
            let mut pairs = vec![(header::HOST, "127.0.0.1:8090")];
            pairs.extend(origin.map(|o| (header::ORIGIN, o)));
            same_origin(&headers(&pairs))
        };
        assert!(from(None), "no Origin: not a browser");
        assert!(from(Some("http://127.0.0.1:8090")));
        assert!(from(Some("https://127.0.0.1:8090")));
        for origin in ["http://evil.example", "http://127.0.0.1:8091", "null"] {
            assert!(!from(Some(origin)), "{origin}");
        }
    }
}
