//! `Authorization: Bearer KEY` (RFC 6750): the presented key, hashed at
//! once, and the 401 every refusal of it is. [`Bearer`] is an axum
//! extractor, so any route can require a key by taking one.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;

use crate::config::digest::KeyDigest;
use crate::domain::problem::problem;

/// The realm named in `WWW-Authenticate`.
const REALM: &str = "dripfeed-relay";

/// A key presented as `Authorization: Bearer KEY`, kept only as its digest.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bearer(KeyDigest);

/// Why a request is not authenticated: always a 401.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unauthorized {
    /// No `Authorization` header.
    Missing,
    /// An `Authorization` header that is not `Bearer KEY` (or given twice).
    Malformed,
    /// A key no tenant has.
    Unknown,
    /// A key past its `expires_at`.
    Expired,
}

impl std::fmt::Display for Unauthorized {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Unauthorized::Missing => "an API key is needed: send Authorization: Bearer KEY",
            Unauthorized::Malformed => "the Authorization header is not Bearer KEY",
            Unauthorized::Unknown => "the API key is not known",
            Unauthorized::Expired => "the API key has expired: use the key that replaced it",
        })
    }
}

impl std::error::Error for Unauthorized {}

impl Unauthorized {
    /// The 401: a problem body and `WWW-Authenticate: Bearer` (with
    /// `error="invalid_token"` when a key was sent but not taken).
    pub(crate) fn response(self) -> Response {
        self.answer(self.to_string())
    }

    /// The 401 of the admin listener, whose key is the admin token.
    pub(crate) fn admin_response(self) -> Response {
        let detail = match self {
            Unauthorized::Missing => "the admin token is needed: send Authorization: Bearer TOKEN",
            Unauthorized::Malformed => "the Authorization header is not Bearer TOKEN",
            Unauthorized::Unknown | Unauthorized::Expired => "that is not the admin token",
        };
        self.answer(detail.to_owned())
    }

    fn answer(self, detail: String) -> Response {
        let challenge = match self {
            Unauthorized::Missing => format!("Bearer realm=\"{REALM}\""),
            _ => format!("Bearer realm=\"{REALM}\", error=\"invalid_token\""),
        };
        let mut resp = problem(StatusCode::UNAUTHORIZED, "unauthorized", detail, Vec::new());
        if let Ok(v) = HeaderValue::from_str(&challenge) {
            resp.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        resp
    }
}

impl Bearer {
    /// The key a request presents.
    pub(crate) fn from_headers(headers: &HeaderMap) -> Result<Bearer, Unauthorized> {
        let mut all = headers.get_all(header::AUTHORIZATION).iter();
        let value = all.next().ok_or(Unauthorized::Missing)?;
        if all.next().is_some() {
            return Err(Unauthorized::Malformed);
        }
        let bytes = value.as_bytes();
        let scheme = b"bearer ";
        let key = match bytes.get(..scheme.len()) {
            Some(s) if s.eq_ignore_ascii_case(scheme) => bytes[scheme.len()..].trim_ascii(),
            _ => return Err(Unauthorized::Malformed),
        };
        if key.is_empty() {
            return Err(Unauthorized::Malformed);
        }
        Ok(Bearer(KeyDigest::of(key)))
    }

    /// The presented key's digest.
    pub(crate) fn digest(&self) -> &KeyDigest {
        &self.0
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Bearer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Bearer::from_headers(&parts.headers).map_err(Unauthorized::response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn bearer_keys_are_read_or_refused() {
        let key = Bearer::from_headers(&with(&["Bearer  s3cret "])).unwrap();
        assert!(key.digest().same(&KeyDigest::of(b"s3cret")));
        assert!(Bearer::from_headers(&with(&["bearer s3cret"])).is_ok());
        assert_eq!(
            Bearer::from_headers(&HeaderMap::new()).unwrap_err(),
            Unauthorized::Missing
        );
        for bad in [
            &["Basic czNjcmV0"][..],
            &["Bearer "],
            &["Bearer"],
            &["Bearer a", "Bearer b"],
        ] {
            assert_eq!(
                Bearer::from_headers(&with(bad)).unwrap_err(),
                Unauthorized::Malformed,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_refusal_is_a_401_with_a_challenge() {
        let resp = Unauthorized::Expired.response();
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
        let challenge = resp.headers()[header::WWW_AUTHENTICATE].to_str().unwrap();
        assert!(challenge.starts_with("Bearer "), "{challenge}");
        assert_eq!(
            resp.headers()[header::CONTENT_TYPE],
            "application/problem+json"
        );
    }
}
