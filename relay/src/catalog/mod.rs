//! The destinations in force: the configured ones with the admin API's
//! changes over them. Intake reads it for every request (the names a
//! request may use), each delivery for its destination's URL and keys, the
//! admin API to list, change and delete.
//!
//! A destination being deleted stays here, closed, while its throttle
//! drains: intake answers 404 for it at once, and what it still holds is
//! delivered to its URL until it is forgotten.

pub mod state;

use std::collections::HashMap;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::config::Destination;

/// Where a destination's deliveries go, and its signing keys.
#[derive(Debug)]
pub struct Target {
    /// Its URL.
    pub url: String,
    /// The bytes of its `whsec_` secrets: the secret, then the previous one
    /// while it is being replaced; none: unsigned.
    pub secrets: Vec<Arc<[u8]>>,
}

impl Target {
    fn of(d: &Destination) -> Target {
        Target {
            url: d.url.as_str().to_owned(),
            secrets: [&d.secret, &d.previous_secret]
                .into_iter()
                .flatten()
                .map(|s| s.key())
                .collect(),
        }
    }
}

/// One destination in force.
struct Entry {
    dest: Destination,
    target: Arc<Target>,
    /// False while it is being deleted (intake no longer takes webhooks
    /// for it).
    open: bool,
    /// Its place in the listing: configuration order, then creation.
    seq: u64,
}

/// A destination as the admin API lists it.
#[derive(Clone, Debug)]
pub struct Listed {
    /// As configured (or as the admin API set it).
    pub dest: Destination,
    /// False while it is being deleted.
    pub open: bool,
}

/// The table (see the [module](self) docs).
#[derive(Default)]
pub struct Catalog {
    table: RwLock<HashMap<Arc<str>, Entry>>,
}

impl Catalog {
    /// The catalog of `destinations`, in their order.
    pub fn new(destinations: &[Destination]) -> Catalog {
        let c = Catalog::default();
        for d in destinations {
            c.put(d.clone());
        }
        c
    }

    fn read(&self) -> RwLockReadGuard<'_, HashMap<Arc<str>, Entry>> {
        self.table.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, HashMap<Arc<str>, Entry>> {
        self.table.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The name of an open destination called `name`.
    pub fn open(&self, name: &str) -> Option<Arc<str>> {
        let table = self.read();
        let (key, e) = table.get_key_value(name)?;
        e.open.then(|| key.clone())
    }

    /// The only open destination `usable` lets through, if exactly one is.
    pub fn only(&self, usable: impl Fn(&str) -> bool) -> Option<Arc<str>> {
        let table = self.read();
        let mut found = table
            .iter()
            .filter(|(name, e)| e.open && usable(name))
            .map(|(name, _)| name);
        match (found.next(), found.next()) {
            (Some(only), None) => Some(only.clone()),
            _ => None,
        }
    }

    /// Destinations held, open or being deleted.
    pub fn held(&self) -> usize {
        self.read().len()
    }

    /// Where `name`'s deliveries go, while it is held (open or draining).
    pub fn target(&self, name: &str) -> Option<Arc<Target>> {
        self.read().get(name).map(|e| e.target.clone())
    }

    /// Every open destination's name and URL (where redriven lines go).
    pub fn targets(&self) -> Vec<(Arc<str>, String)> {
        let table = self.read();
        let mut all: Vec<_> = table.iter().filter(|(_, e)| e.open).collect();
        all.sort_by_key(|(_, e)| e.seq);
        all.into_iter()
            .map(|(n, e)| (n.clone(), e.target.url.clone()))
            .collect()
    }

    /// Every destination held, in listing order.
    pub fn list(&self) -> Vec<Listed> {
        let table = self.read();
        let mut all: Vec<&Entry> = table.values().collect();
        all.sort_by_key(|e| e.seq);
        all.into_iter()
            .map(|e| Listed {
                dest: e.dest.clone(),
                open: e.open,
            })
            .collect()
    }

    /// `name` as held.
    pub fn get(&self, name: &str) -> Option<Listed> {
        self.read().get(name).map(|e| Listed {
            dest: e.dest.clone(),
            open: e.open,
        })
    }

    /// Makes or replaces (and opens) `d`; returns what it replaced.
    pub fn put(&self, d: Destination) -> Option<Destination> {
        let mut table = self.write();
        let seq = match table.get(d.name.as_str()) {
            Some(e) => e.seq,
            None => table.values().map(|e| e.seq + 1).max().unwrap_or(0),
        };
        let entry = Entry {
            target: Arc::new(Target::of(&d)),
            dest: d,
            open: true,
            seq,
        };
        let key: Arc<str> = Arc::from(entry.dest.name.as_str());
        table.insert(key, entry).map(|e| e.dest)
    }

    /// Closes `name` to new webhooks; false if it is not open.
    pub fn close(&self, name: &str) -> bool {
        match self.write().get_mut(name) {
            Some(e) if e.open => {
                e.open = false;
                true
            }
            _ => false,
        }
    }

    /// Forgets `name` once it has drained (if it was not made again).
    pub fn forget(&self, name: &str) {
        let mut table = self.write();
        if table.get(name).is_some_and(|e| !e.open) {
            table.remove(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Fields, Origin};

    fn dest(name: &str, url: &str) -> Destination {
        let fields = Fields {
            name: Some(name.into()),
            url: Some(url.into()),
            ..Fields::default()
        };
        let mut errors = Vec::new();
        fields.check("d", &Origin::Default, &mut errors).unwrap()
    }

    #[test]
    fn a_closed_destination_still_delivers_but_takes_nothing() {
        let c = Catalog::new(&[dest("a", "http://a.example/"), dest("b", "http://b/")]);
        assert_eq!(c.only(|n| n == "a").as_deref(), Some("a"));
        assert_eq!(c.only(|_| true), None, "two are usable");
        assert!(c.close("a"));
        assert!(!c.close("a"), "closed once");
        assert_eq!(c.open("a"), None);
        assert_eq!(c.target("a").unwrap().url, "http://a.example/");
        assert_eq!(c.only(|_| true).as_deref(), Some("b"));
        assert_eq!(c.targets().len(), 1);
        c.forget("a");
        assert!(c.target("a").is_none());
        assert_eq!(c.held(), 1);
    }

    #[test]
    fn a_replaced_destination_keeps_its_place() {
        let c = Catalog::new(&[dest("z", "http://z/"), dest("a", "http://a/")]);
        c.put(dest("m", "http://m/"));
        let old = c.put(dest("z", "http://z2/")).unwrap();
        assert_eq!(old.url.as_str(), "http://z/");
        let names: Vec<_> = c.list().into_iter().map(|l| l.dest.name).collect();
        assert_eq!(names, ["z", "a", "m"]);
        assert_eq!(c.target("z").unwrap().url, "http://z2/");
        c.close("m");
        c.put(dest("m", "http://m2/"));
        c.forget("m");
        assert!(c.open("m").is_some(), "made again before it was forgotten");
    }
}
