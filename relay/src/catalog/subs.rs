//! The subscriptions index: each application's endpoints by the event
//! types they take, so an event's endpoints are found in O(matches), not
//! by a scan of every endpoint. An endpoint is under its exact types, its
//! prefixes (`invoice.*` under `invoice`), or with those that take every
//! type; an event of type `a.b.c` looks up `a.b.c`, the prefixes `a.b` and
//! `a`, and every-type: as many lookups as the type has parts, then only
//! the endpoints that match.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::config::subscription::Subscription;

/// One application's endpoints.
#[derive(Default)]
pub(crate) struct AppSubs {
    /// Every endpoint of the application, by name.
    pub members: BTreeSet<Arc<str>>,
    /// Those that take every type.
    every: BTreeSet<Arc<str>>,
    /// Exact types.
    exact: HashMap<String, BTreeSet<Arc<str>>>,
    /// Prefixes (the part before `.*`).
    prefix: HashMap<String, BTreeSet<Arc<str>>>,
}

impl AppSubs {
    /// Indexes endpoint `name` under `sub`'s types.
    pub(crate) fn add(&mut self, name: &Arc<str>, sub: &Subscription) {
        self.members.insert(name.clone());
        if sub.event_types.is_empty() {
            self.every.insert(name.clone());
        }
        for p in &sub.event_types {
            match p.strip_suffix('*') {
                Some("") => self.every.insert(name.clone()),
                Some(prefix) => self
                    .prefix
                    .entry(prefix.trim_end_matches('.').to_owned())
                    .or_default()
                    .insert(name.clone()),
                None => self
                    .exact
                    .entry(p.clone())
                    .or_default()
                    .insert(name.clone()),
            };
        }
    }

    /// Takes endpoint `name` (indexed under `sub`) out.
    pub(crate) fn remove(&mut self, name: &str, sub: &Subscription) {
        self.members.remove(name);
        self.every.remove(name);
        for p in &sub.event_types {
            let (map, key) = match p.strip_suffix('*') {
                Some("") => continue,
                Some(prefix) => (&mut self.prefix, prefix.trim_end_matches('.')),
                None => (&mut self.exact, p.as_str()),
            };
            if let Some(set) = map.get_mut(key) {
                set.remove(name);
                if set.is_empty() {
                    map.remove(key);
                }
            }
        }
    }

    /// Whether it has no endpoint.
    pub(crate) fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The endpoints whose types take `kind`, each once, by name.
    pub(crate) fn matching(&self, kind: &str) -> BTreeSet<Arc<str>> {
        let mut out: BTreeSet<Arc<str>> = self.every.clone();
        if let Some(set) = self.exact.get(kind) {
            out.extend(set.iter().cloned());
        }
        // Every proper prefix ending before a dot: `a.b.c` → `a.b`, `a`.
        for (i, b) in kind.bytes().enumerate() {
            if b == b'.'
                && let Some(set) = self.prefix.get(&kind[..i])
            {
                out.extend(set.iter().cloned());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(types: &[&str]) -> Subscription {
        Subscription {
            application: Arc::from("acme"),
            event_types: types.iter().map(|t| (*t).to_owned()).collect(),
            filter: None,
            disabled: false,
            description: None,
        }
    }

    #[test]
    fn an_event_finds_exact_prefix_and_every_type_endpoints_once() {
        let mut s = AppSubs::default();
        let (a, b, c, d) = (
            Arc::from("a"),
            Arc::from("b"),
            Arc::from("c"),
            Arc::from("d"),
        );
        s.add(&a, &sub(&["invoice.*"]));
        s.add(&b, &sub(&["invoice.paid"]));
        s.add(&c, &sub(&[]));
        s.add(&d, &sub(&["user.created", "invoice.paid.late", "*"]));
        fn names(s: &AppSubs, k: &str) -> Vec<String> {
            s.matching(k).iter().map(|n| n.to_string()).collect()
        }
        assert_eq!(names(&s, "invoice.paid"), ["a", "b", "c", "d"]);
        assert_eq!(names(&s, "invoice.created"), ["a", "c", "d"]);
        assert_eq!(
            names(&s, "invoice"),
            ["c", "d"],
            "invoice.* needs a part after the dot"
        );
        assert_eq!(names(&s, "user.created"), ["c", "d"]);
        s.remove("d", &sub(&["user.created", "invoice.paid.late", "*"]));
        s.remove("c", &sub(&[]));
        assert_eq!(names(&s, "user.created"), Vec::<String>::new());
        assert_eq!(names(&s, "invoice.paid.late"), ["a"]);
        assert_eq!(s.members.len(), 2);
    }
}
