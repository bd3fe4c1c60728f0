//! Signing a browser in: a browser cannot send `Authorization: Bearer`,
//! so the page's form takes the admin token once and the relay answers
//! with a session cookie ([`Session`]): not the token, but an HMAC of the
//! token's digest under a key drawn at start, so the cookie reveals
//! nothing, dies with the process and with a new token (a reload), and is
//! named after the listener's port (cookies are not kept per port).
//! `HttpOnly`, `SameSite=Strict`, and `Secure` with a `__Host-` name over
//! TLS. A request that changes something and says where it comes from
//! (`Origin`, as every browser does) must come from the admin listener
//! itself; without an admin token, a request must name the listener by
//! address or as `localhost` (a page of another site that rebinds its
//! name to this address is refused).

use axum::http::{HeaderMap, HeaderValue, header};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::config::digest::KeyDigest;

/// The admin listener's browser sessions.
pub(crate) struct Session {
    key: [u8; 32],
    name: String,
    tls: bool,
}

impl Session {
    /// Sessions for the admin listener on `port`, over TLS or not; a key
    /// drawn from the system's random source.
    pub(crate) fn new(port: u16, tls: bool) -> Result<Session, String> {
        let mut key = [0u8; 32];
        rustls::crypto::ring::default_provider()
            .secure_random
            .fill(&mut key)
            .map_err(|_| "no random bytes for the status page's sessions".to_owned())?;
        let name = match tls {
            true => format!("__Host-dripfeed_admin_{port}"),
            false => format!("dripfeed_admin_{port}"),
        };
        Ok(Session { key, name, tls })
    }

    /// The cookie's value for `token`: 32 bytes, written and compared (in
    /// constant time) as a key's digest is.
    fn value(&self, token: &KeyDigest) -> Option<KeyDigest> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).ok()?;
        mac.update(token.hex().as_bytes());
        Some(KeyDigest::from_bytes(mac.finalize().into_bytes().into()))
    }

    /// Whether `headers` carry this listener's cookie for `token`.
    pub(crate) fn signed_in(&self, headers: &HeaderMap, token: &KeyDigest) -> bool {
        let Some(want) = self.value(token) else {
            return false;
        };
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| {
                let (name, value) = pair.trim().split_once('=')?;
                (name == self.name).then(|| KeyDigest::parse(value).ok())?
            })
            .any(|got| got.same(&want))
    }

    /// The `Set-Cookie` signing a browser in as the holder of `token`.
    pub(crate) fn set_cookie(&self, token: &KeyDigest) -> Option<HeaderValue> {
        let value = self.value(token)?;
        let secure = if self.tls { "; Secure" } else { "" };
        HeaderValue::from_str(&format!(
            "{}={}; Path=/; HttpOnly; SameSite=Strict{secure}",
            self.name,
            value.hex()
        ))
        .ok()
    }
}

/// Whether `headers` name the listener by an IP address or `localhost`
/// (what a relay without an admin token requires: a name of another site
/// resolving here is DNS rebinding).
pub(crate) fn local_host(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok()
}

/// Whether a request may change something: without `Origin` (not a
/// browser), or with the listener's own (its host and port as `Host` says).
pub(crate) fn same_origin(headers: &HeaderMap) -> bool {
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
    fn the_cookie_is_an_hmac_of_the_token_for_this_process_and_port() {
        let token = KeyDigest::of(b"s3cret token");
        let session = Session::new(8090, true).unwrap();
        let set = session.set_cookie(&token).unwrap();
        let set = set.to_str().unwrap();
        assert!(set.starts_with("__Host-dripfeed_admin_8090="), "{set}");
        assert!(
            set.contains("HttpOnly") && set.contains("SameSite=Strict") && set.ends_with("Secure")
        );
        let token_hex: String = b"s3cret token".iter().map(|b| format!("{b:02x}")).collect();
        assert!(!set.contains(&token_hex), "not the token");
        let value = set.split(';').next().unwrap();
        let ok = headers(&[(header::COOKIE, &format!("a=b; {value}"))]);
        assert!(session.signed_in(&ok, &token));
        assert!(
            !session.signed_in(&ok, &KeyDigest::of(b"another token")),
            "a new token"
        );
        let restarted = Session::new(8090, true).unwrap();
        assert!(!restarted.signed_in(&ok, &token), "another process");
        for bad in [
            "__Host-dripfeed_admin_8090=zz",
            "__Host-dripfeed_admin_8090=abc",
            "other=00",
        ] {
            assert!(
                !session.signed_in(&headers(&[(header::COOKIE, bad)]), &token),
                "{bad}"
            );
        }
        let plain = Session::new(8091, false)
            .unwrap()
            .set_cookie(&token)
            .unwrap();
        assert!(plain.to_str().unwrap().starts_with("dripfeed_admin_8091="));
    }

    #[test]
    fn without_a_token_the_host_must_be_an_address_or_localhost() {
        for host in [
            "127.0.0.1:8090",
            "localhost:8090",
            "LOCALHOST",
            "[::1]:8090",
            "10.0.0.5",
        ] {
            assert!(local_host(&headers(&[(header::HOST, host)])), "{host}");
        }
        for host in [
            "evil.example:8090",
            "relay.internal",
            "127.0.0.1.nip.io:8090",
        ] {
            assert!(!local_host(&headers(&[(header::HOST, host)])), "{host}");
        }
        assert!(!local_host(&HeaderMap::new()));
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
