//! Tenants: who may post, with which keys, to which destinations, at what
//! rate. They are `[[tenants]]` tables of the `--config` file, each with
//! `[[tenants.keys]]` (the hex SHA-256 of an API key, never the key, and an
//! optional RFC 3339 expiry), so keys rotate: a tenant holds several, each
//! ending when it says.
//!
//! ```toml
//! [[tenants]]
//! name = "acme"
//! rate = 20                 # optional: overrides tenant_rate / tenant_burst
//! burst = 20
//! destinations = ["billing"]   # optional: absent, every destination
//! applications = ["acme"]      # optional: absent, every application's events
//! [[tenants.keys]]
//! sha256 = "…"              # dripfeed-relay hash-key prints it
//! expires_at = "2027-01-01T00:00:00Z"
//! ```
//!
//! Read like `[[destinations]]`: every error is collected, each with its
//! key (`tenants[0].keys[1].sha256`) and line.

use std::path::Path;
use std::time::SystemTime;

use toml::de::{DeTable, DeValue};

use super::destinations::Destination;
use super::error::{ConfigError, Origin};
use super::subscription::valid_name;
use super::value::{Value, quoted};
use crate::config::digest::KeyDigest;

/// The keys a tenant table may have.
pub(super) const FIELDS: [&str; 6] = [
    "name",
    "rate",
    "burst",
    "destinations",
    "applications",
    "keys",
];

/// The keys a key table may have.
pub(super) const KEY_FIELDS: [&str; 2] = ["sha256", "expires_at"];

/// One configured tenant.
#[derive(Clone, Debug)]
pub(crate) struct Tenant {
    /// Its name: what its quota, its idempotency keys and its dead letters
    /// go by (1 to 64 of `A-Z a-z 0-9 . _ -`).
    pub name: String,
    /// Its own sustained rate, webhooks/s, over `tenant_rate`.
    pub rate: Option<f64>,
    /// Its own burst, over `tenant_burst`.
    pub burst: Option<f64>,
    /// The destinations it may post to; `None`: every one, unless
    /// `applications` is given (then only their endpoints).
    pub destinations: Option<Vec<String>>,
    /// The applications it may post events for; `None`: every one.
    pub applications: Option<Vec<String>>,
    /// Its API keys.
    pub keys: Vec<TenantKey>,
    /// Where it was configured.
    pub origin: Origin,
}

/// One API key of a tenant.
#[derive(Clone, Debug)]
pub(crate) struct TenantKey {
    /// The SHA-256 of the key.
    pub digest: KeyDigest,
    /// When it stops working, if it does.
    pub expires_at: Option<SystemTime>,
    /// Where it was configured.
    pub origin: Origin,
}

/// A file being read: its path and text, for lines.
struct Doc<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Doc<'_> {
    fn at(&self, offset: usize) -> Origin {
        Origin::at(self.path, self.text, offset)
    }
}

/// `[[tenants]]` of the `--config` file, each table checked on its own
/// (names, rates, digests, expiries); [`check`] then checks them together.
pub(crate) fn from_toml(
    value: &toml::Spanned<DeValue<'_>>,
    path: &Path,
    text: &str,
    errors: &mut Vec<ConfigError>,
) -> Vec<Tenant> {
    let doc = Doc { path, text };
    let Some(items) = value.get_ref().as_array() else {
        let found = value.get_ref().type_str();
        errors.push(ConfigError::new(
            "tenants",
            Some(doc.at(value.span().start)),
            format!("expected an array of tables ([[tenants]]), found {found}"),
        ));
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("tenants[{i}]");
        let origin = doc.at(item.span().start);
        match item.get_ref().as_table() {
            Some(table) => out.extend(tenant(table, &at, origin, &doc, errors)),
            None => errors.push(ConfigError::new(at, Some(origin), "expected a table")),
        }
    }
    out
}

/// One `[[tenants]]` table.
fn tenant(
    table: &DeTable<'_>,
    at: &str,
    origin: Origin,
    doc: &Doc<'_>,
    errors: &mut Vec<ConfigError>,
) -> Option<Tenant> {
    let before = errors.len();
    let mut t = Tenant {
        name: String::new(),
        rate: None,
        burst: None,
        destinations: None,
        applications: None,
        keys: Vec::new(),
        origin: origin.clone(),
    };
    let mut named = false;
    for (key, value) in table.iter() {
        let here = doc.at(key.span().start);
        let key = key.get_ref().as_ref();
        let v = value.get_ref();
        let read = match key {
            "name" => String::from_toml(v).and_then(|n| {
                named = true;
                if !valid_name(&n) {
                    return Err(format!("{n:?}: 1 to 64 of A-Z a-z 0-9 . _ -"));
                }
                t.name = n;
                Ok(())
            }),
            "rate" | "burst" => f64::from_toml(v).and_then(|r| {
                if !(r.is_finite() && r > 0.0) {
                    return Err("must be a number above 0".into());
                }
                match key {
                    "rate" => t.rate = Some(r),
                    _ => t.burst = Some(r),
                }
                Ok(())
            }),
            "destinations" => names(v).map(|d| t.destinations = Some(d)),
            "applications" => names(v).map(|a| t.applications = Some(a)),
            "keys" => {
                t.keys = keys(value, &format!("{at}.keys"), doc, errors);
                Ok(())
            }
            other => Err(format!(
                "unknown key {other:?} (a tenant has {})",
                FIELDS.join(", ")
            )),
        };
        if let Err(e) = read {
            errors.push(ConfigError::new(format!("{at}.{key}"), Some(here), e));
        }
    }
    if !named {
        errors.push(ConfigError::new(
            format!("{at}.name"),
            Some(origin.clone()),
            "missing",
        ));
    }
    if t.keys.is_empty() && errors.len() == before {
        errors.push(ConfigError::new(
            format!("{at}.keys"),
            Some(origin),
            "a tenant needs at least one [[tenants.keys]] table (sha256 = the key's digest)",
        ));
    }
    (errors.len() == before).then_some(t)
}

/// An array of destination names.
fn names(v: &DeValue<'_>) -> Result<Vec<String>, String> {
    let DeValue::Array(items) = v else {
        return Err(super::value::expected("an array of destination names", v));
    };
    items
        .iter()
        .map(|item| match item.get_ref() {
            DeValue::String(s) if valid_name(s) => Ok(s.to_string()),
            DeValue::String(s) => Err(format!("{s:?} is not a destination name")),
            other => Err(super::value::expected("a destination name", other)),
        })
        .collect()
}

/// `[[tenants.keys]]`: each with its digest and optional expiry.
fn keys(
    value: &toml::Spanned<DeValue<'_>>,
    at: &str,
    doc: &Doc<'_>,
    errors: &mut Vec<ConfigError>,
) -> Vec<TenantKey> {
    let Some(items) = value.get_ref().as_array() else {
        errors.push(ConfigError::new(
            at,
            Some(doc.at(value.span().start)),
            "expected an array of tables ([[tenants.keys]])",
        ));
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("{at}[{i}]");
        let origin = doc.at(item.span().start);
        let Some(table) = item.get_ref().as_table() else {
            errors.push(ConfigError::new(at, Some(origin), "expected a table"));
            continue;
        };
        let before = errors.len();
        let (mut digest, mut expires_at, mut given) = (None, None, false);
        for (key, value) in table.iter() {
            let here = doc.at(key.span().start);
            let key = key.get_ref().as_ref();
            let read = match key {
                "sha256" => {
                    given = true;
                    KeyDigest::from_toml(value.get_ref()).map(|d| digest = Some(d))
                }
                "expires_at" => expiry(value.get_ref()).map(|t| expires_at = Some(t)),
                other => Err(format!(
                    "unknown key {other:?} (a key has {})",
                    KEY_FIELDS.join(", ")
                )),
            };
            if let Err(e) = read {
                errors.push(ConfigError::new(format!("{at}.{key}"), Some(here), e));
            }
        }
        match digest {
            Some(digest) if errors.len() == before => out.push(TenantKey {
                digest,
                expires_at,
                origin,
            }),
            Some(_) => {}
            None if given => {}
            None => errors.push(ConfigError::new(
                format!("{at}.sha256"),
                Some(origin),
                "missing",
            )),
        }
    }
    out
}

/// An RFC 3339 time in UTC: a string, or a TOML date-time.
fn expiry(v: &DeValue<'_>) -> Result<SystemTime, String> {
    let text = match v {
        DeValue::String(s) => s.to_string(),
        DeValue::Datetime(d) => d.to_string(),
        other => return Err(super::value::expected("an RFC 3339 time", other)),
    };
    humantime::parse_rfc3339(text.trim()).map_err(|e| {
        format!(
            "expected an RFC 3339 time in UTC such as \"2027-01-01T00:00:00Z\", found {text:?} ({e})"
        )
    })
}

/// The rules between tenants, and with the rest of the configuration:
/// unique names, no key digest given twice, destinations that exist, and a
/// burst only with a rate (its own or `tenant_rate`).
pub(crate) fn check(
    tenants: &[Tenant],
    destinations: &[Destination],
    tenant_rate: Option<f64>,
    errors: &mut Vec<ConfigError>,
) {
    for (i, t) in tenants.iter().enumerate() {
        let at = format!("tenants[{i}]");
        if let Some(first) = tenants[..i].iter().find(|e| e.name == t.name) {
            errors.push(ConfigError::new(
                format!("{at}.name"),
                Some(t.origin.clone()),
                format!(
                    "tenant {:?} configured twice, first at {}",
                    t.name, first.origin
                ),
            ));
        }
        for (j, key) in t.keys.iter().enumerate() {
            let seen_before = tenants[..=i].iter().enumerate().find_map(|(n, other)| {
                let keys = if n == i {
                    &other.keys[..j]
                } else {
                    &other.keys[..]
                };
                keys.iter()
                    .find(|k| k.digest == key.digest)
                    .map(|k| (n, other, k))
            });
            if let Some((n, other, first)) = seen_before {
                let whose = match n == i {
                    true => "this tenant".to_owned(),
                    false => format!("tenant {:?}", other.name),
                };
                errors.push(ConfigError::new(
                    format!("{at}.keys[{j}].sha256"),
                    Some(key.origin.clone()),
                    format!(
                        "this key is already {whose}'s, at {}: a key belongs to one tenant, once",
                        first.origin
                    ),
                ));
            }
        }
        for name in t.destinations.iter().flatten() {
            if !destinations.iter().any(|d| d.name == *name) {
                errors.push(ConfigError::new(
                    format!("{at}.destinations"),
                    Some(t.origin.clone()),
                    format!("no destination {name:?} is configured"),
                ));
            }
        }
        if t.burst.is_some() && t.rate.is_none() && tenant_rate.is_none() {
            errors.push(ConfigError::new(
                format!("{at}.burst"),
                Some(t.origin.clone()),
                "a burst needs a rate: give the tenant a rate, or set tenant_rate",
            ));
        }
    }
}

impl Tenant {
    /// The tenant as `[[tenants]]` (and `[[tenants.keys]]`) lines.
    pub(crate) fn shown(&self) -> Vec<String> {
        let mut out = vec![format!("name = {}", quoted(&self.name))];
        out.extend(self.rate.map(|r| format!("rate = {}", r.show())));
        out.extend(self.burst.map(|b| format!("burst = {}", b.show())));
        if let Some(d) = &self.destinations {
            let names: Vec<String> = d.iter().map(|n| quoted(n)).collect();
            out.push(format!("destinations = [{}]", names.join(", ")));
        }
        if let Some(a) = &self.applications {
            let names: Vec<String> = a.iter().map(|n| quoted(n)).collect();
            out.push(format!("applications = [{}]", names.join(", ")));
        }
        for k in &self.keys {
            out.push("[[tenants.keys]]".into());
            out.push(format!("sha256 = {}", k.digest.show()));
            if let Some(t) = k.expires_at {
                let at = humantime::format_rfc3339_seconds(t).to_string();
                out.push(format!("expires_at = {}", quoted(&at)));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    const B: &str = "3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d";

    fn read(text: &str) -> (Vec<Tenant>, Vec<String>) {
        let mut errors = Vec::new();
        let (doc, parse_errors) = DeTable::parse_recoverable(text);
        assert!(parse_errors.is_empty(), "{parse_errors:?}");
        let mut out = Vec::new();
        for (key, value) in doc.get_ref().iter() {
            if key.get_ref().as_ref() == "tenants" {
                out = from_toml(value, Path::new("r.toml"), text, &mut errors);
            }
        }
        (out, errors.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn a_tenant_with_keys_reads() {
        let text = format!(
            "[[tenants]]\nname = \"acme\"\nrate = 20\nburst = 20\ndestinations = [\"billing\"]\n\
             [[tenants.keys]]\nsha256 = \"{A}\"\nexpires_at = \"2027-01-01T00:00:00Z\"\n\
             [[tenants.keys]]\nsha256 = \"{B}\"\n"
        );
        let (t, errors) = read(&text);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(t[0].name, "acme");
        assert_eq!((t[0].rate, t[0].burst), (Some(20.0), Some(20.0)));
        assert_eq!(t[0].keys.len(), 2);
        assert!(t[0].keys[0].expires_at.is_some() && t[0].keys[1].expires_at.is_none());
        assert!(
            t[0].shown()
                .contains(&"expires_at = \"2027-01-01T00:00:00Z\"".to_owned())
        );
    }

    #[test]
    fn every_bad_field_is_named_with_its_line() {
        let text = "[[tenants]]\nname = \"a b\"\nrate = 0\ncolour = 1\n[[tenants.keys]]\nsha256 = \"abc\"\n\
             expires_at = \"next week\"\n\n[[tenants]]\nname = \"ok\"\n";
        let (t, errors) = read(text);
        assert!(t.is_empty());
        assert_eq!(
            errors,
            // A table's keys are read in name order.
            [
                "r.toml:4: tenants[0].colour: unknown key \"colour\" (a tenant has name, rate, burst, destinations, applications, keys)",
                "r.toml:7: tenants[0].keys[0].expires_at: expected an RFC 3339 time in UTC such as \"2027-01-01T00:00:00Z\", found \"next week\" (timestamp format is invalid)",
                "r.toml:6: tenants[0].keys[0].sha256: expected a SHA-256 digest, 64 hex characters (dripfeed-relay hash-key prints one), found 3 characters",
                "r.toml:2: tenants[0].name: \"a b\": 1 to 64 of A-Z a-z 0-9 . _ -",
                "r.toml:3: tenants[0].rate: must be a number above 0",
                "r.toml:9: tenants[1].keys: a tenant needs at least one [[tenants.keys]] table (sha256 = the key's digest)",
            ]
        );
    }

    #[test]
    fn names_keys_and_destinations_are_checked_together() {
        let text = format!(
            "[[tenants]]\nname = \"a\"\ndestinations = [\"nowhere\"]\n[[tenants.keys]]\nsha256 = \"{A}\"\n\
             [[tenants]]\nname = \"a\"\nburst = 5\n[[tenants.keys]]\nsha256 = \"{A}\"\n"
        );
        let (t, errors) = read(&text);
        assert!(errors.is_empty(), "{errors:?}");
        let mut errors = Vec::new();
        check(&t, &[], None, &mut errors);
        let keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "tenants[0].destinations",
                "tenants[1].name",
                "tenants[1].keys[0].sha256",
                "tenants[1].burst"
            ]
        );
        assert!(
            errors[2]
                .message
                .contains("tenant \"a\"'s, at file r.toml:4"),
            "{}",
            errors[2]
        );
    }
}
