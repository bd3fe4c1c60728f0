//! The destinations in force: the configured ones with the admin API's
//! changes over them. Intake reads it for every request (the names a
//! request may use), each delivery for its destination's URL and keys, the
//! admin API to list, change and delete.
//!
//! A destination being deleted stays here, closed, while its throttle
//! drains: intake answers 404 for it at once, and what it still holds is
//! delivered to its URL until it is forgotten.
//!
//! Intake holds a [`Pass`] from the moment it picks a destination to the
//! end of the admission; a deletion waits for the passes given before it
//! closed the destination before taking it out of the set, so no webhook
//! answered 202 ever lands in a destination already taken out.

pub(crate) mod edit;
pub(crate) mod registry;
pub(crate) mod state;
pub(crate) mod subs;
pub(crate) mod vet;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::config::Destination;
use crate::deliver::target::{Target, Targets};
use crate::util::mutex::lock;

/// Admissions under way for one destination.
#[derive(Default)]
struct Admitting {
    count: AtomicUsize,
    none: Notify,
}

/// One admission's hold on the destination it picked: while any lives, a
/// deletion of that destination waits before taking it out of the set.
pub(crate) struct Pass {
    name: Arc<str>,
    gate: Arc<Admitting>,
}

impl Pass {
    /// The destination's name.
    pub(crate) fn name(&self) -> &Arc<str> {
        &self.name
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        if self.gate.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.gate.none.notify_waiters();
        }
    }
}

/// One destination in force.
struct Entry {
    dest: Destination,
    /// Where its deliveries go (with its idle connections), parsed at a
    /// delivery and held by its deliveries while it has work: an idle
    /// destination holds none, nor any connection.
    target: Mutex<Weak<Target>>,
    /// Made at its first admission: an idle destination that never took
    /// a webhook holds none (about 80 bytes of the heap each).
    admitting: OnceLock<Arc<Admitting>>,
    /// False while it is being deleted (intake no longer takes webhooks
    /// for it).
    open: bool,
    /// Its place in the listing: configuration order, then creation.
    seq: u64,
}

/// A destination as the admin API lists it.
#[derive(Clone, Debug)]
pub(crate) struct Listed {
    /// As configured (or as the admin API set it).
    pub dest: Destination,
    /// False while it is being deleted.
    pub open: bool,
}

/// The destinations by name, and their order.
#[derive(Default)]
struct Table {
    /// Boxed: the map's spare room (it grows by doubling) holds a
    /// pointer per slot, not a whole entry.
    by_name: HashMap<Arc<str>, Box<Entry>>,
    /// Listing order: each entry's `seq`.
    order: BTreeMap<u64, Arc<str>>,
    /// Those with their own metric series.
    own_series: BTreeSet<Arc<str>>,
    next_seq: u64,
    /// The applications, by name.
    apps: BTreeMap<Arc<str>, App>,
    /// Each application's open endpoints by the event types they take.
    subs: HashMap<Arc<str>, subs::AppSubs>,
}

/// An application: one of the sender's customers, owning endpoints.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct App {
    /// What it is, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The first event id that is its own: set when it is made through the
    /// admin API (one past the newest event kept under its name, an
    /// earlier application's: deleted, and kept until `event_retention`;
    /// kept when it is replaced), so those are not listed, shown, resent,
    /// recovered or redriven as its. 0: every one (made by the
    /// configuration, or before this was kept).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub since: u64,
    /// Which making of the name it is (drawn at random when the admin API
    /// makes it, kept when it is replaced; 0: configured): one made again
    /// under the name has another `ETag`, so an `If-Match` read before the
    /// deletion no longer holds.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub made: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl App {
    /// An application made now through the admin API, described by
    /// `description`, its first own event id `since`.
    pub(crate) fn new(description: Option<String>, since: u64) -> App {
        App {
            description,
            since,
            made: fastrand::u64(1..),
        }
    }

    /// `app` as made now (its `since` and `made` as given), or as a
    /// replacement of `was` (`was`'s kept).
    pub(crate) fn made_over(mut self, was: Option<&App>) -> App {
        if let Some(was) = was {
            self.since = was.since;
            self.made = was.made;
        }
        self
    }
}

impl Table {
    fn get(&self, name: &str) -> Option<&Entry> {
        self.by_name.get(name).map(|e| &**e)
    }

    /// Indexes `name`'s subscription (if it is an endpoint); its
    /// application exists from then on.
    fn subscribe(&mut self, name: &Arc<str>, d: &Destination) {
        if let Some(sub) = &d.endpoint {
            self.apps.entry(sub.application.clone()).or_default();
            self.subs
                .entry(sub.application.clone())
                .or_default()
                .add(name, sub);
        }
    }

    /// Takes `name`'s subscription out of the index.
    fn unsubscribe(&mut self, name: &str, d: &Destination) {
        if let Some(sub) = &d.endpoint
            && let Some(app) = self.subs.get_mut(&*sub.application)
        {
            app.remove(name, sub);
            if app.is_empty() {
                self.subs.remove(&*sub.application);
            }
        }
    }
}

/// One page of the listing, and where the next begins.
pub(crate) struct Page {
    /// The destinations on it, in listing order.
    pub listed: Vec<Listed>,
    /// The place after its last (`None`: it is the last page).
    pub next: Option<u64>,
}

/// The table (see the [module](self) docs).
#[derive(Default)]
pub(crate) struct Catalog {
    table: RwLock<Table>,
    /// Deletions draining.
    removals: Mutex<Vec<JoinHandle<()>>>,
    /// Set once shutdown begins: no more changes.
    closing: AtomicBool,
}

/// Where [`Catalog::only_within`] looks.
#[derive(Clone, Copy)]
pub(crate) enum Within<'a> {
    /// These destinations.
    Names(&'a [Arc<str>]),
    /// These applications' endpoints.
    Applications(&'a [Arc<str>]),
}

fn pass(name: &Arc<str>, e: &Entry) -> Pass {
    let gate = e.admitting.get_or_init(Arc::default).clone();
    gate.count.fetch_add(1, Ordering::AcqRel);
    Pass {
        name: name.clone(),
        gate,
    }
}

impl Catalog {
    /// The catalog of `destinations`, in their order.
    pub(crate) fn new(destinations: &[Destination]) -> Catalog {
        let c = Catalog::default();
        for d in destinations {
            c.put(d.clone());
        }
        c
    }

    fn read(&self) -> RwLockReadGuard<'_, Table> {
        self.table.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Table> {
        self.table.write().unwrap_or_else(|p| p.into_inner())
    }

    /// A pass for the open destination called `name`.
    pub(crate) fn open(&self, name: &str) -> Option<Pass> {
        let table = self.read();
        let (key, e) = table.by_name.get_key_value(name)?;
        e.open.then(|| pass(key, e))
    }

    /// Whether `name` is open.
    pub(crate) fn is_open(&self, name: &str) -> bool {
        self.read().get(name).is_some_and(|e| e.open)
    }

    /// The application `name` is an endpoint of, if it is one.
    pub(crate) fn application_of(&self, name: &str) -> Option<Arc<str>> {
        let table = self.read();
        let sub = table.get(name)?.dest.endpoint.as_ref()?;
        Some(sub.application.clone())
    }

    /// Whether event `seq` of application `app` (`None`: whichever
    /// `endpoint` belongs to now) may go to `endpoint`: its application's
    /// own, not an earlier one's of the same name ([`App::since`]) nor
    /// another application's.
    pub(crate) fn takes_event(&self, endpoint: &str, app: Option<&str>, seq: u64) -> bool {
        let now = self.application_of(endpoint);
        if app.is_some_and(|app| now.as_deref() != Some(app)) {
            return false;
        }
        now.is_none_or(|app| seq >= self.since_of(&app))
    }

    /// Application `app`'s first event id ([`App::since`]): an event or a
    /// key naming an earlier one is an earlier application's of the name;
    /// 0 when there is no such application.
    pub(crate) fn since_of(&self, app: &str) -> u64 {
        self.read().apps.get(app).map_or(0, |a| a.since)
    }

    /// A pass for the only open destination `usable` (given its name and
    /// application, if it is an endpoint) lets through, if exactly one is.
    pub(crate) fn only(&self, usable: impl Fn(&str, Option<&str>) -> bool) -> Option<Pass> {
        let table = self.read();
        let mut found = table.by_name.iter().filter(|(name, e)| {
            let app = e.dest.endpoint.as_ref().map(|s| &*s.application);
            e.open && usable(name, app)
        });
        match (found.next(), found.next()) {
            (Some((name, e)), None) => Some(pass(name, e)),
            _ => None,
        }
    }

    /// As [`only`](Self::only), among the destinations `within` names (a
    /// caller's own list, or its applications' endpoints) instead of every
    /// destination: a tenant held to a few of 100,000 looks at those few.
    pub(crate) fn only_within(
        &self,
        within: Within<'_>,
        usable: impl Fn(&str, Option<&str>) -> bool,
    ) -> Option<Pass> {
        let table = self.read();
        let named: Box<dyn Iterator<Item = &str> + '_> = match within {
            Within::Names(names) => Box::new(names.iter().map(|n| &**n)),
            Within::Applications(apps) => Box::new(
                apps.iter()
                    .filter_map(|a| table.subs.get(&**a))
                    .flat_map(|s| s.members.iter().map(|n| &**n)),
            ),
        };
        let mut seen = std::collections::HashSet::new();
        let mut found = named
            .filter(|n| seen.insert(*n))
            .filter_map(|n| table.by_name.get_key_value(n))
            .filter(|(name, e)| {
                let app = e.dest.endpoint.as_ref().map(|s| &*s.application);
                e.open && usable(name, app)
            });
        match (found.next(), found.next()) {
            (Some((name, e)), None) => Some(pass(name, e)),
            _ => None,
        }
    }

    /// Destinations held, open or being deleted.
    pub(crate) fn held(&self) -> usize {
        self.read().by_name.len()
    }

    /// Every open destination's name and URL (where redriven lines go).
    pub(crate) fn targets(&self) -> Vec<(Arc<str>, String)> {
        let table = self.read();
        table
            .order
            .values()
            .filter_map(|n| table.get(n).filter(|e| e.open).map(|e| (n, e)))
            .map(|(n, e)| (n.clone(), e.dest.url.as_str().to_owned()))
            .collect()
    }

    /// Every destination held, in listing order.
    pub(crate) fn list(&self) -> Vec<Listed> {
        self.page(None, usize::MAX).listed
    }

    /// The destinations whose names contain `text` in any case, at most
    /// `limit` (the status page's search: a scan of the names): the one
    /// named `text` exactly first, so a name inside many others' is found
    /// however many there are, then the rest in listing order.
    pub(crate) fn find(&self, text: &str, limit: usize) -> Vec<Listed> {
        let table = self.read();
        let exact = table.get(text);
        let exact_name = exact.map(|e| e.dest.name.as_str());
        let bytes = text.as_bytes();
        let listed = |e: &Entry| Listed {
            dest: e.dest.clone(),
            open: e.open,
        };
        let others = table
            .order
            .values()
            .filter(|n| Some(&***n) != exact_name)
            .filter(|n| {
                bytes.is_empty()
                    || n.as_bytes()
                        .windows(bytes.len())
                        .any(|w| w.eq_ignore_ascii_case(bytes))
            })
            .filter_map(|n| table.get(n));
        exact
            .into_iter()
            .chain(others)
            .take(limit)
            .map(listed)
            .collect()
    }

    /// At most `limit` destinations in listing order, from the place
    /// `after` names (`None`: the first): O(log n + limit).
    pub(crate) fn page(&self, after: Option<u64>, limit: usize) -> Page {
        let table = self.read();
        let from = after.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
        let mut places = table.order.range((from, std::ops::Bound::Unbounded));
        let mut listed = Vec::new();
        let mut last = None;
        for (seq, name) in places.by_ref().take(limit) {
            if let Some(e) = table.get(name) {
                listed.push(Listed {
                    dest: e.dest.clone(),
                    open: e.open,
                });
            }
            last = Some(*seq);
        }
        let next = places.next().and(last);
        Page { listed, next }
    }

    /// The destinations with their own metric series.
    pub(crate) fn list_own_series(&self) -> Vec<Listed> {
        let table = self.read();
        table
            .own_series
            .iter()
            .filter_map(|n| table.get(n))
            .map(|e| Listed {
                dest: e.dest.clone(),
                open: e.open,
            })
            .collect()
    }

    /// `name` as held.
    pub(crate) fn get(&self, name: &str) -> Option<Listed> {
        self.read().get(name).map(|e| Listed {
            dest: e.dest.clone(),
            open: e.open,
        })
    }

    /// Passes for the open, enabled endpoints of `app` that take an event
    /// of type `kind` with `payload`: O(the endpoints its type matches).
    pub(crate) fn subscribed(
        &self,
        app: &str,
        kind: &str,
        payload: &serde_json::Value,
    ) -> Vec<Pass> {
        let table = self.read();
        let Some(subs) = table.subs.get(app) else {
            return Vec::new();
        };
        subs.matching(kind)
            .into_iter()
            .filter_map(|name| {
                let (key, e) = table.by_name.get_key_value(&*name)?;
                let sub = e.dest.endpoint.as_ref()?;
                (e.open && !sub.disabled && sub.takes_payload(payload)).then(|| pass(key, e))
            })
            .collect()
    }

    /// Application `name`, if it exists.
    pub(crate) fn app(&self, name: &str) -> Option<App> {
        self.read().apps.get(name).cloned()
    }

    /// Makes or replaces application `name`.
    pub(crate) fn put_app(&self, name: &str, app: App) {
        self.write().apps.insert(Arc::from(name), app);
    }

    /// Forgets application `name` (its endpoints deleted first).
    pub(crate) fn remove_app(&self, name: &str) {
        self.write().apps.remove(name);
    }

    /// At most `limit` applications by name, after `after`.
    pub(crate) fn apps_page(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> (Vec<(String, App)>, Option<String>) {
        let table = self.read();
        let from = match after {
            Some(a) => std::ops::Bound::Excluded(a),
            None => std::ops::Bound::Unbounded,
        };
        let mut all = table
            .apps
            .range::<str, _>((from, std::ops::Bound::Unbounded));
        let page: Vec<(String, App)> = all
            .by_ref()
            .take(limit)
            .map(|(n, a)| (n.to_string(), a.clone()))
            .collect();
        let next = all.next().and(page.last().map(|(n, _)| n.clone()));
        (page, next)
    }

    /// The endpoints of application `app` (open or being deleted), by
    /// name, at most `limit` after `after`.
    pub(crate) fn endpoints_page(
        &self,
        app: &str,
        after: Option<&str>,
        limit: usize,
    ) -> (Vec<Listed>, Option<String>) {
        let table = self.read();
        let mut names: Vec<&Arc<str>> = Vec::new();
        let mut more = false;
        if let Some(subs) = table.subs.get(app) {
            let from = match after {
                Some(a) => std::ops::Bound::Excluded(a),
                None => std::ops::Bound::Unbounded,
            };
            let mut it = subs
                .members
                .range::<str, _>((from, std::ops::Bound::Unbounded));
            names.extend(it.by_ref().take(limit));
            more = it.next().is_some();
        }
        // Those being deleted are not indexed: not listed.
        let listed: Vec<Listed> = names
            .iter()
            .filter_map(|n| table.get(n))
            .map(|e| Listed {
                dest: e.dest.clone(),
                open: e.open,
            })
            .collect();
        let next = more
            .then(|| listed.last().map(|l| l.dest.name.clone()))
            .flatten();
        (listed, next)
    }

    /// The names of application `app`'s open endpoints.
    pub(crate) fn endpoints_of(&self, app: &str) -> Vec<Arc<str>> {
        self.read()
            .subs
            .get(app)
            .map(|s| s.members.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Whether `name` has its own metric series.
    pub(crate) fn has_own_series(&self, name: &str) -> bool {
        self.read().own_series.contains(name)
    }

    /// Makes or replaces (and opens) `d`; returns what it replaced.
    pub(crate) fn put(&self, d: Destination) -> Option<Destination> {
        let mut table = self.write();
        // A change keeps the admissions under way counted where a later
        // deletion will wait for them, and its name and place.
        let (key, seq, admitting) = match table.by_name.get_key_value(d.name.as_str()) {
            Some((k, e)) => (k.clone(), e.seq, e.admitting.clone()),
            None => {
                let seq = table.next_seq;
                table.next_seq += 1;
                (Arc::from(d.name.as_str()), seq, OnceLock::new())
            }
        };
        match d.own_series() {
            true => table.own_series.insert(key.clone()),
            false => table.own_series.remove(&key),
        };
        table.order.insert(seq, key.clone());
        if let Some(old) = table.by_name.get(&key).map(|e| e.dest.clone()) {
            table.unsubscribe(&key, &old);
        }
        table.subscribe(&key, &d);
        let entry = Entry {
            target: Mutex::new(Weak::new()),
            admitting,
            dest: d,
            open: true,
            seq,
        };
        table.by_name.insert(key, Box::new(entry)).map(|e| e.dest)
    }

    /// Closes `name` to new webhooks; false if it is not open.
    pub(crate) fn close(&self, name: &str) -> bool {
        let mut table = self.write();
        let Some(e) = table.by_name.get_mut(name).filter(|e| e.open) else {
            return false;
        };
        e.open = false;
        let d = e.dest.clone();
        // No new event finds it.
        table.unsubscribe(name, &d);
        true
    }

    /// Waits until no admission holds a pass for `name` (none can be given
    /// once it is closed).
    pub(crate) async fn admissions_done(&self, name: &str) {
        // None made: no admission ever picked it (and, closed, none can).
        let Some(gate) = self
            .read()
            .get(name)
            .and_then(|e| e.admitting.get().cloned())
        else {
            return;
        };
        loop {
            let none = gate.none.notified();
            tokio::pin!(none);
            none.as_mut().enable();
            if gate.count.load(Ordering::Acquire) == 0 {
                return;
            }
            none.await;
        }
    }

    /// Keeps a deletion's draining task, for [`finish`](Self::finish).
    pub(crate) fn removing(&self, task: JoinHandle<()>) {
        let mut all = lock(&self.removals);
        all.retain(|t| !t.is_finished());
        all.push(task);
    }

    /// Whether shutdown has begun.
    pub(crate) fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// At shutdown: no more changes, and the deletions draining end (each
    /// within its grace) before the set is drained and the dead-letter
    /// file flushed.
    pub(crate) async fn finish(&self) {
        self.closing.store(true, Ordering::Release);
        // Until none is left: a deletion that passed its check just before
        // shutdown began registers its task a moment later.
        loop {
            let tasks: Vec<_> = std::mem::take(&mut *lock(&self.removals));
            if tasks.is_empty() {
                return;
            }
            for task in tasks {
                let _ = task.await;
            }
        }
    }
    /// Forgets `name` once it has drained (if it was not made again).
    pub(crate) fn forget(&self, name: &str) {
        let mut table = self.write();
        if table.get(name).is_some_and(|e| !e.open)
            && let Some(e) = table.by_name.remove(name)
        {
            table.order.remove(&e.seq);
            table.own_series.remove(name);
            table.unsubscribe(name, &e.dest);
        }
    }
}

/// Deliveries find their destination's URL and keys here, while it is
/// held (open or draining).
impl Targets for Catalog {
    fn target(&self, name: &str) -> Option<Arc<Target>> {
        let table = self.read();
        let e = table.get(name)?;
        let mut held = lock(&e.target);
        if let Some(t) = held.upgrade() {
            return Some(t);
        }
        let t = Arc::new(Target::of(&e.dest));
        *held = Arc::downgrade(&t);
        Some(t)
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
        assert_eq!(
            c.only(|n, _| n == "a").map(|p| p.name().clone()).as_deref(),
            Some("a")
        );
        assert!(c.only(|_, _| true).is_none(), "two are usable");
        assert!(c.close("a"));
        assert!(!c.close("a"), "closed once");
        assert!(c.open("a").is_none());
        assert!(c.target("a").unwrap().endpoint.is_some());
        assert_eq!(c.get("a").unwrap().dest.url.as_str(), "http://a.example/");
        assert_eq!(
            c.only(|_, _| true).map(|p| p.name().clone()).as_deref(),
            Some("b")
        );
        assert_eq!(c.targets().len(), 1);
        c.forget("a");
        assert!(c.target("a").is_none());
        assert_eq!(c.held(), 1);
    }

    #[test]
    fn the_only_usable_destination_is_found_among_a_callers_own() {
        let c = Catalog::new(&[
            dest("a", "http://a/"),
            dest("b", "http://b/"),
            dest("c", "http://c/"),
        ]);
        let name = |p: Option<Pass>| p.map(|p| p.name().to_string());
        let mine: Vec<Arc<str>> = vec!["b".into(), "gone".into(), "b".into()];
        let all = |_: &str, _: Option<&str>| true;
        assert_eq!(
            name(c.only_within(Within::Names(&mine), all)),
            Some("b".into())
        );
        let two: Vec<Arc<str>> = vec!["a".into(), "c".into()];
        assert_eq!(name(c.only_within(Within::Names(&two), all)), None, "two");
        c.close("a");
        assert_eq!(
            name(c.only_within(Within::Names(&two), all)),
            Some("c".into())
        );
        let apps: Vec<Arc<str>> = vec!["none".into()];
        assert_eq!(name(c.only_within(Within::Applications(&apps), all)), None);
    }

    #[test]
    fn a_search_finds_names_in_any_case() {
        let c = Catalog::new(&[dest("Shop-EU", "http://a/"), dest("n12345", "http://b/")]);
        let names =
            |t: &str| -> Vec<String> { c.find(t, 10).into_iter().map(|l| l.dest.name).collect() };
        assert_eq!(names("N123"), ["n12345"]);
        assert_eq!(names("shop-eu"), ["Shop-EU"]);
        assert_eq!(names("-"), ["Shop-EU"]);
        assert!(names("shop-eux").is_empty());
    }

    #[test]
    fn a_name_inside_many_others_is_found_first() {
        let mut all: Vec<_> = (0..60)
            .map(|n| dest(&format!("shop-{n}"), "http://a/"))
            .collect();
        all.push(dest("shop", "http://b/"));
        let c = Catalog::new(&all);
        let found: Vec<String> = c
            .find("shop", 50)
            .into_iter()
            .map(|l| l.dest.name)
            .collect();
        assert_eq!(found.len(), 50);
        assert_eq!(found[0], "shop", "made last, listed first");
        assert_eq!(found[1], "shop-0", "then in listing order");
        assert_eq!(found.iter().filter(|n| *n == "shop").count(), 1);
    }

    #[test]
    fn a_replaced_destination_keeps_its_place() {
        let c = Catalog::new(&[dest("z", "http://z/"), dest("a", "http://a/")]);
        c.put(dest("m", "http://m/"));
        let old = c.put(dest("z", "http://z2/")).unwrap();
        assert_eq!(old.url.as_str(), "http://z/");
        let names: Vec<_> = c.list().into_iter().map(|l| l.dest.name).collect();
        assert_eq!(names, ["z", "a", "m"]);
        assert_eq!(c.get("z").unwrap().dest.url.as_str(), "http://z2/");
        c.close("m");
        c.put(dest("m", "http://m2/"));
        c.forget("m");
        assert!(c.open("m").is_some(), "made again before it was forgotten");
    }

    #[test]
    fn a_change_keeps_the_admissions_under_way_counted() {
        let c = Catalog::new(&[dest("a", "http://a/")]);
        let before = c.open("a").unwrap();
        c.put(dest("a", "http://a2/"));
        let gate = c
            .read()
            .get("a")
            .and_then(|e| e.admitting.get().cloned())
            .unwrap();
        assert_eq!(gate.count.load(Ordering::Acquire), 1);
        drop(before);
        assert_eq!(gate.count.load(Ordering::Acquire), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_deletion_waits_for_the_admissions_under_way() {
        let c = Arc::new(Catalog::new(&[dest("a", "http://a/")]));
        let first = c.open("a").unwrap();
        let second = c.only(|_, _| true).unwrap();
        c.close("a");
        assert!(c.open("a").is_none(), "no pass once closed");
        let waiting = tokio::spawn({
            let c = c.clone();
            async move { c.admissions_done("a").await }
        });
        tokio::task::yield_now().await;
        drop(first);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "one admission is still under way");
        drop(second);
        tokio::time::timeout(std::time::Duration::from_secs(1), waiting)
            .await
            .expect("done once the last pass is dropped")
            .unwrap();
    }
}
