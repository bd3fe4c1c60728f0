//! What a request names in its headers, read before anything is held: its
//! `Idempotency-Key` and its tenant. Both are at most [`MAX_NAME_BYTES`];
//! a key must be visible ASCII (spaces around it are trimmed, none may be
//! inside it), or the request is refused, never taken as keyless. A tenant that is absent or
//! unreadable is the one [`DEFAULT_TENANT`], charged like any other.

use axum::http::HeaderMap;

/// The longest `Idempotency-Key` or tenant name taken, bytes.
pub(crate) const MAX_NAME_BYTES: usize = 256;

/// The tenant of a request that names none readable.
pub(crate) const DEFAULT_TENANT: &str = "default";

/// Why a name is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BadName {
    /// Empty or only spaces.
    Blank,
    /// Bytes other than visible ASCII and spaces.
    Unreadable,
    /// Over [`MAX_NAME_BYTES`].
    TooLong,
    /// A header that may be given once, given more than once.
    Twice,
}

impl std::fmt::Display for BadName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BadName::Blank => "is empty",
            BadName::Unreadable => "is not visible ASCII",
            BadName::TooLong => "is longer than 256 bytes",
            BadName::Twice => "is given more than once",
        })
    }
}

/// A request's tenant as intake resolves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tenant {
    /// The name it gave, if readable.
    pub named: Option<String>,
}

impl Tenant {
    /// The name its quota and its keys go by: its own, or [`DEFAULT_TENANT`].
    pub(crate) fn scope(&self) -> &str {
        self.named.as_deref().unwrap_or(DEFAULT_TENANT)
    }
}

/// Visible ASCII and spaces, not blank, at most [`MAX_NAME_BYTES`].
fn readable(bytes: &[u8]) -> Result<&str, BadName> {
    if bytes.len() > MAX_NAME_BYTES {
        return Err(BadName::TooLong);
    }
    if !bytes.iter().all(|b| (0x20..=0x7e).contains(b)) {
        return Err(BadName::Unreadable);
    }
    let text = std::str::from_utf8(bytes).map_err(|_| BadName::Unreadable)?;
    match text.trim_matches(' ') {
        "" => Err(BadName::Blank),
        t => Ok(t),
    }
}

/// The `Idempotency-Key`: `None` without the header, an error for one that
/// is blank, unreadable or too long (or given twice).
pub(crate) fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, BadName> {
    let mut all = headers.get_all("idempotency-key").iter();
    let Some(first) = all.next() else {
        return Ok(None);
    };
    if all.next().is_some() {
        return Err(BadName::Twice);
    }
    let key = readable(first.as_bytes())?;
    if key.contains(' ') {
        return Err(BadName::Unreadable);
    }
    Ok(Some(key.to_owned()))
}

/// The tenant named by `header`: a name over [`MAX_NAME_BYTES`] is an
/// error; absent, blank or unreadable is the default tenant.
pub(crate) fn tenant(headers: &HeaderMap, header: &str) -> Result<Tenant, BadName> {
    let named = match headers.get(header).map(|v| readable(v.as_bytes())) {
        None | Some(Err(BadName::Blank | BadName::Unreadable | BadName::Twice)) => None,
        Some(Err(BadName::TooLong)) => return Err(BadName::TooLong),
        Some(Ok(name)) => Some(name.to_owned()),
    };
    Ok(Tenant { named })
}

/// FNV-1a: a stable hash of a body across processes and versions (what an
/// idempotency key's request names beside its destination).
pub(crate) fn body_hash(body: &[u8]) -> u64 {
    body.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A tenant's `Idempotency-Key` as one text no other tenant and key can
/// give: the tenant's length first (`4:acme:order-1`), so tenant `a:b` with
/// key `c` and tenant `a` with key `b:c` stay apart.
pub(crate) fn scoped_key(tenant: &str, key: &str) -> String {
    format!("{}:{tenant}:{key}", tenant.len())
}

/// The tenant and key of a [`scoped_key`].
pub(crate) fn unscoped(scoped: &str) -> Option<(&str, &str)> {
    let (len, rest) = scoped.split_once(':')?;
    let len: usize = len.parse().ok()?;
    let tenant = rest.get(..len)?;
    let key = rest.get(len..)?.strip_prefix(':')?;
    Some((tenant, key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn no_tenant_and_key_collide_with_another_pair() {
        assert_ne!(scoped_key("a:b", "c"), scoped_key("a", "b:c"));
        assert_ne!(scoped_key("a", ""), scoped_key("", "a"));
        for (t, k) in [("a:b", "c"), ("a", "b:c"), ("", ""), ("12:x", ":y:")] {
            assert_eq!(unscoped(&scoped_key(t, k)), Some((t, k)));
        }
        assert_eq!(unscoped("9:ab:c"), None);
    }

    fn with(name: &'static str, value: &[u8]) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_bytes(value).unwrap());
        h
    }

    #[test]
    fn keys_are_readable_or_refused() {
        assert_eq!(idempotency_key(&HeaderMap::new()), Ok(None));
        assert_eq!(
            idempotency_key(&with("idempotency-key", b" order-17 ")),
            Ok(Some("order-17".into())),
            "spaces around a key are not part of it"
        );
        assert_eq!(
            idempotency_key(&with("idempotency-key", b"")),
            Err(BadName::Blank)
        );
        assert_eq!(
            idempotency_key(&with("idempotency-key", b"   ")),
            Err(BadName::Blank)
        );
        for bad in [&b"a\tb"[..], b"a b", b"caf\xc3\xa9", b"\xff"] {
            assert_eq!(
                idempotency_key(&with("idempotency-key", bad)),
                Err(BadName::Unreadable)
            );
        }
        let long = vec![b'k'; 257];
        assert_eq!(
            idempotency_key(&with("idempotency-key", &long)),
            Err(BadName::TooLong)
        );
        assert!(idempotency_key(&with("idempotency-key", &long[..256])).is_ok());
        let mut twice = with("idempotency-key", b"alpha");
        twice.append("idempotency-key", HeaderValue::from_static("beta"));
        assert_eq!(idempotency_key(&twice), Err(BadName::Twice));
        assert_eq!(
            BadName::Twice.to_string(),
            "is given more than once",
            "not called unreadable (both are visible ASCII)"
        );
    }

    #[test]
    fn tenants_default_unless_named_readably() {
        let t = |v: &[u8]| tenant(&with("x-tenant", v), "x-tenant");
        assert_eq!(t(b"acme").unwrap().scope(), "acme");
        assert_eq!(t(b"caf\xe9").unwrap().scope(), DEFAULT_TENANT);
        assert_eq!(t(b"").unwrap().named, None);
        assert_eq!(t(&[b't'; 300]), Err(BadName::TooLong));
        let none = tenant(&HeaderMap::new(), "x-tenant").unwrap();
        assert_eq!(none.scope(), DEFAULT_TENANT);
    }
}
