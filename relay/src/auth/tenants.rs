//! The tenant table: every tenant's keys (digests, with their expiry) and
//! what each tenant may do. A request's tenant is the tenant whose key it
//! presents, never a name it gives.
//!
//! A presented key is hashed with SHA-256 and compared with every stored
//! digest, each comparison looking at every byte and none ending the loop
//! early, so the time taken says nothing about which digest came close.
//! Expiry is checked after, against the wall clock at the request.

use std::sync::Arc;
use std::time::SystemTime;

use super::bearer::{Bearer, Unauthorized};
use crate::config::Config;
use crate::config::digest::KeyDigest;

/// A tenant as a request authenticated with its key sees it.
#[derive(Debug)]
pub(crate) struct Account {
    /// The tenant's name: its quota, idempotency keys and dead letters go by it.
    pub name: Arc<str>,
    /// The destinations it may post to; `None`: every one.
    destinations: Option<Vec<Arc<str>>>,
    /// The applications it may post events for; `None`: every one, or
    /// none when `destinations` limits it (see [`Account::may_post_for`]).
    applications: Option<Vec<Arc<str>>>,
    /// Whether it has a quota (its own rate, or `tenant_rate`); without
    /// one it is not limited.
    pub limited: bool,
}

impl Account {
    /// Whether it may post events for application `app`: one it lists;
    /// without `applications`, any, unless it is limited to some
    /// `destinations` (then none: a tenant held to some receivers does not
    /// reach every customer's endpoints by events).
    pub(crate) fn may_post_for(&self, app: &str) -> bool {
        match &self.applications {
            Some(all) => all.iter().any(|a| &**a == app),
            None => self.destinations.is_none(),
        }
    }

    /// The destinations it may post to, when it is held to some: its
    /// `destinations`, else its `applications`' endpoints; `None`: every
    /// one.
    pub(crate) fn within(&self) -> Option<crate::catalog::Within<'_>> {
        match (&self.destinations, &self.applications) {
            (Some(names), _) => Some(crate::catalog::Within::Names(names)),
            (None, Some(apps)) => Some(crate::catalog::Within::Applications(apps)),
            (None, None) => None,
        }
    }

    /// Whether it may post to `destination` (an endpoint of application
    /// `app`, if `Some`): one it lists; without `destinations`, any,
    /// unless it is limited to some `applications` (then only their
    /// endpoints: a tenant held to some customers does not reach the
    /// others' endpoints, nor every receiver, by name).
    pub(crate) fn may_use(&self, destination: &str, app: Option<&str>) -> bool {
        match (&self.destinations, &self.applications) {
            (Some(all), _) => all.iter().any(|d| &**d == destination),
            (None, Some(apps)) => app.is_some_and(|app| apps.iter().any(|a| &**a == app)),
            (None, None) => true,
        }
    }
}

/// One key: its digest, its expiry, and whose it is (an index).
struct Key {
    digest: KeyDigest,
    expires_at: Option<SystemTime>,
    account: usize,
}

/// Every tenant and key.
pub(crate) struct Tenants {
    accounts: Vec<Arc<Account>>,
    keys: Vec<Key>,
}

impl Tenants {
    /// The table of `cfg`'s `[[tenants]]`; `None` when there are none (an
    /// open relay).
    pub(crate) fn new(cfg: &Config) -> Option<Tenants> {
        if cfg.tenants.is_empty() {
            return None;
        }
        let mut accounts = Vec::with_capacity(cfg.tenants.len());
        let mut keys = Vec::new();
        for (i, t) in cfg.tenants.iter().enumerate() {
            accounts.push(Arc::new(Account {
                name: Arc::from(t.name.as_str()),
                destinations: t
                    .destinations
                    .as_ref()
                    .map(|d| d.iter().map(|n| Arc::from(n.as_str())).collect()),
                applications: t
                    .applications
                    .as_ref()
                    .map(|d| d.iter().map(|n| Arc::from(n.as_str())).collect()),
                limited: t.rate.is_some() || cfg.settings.tenant_rate.is_some(),
            }));
            keys.extend(t.keys.iter().map(|k| Key {
                digest: k.digest,
                expires_at: k.expires_at,
                account: i,
            }));
        }
        Some(Tenants { accounts, keys })
    }

    /// The tenant whose key `presented` is, if the key has not expired at `now`.
    pub(crate) fn authenticate(
        &self,
        presented: &Bearer,
        now: SystemTime,
    ) -> Result<Arc<Account>, Unauthorized> {
        let digest = presented.digest();
        // Every digest is compared (no early exit); the match, if any, is
        // kept without a branch on the comparison: index + 1, or 0.
        let mut found = 0usize;
        for (i, key) in self.keys.iter().enumerate() {
            let hit = usize::from(key.digest.same(digest));
            found |= hit.wrapping_neg() & (i + 1);
        }
        let key = found
            .checked_sub(1)
            .and_then(|i| self.keys.get(i))
            .ok_or(Unauthorized::Unknown)?;
        if key.expires_at.is_some_and(|at| at <= now) {
            return Err(Unauthorized::Expired);
        }
        self.accounts
            .get(key.account)
            .cloned()
            .ok_or(Unauthorized::Unknown)
    }

    /// Every tenant, in configuration order.
    #[cfg(test)]
    pub(crate) fn accounts(&self) -> &[Arc<Account>] {
        &self.accounts
    }
}

#[cfg(test)]
mod tests {
    use super::Account;
    use std::sync::Arc;

    #[test]
    fn a_tenant_held_to_destinations_posts_events_only_for_applications_it_names() {
        let account = |destinations: Option<&[&str]>, applications: Option<&[&str]>| Account {
            name: Arc::from("t"),
            destinations: destinations.map(|d| d.iter().map(|n| Arc::from(*n)).collect()),
            applications: applications.map(|a| a.iter().map(|n| Arc::from(*n)).collect()),
            limited: false,
        };
        assert!(account(None, None).may_post_for("acme"), "unrestricted");
        assert!(!account(Some(&["billing"]), None).may_post_for("acme"));
        assert!(account(Some(&["billing"]), Some(&["acme"])).may_post_for("acme"));
        assert!(!account(None, Some(&["acme"])).may_post_for("globex"));
    }

    use super::*;
    use axum::http::{HeaderMap, HeaderValue, header};
    use std::time::Duration;

    fn bearer(key: &str) -> Bearer {
        let mut h = HeaderMap::new();
        let v = HeaderValue::from_str(&format!("Bearer {key}")).unwrap();
        h.insert(header::AUTHORIZATION, v);
        Bearer::from_headers(&h).unwrap()
    }

    fn table() -> (Tenants, SystemTime) {
        let now = SystemTime::now();
        let key = |k: &str, expires_at| Key {
            digest: KeyDigest::of(k.as_bytes()),
            expires_at,
            account: 0,
        };
        let account = |name: &str, destinations: Option<Vec<Arc<str>>>| {
            Arc::new(Account {
                name: Arc::from(name),
                destinations,
                applications: None,
                limited: false,
            })
        };
        let tenants = Tenants {
            accounts: vec![
                account("acme", Some(vec![Arc::from("billing")])),
                account("globex", None),
            ],
            keys: vec![
                key("old", Some(now - Duration::from_secs(1))),
                key("new", Some(now + Duration::from_secs(3600))),
                Key {
                    account: 1,
                    ..key("globex-key", None)
                },
            ],
        };
        (tenants, now)
    }

    #[test]
    fn a_key_finds_its_tenant_until_it_expires() {
        let (t, now) = table();
        assert_eq!(&*t.authenticate(&bearer("new"), now).unwrap().name, "acme");
        assert_eq!(
            &*t.authenticate(&bearer("globex-key"), now).unwrap().name,
            "globex"
        );
        assert_eq!(
            t.authenticate(&bearer("old"), now).unwrap_err(),
            Unauthorized::Expired
        );
        assert_eq!(
            t.authenticate(&bearer("nobody"), now).unwrap_err(),
            Unauthorized::Unknown
        );
        let later = now + Duration::from_secs(7200);
        assert_eq!(
            t.authenticate(&bearer("new"), later).unwrap_err(),
            Unauthorized::Expired
        );
    }

    #[test]
    fn destinations_limit_a_tenant() {
        let (t, _) = table();
        let acme = &t.accounts()[0];
        assert!(acme.may_use("billing", None) && !acme.may_use("shipping", None));
        assert!(t.accounts()[1].may_use("anything", None));
    }

    #[test]
    fn applications_limit_a_tenant_by_name_too() {
        let account = |destinations: Option<&[&str]>, applications: Option<&[&str]>| Account {
            name: Arc::from("t"),
            destinations: destinations.map(|d| d.iter().map(|&n| Arc::from(n)).collect()),
            applications: applications.map(|a| a.iter().map(|&n| Arc::from(n)).collect()),
            limited: false,
        };
        // Held to one customer: its endpoints only, by events or by name.
        let shop = account(None, Some(&["shop"]));
        assert!(shop.may_post_for("shop") && !shop.may_post_for("other"));
        assert!(shop.may_use("shop-orders", Some("shop")));
        assert!(!shop.may_use("other-orders", Some("other")));
        assert!(!shop.may_use("plain", None));
        // A list of destinations is what it says, endpoints or not.
        let listed = account(Some(&["other-orders"]), Some(&["shop"]));
        assert!(listed.may_use("other-orders", Some("other")));
        assert!(!listed.may_use("shop-orders", Some("shop")));
        // Neither: every destination.
        assert!(account(None, None).may_use("other-orders", Some("other")));
    }
}
