//! `queue = redis`: destinations made, changed and deleted through the
//! admin API of any relay are the fleet's. Each change is written to one
//! Redis hash ([`super::redis::map::RedisMap`], key
//! `dripfeed:map:{webhook_relay:destinations}`) with a version bumped in
//! the same step, applied at once by the relay that took it, and by every
//! other relay within [`POLL`] (each polls the version: one `GET` per
//! poll; when it moved, only the entries changed since the version applied,
//! from the map's log of which name each version changed: a change costs
//! each relay O(log n), not a read of the whole map). A relay starting reads the
//! map over its configuration, as the registry is read in the local mode:
//! a name the map holds replaces the configured one, a name it deleted is
//! gone even if the configuration still names it.
//!
//! A deletion closes the destination to new webhooks on every relay (404);
//! the fleet goes on delivering what its queue holds until the deleting
//! relay's shutdown grace has passed (the deadline is kept in the map), then
//! every relay dead-letters the rest (`destination-deleted`, in the fleet's
//! dead letters): never lost. The name may be made again [`REMAKE_AFTER`]
//! past that deadline.
//!
//! Secrets are kept in the map as the `PUT` gave them, as the queue keeps
//! webhook bodies: Redis is to be protected (a password or ACL, TLS).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::redis::map::RedisMap;
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;

use super::shared::Shared;
use crate::catalog::Catalog;
use crate::config::{Config, Destination, Fields, Origin};
use crate::deliver::guard::AddressGuard;
use crate::domain::limits::Limits;
use crate::queue::contract::ChangeRefused;
use crate::util::mutex::lock;

/// The map's name.
const MAP: &str = crate::config::FLEET_MAP;
/// How often each relay asks whether the map changed.
pub(crate) const POLL: Duration = Duration::from_millis(500);
/// How long past a deletion's deadline the name may be made again: every
/// relay has seen the deadline pass and dead-lettered what was left.
pub(crate) const REMAKE_AFTER: Duration = Duration::from_secs(5);
/// Changes read together past which the poll logs one line for them all.
const QUIET_PAST: usize = 16;
/// How long reading the map at start may take before the relay starts from
/// its configuration alone (not ready until the map is applied, once Redis
/// answers). The map is read a page at a time: 100,000 destinations take
/// about a second.
const START_READ: Duration = Duration::from_secs(10);

/// What the map holds for a name.
// Fields is large, and these are few and short-lived (one per change):
// boxing it would cost every reader an indirection for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum Change {
    /// Made or replaced: the `PUT` body, with its name.
    Put(Fields),
    /// Deleted: what it holds is delivered until this time (Unix ms), then
    /// dead-lettered.
    Deleted {
        /// The deadline, Unix ms.
        until_unix_ms: u64,
        /// Why the rest is dead-lettered, when not `destination-deleted`
        /// (an application's deletion: `application-deleted`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// An application made or replaced (under the name `app:NAME`).
    App(crate::catalog::App),
    /// An application deleted (its endpoints first).
    AppDeleted,
    /// An application being deleted: gone for events and for new
    /// endpoints (an endpoint's write checks its application's entry), its
    /// endpoints being deleted, then [`AppDeleted`](Self::AppDeleted). A
    /// deletion cut short (its relay died) stays here until a `DELETE`
    /// of the application again ends it; a `PUT` of it is 409 meanwhile.
    AppDeleting,
}

/// The map's name for application `name` (a destination's name has no
/// `:`).
pub(crate) fn app_entry(name: &str) -> String {
    format!("app:{name}")
}

impl Change {
    pub(crate) fn parse(raw: &str) -> Option<Change> {
        serde_json::from_str(raw).ok()
    }

    /// As the map holds it.
    pub(crate) fn text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Now, Unix ms.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// What [`Fleet`] keeps of a change it applied, to know it again: its
/// length and its FNV-1a hash.
fn seal(raw: &str) -> (usize, u64) {
    (raw.len(), crate::domain::names::body_hash(raw.as_bytes()))
}

/// The origin a destination made through the fleet's admin API has.
fn origin() -> Origin {
    Origin::fleet_map()
}

/// `fields` checked as a destination, or why not.
pub(crate) fn checked(fields: &Fields) -> Result<Destination, String> {
    fields.clone().check_body(&origin())
}

/// The map as read at start.
pub(crate) struct Start {
    map: RedisMap,
    version: u64,
    entries: Vec<(String, String)>,
    /// Whether the map was read (else it is applied by the poll).
    read: bool,
}

/// Reads the fleet's changes and applies them over `cfg`'s destinations
/// (an entry that does not read or check is skipped, with an error in the
/// log). Redis not answering within [`START_READ`]: none applied now (the
/// poll applies them once it answers).
pub(crate) async fn read_at_start(cfg: &mut Config) -> Result<Start, String> {
    let url = cfg
        .settings
        .redis
        .as_ref()
        .ok_or("queue = redis needs redis")?;
    let conn = super::link::connect(url.as_str()).await?;
    let map = RedisMap::new(conn.counted_as("destinations"), MAP);
    let ((version, entries), read) = match tokio::time::timeout(START_READ, map.entries()).await {
        Ok(Ok(read)) => (read, true),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "the fleet's destination changes cannot be read now: starting from the configuration, not ready until they apply (once Redis answers)");
            ((0, Vec::new()), false)
        }
        Err(_) => {
            tracing::warn!(
                "the fleet's destination changes were not read within {START_READ:?}: starting from the configuration, not ready until they apply (once Redis answers)"
            );
            ((0, Vec::new()), false)
        }
    };
    // Each entry replaces the configured destination of its name (or
    // takes it out): the names taken out in one pass, then those put in
    // added (linear in the entries, as a start with 100,000 needs).
    let mut replaced = std::collections::HashSet::new();
    let mut put = Vec::new();
    for (name, raw) in &entries {
        match Change::parse(raw) {
            Some(Change::Put(fields)) => {
                replaced.insert(name.as_str());
                match checked(&fields) {
                    Ok(d) => put.push(d),
                    // Not as it was before either: left out on this relay.
                    Err(e) => {
                        tracing::error!(destination = %name, error = %e, "a destination the fleet's admin API made does not check here: left out on this relay");
                    }
                }
            }
            Some(Change::Deleted { .. }) => {
                replaced.insert(name.as_str());
            }
            // Applications are the catalog's (Fleet::start).
            Some(Change::App(_) | Change::AppDeleted | Change::AppDeleting) => {}
            None => {
                replaced.insert(name.as_str());
                tracing::error!(destination = %name, "a fleet destination change does not read: left out on this relay");
            }
        }
    }
    cfg.destinations
        .retain(|c| !replaced.contains(c.name.as_str()));
    cfg.destinations.extend(put);
    Ok(Start {
        map,
        version,
        entries,
        read,
    })
}

/// The fleet's changes on this relay: applied as they come.
pub(crate) struct Fleet {
    map: RedisMap,
    shared: Arc<Shared>,
    catalog: Arc<Catalog>,
    guard: Arc<AddressGuard>,
    resolve: bool,
    /// What a destination must fit, as a `PUT` here is checked.
    limits: Limits,
    /// The map's version applied.
    seen: AtomicU64,
    /// Each name's change as applied here: its length and a hash of its
    /// text in the map (a few bytes a destination, not its text).
    applied: Mutex<HashMap<String, (usize, u64)>>,
    /// Deletions under way here, by name.
    deletions: Mutex<HashMap<String, JoinHandle<()>>>,
    /// One change applied at a time (the poll's or the admin API's).
    pub(crate) turn: tokio::sync::Mutex<()>,
}

impl Fleet {
    /// The fleet's changes as read at `start` (applied to the
    /// configuration already), with deletions' ends scheduled and the poll
    /// started.
    pub(crate) async fn start(
        start: Start,
        shared: Arc<Shared>,
        catalog: Arc<Catalog>,
        guard: Arc<AddressGuard>,
        resolve: bool,
        limits: Limits,
    ) -> Arc<Fleet> {
        shared.map_read.store(start.read, Ordering::Release);
        let fleet = Arc::new(Fleet {
            map: start.map,
            shared,
            catalog,
            guard,
            resolve,
            limits,
            seen: AtomicU64::new(start.version),
            applied: Mutex::default(),
            deletions: Mutex::default(),
            turn: tokio::sync::Mutex::new(()),
        });
        let now = fleet.now().await;
        for (name, raw) in start.entries {
            match Change::parse(&raw) {
                Some(Change::Deleted { until_unix_ms, .. }) => {
                    fleet.deleting(&name, &raw, until_unix_ms.saturating_sub(now));
                }
                Some(Change::App(app)) => {
                    if let Some(app_name) = name.strip_prefix("app:") {
                        fleet.catalog.put_app(app_name, app);
                    }
                }
                // Deleted by the fleet: gone here too, though this relay's
                // configuration names it (as a deleted destination).
                Some(Change::AppDeleted | Change::AppDeleting) => {
                    if let Some(app_name) = name.strip_prefix("app:") {
                        fleet.catalog.remove_app(app_name);
                    }
                }
                _ => {}
            }
            lock(&fleet.applied).insert(name, seal(&raw));
        }
        tokio::spawn(fleet.clone().poll());
        fleet
    }

    /// The Redis server's clock (the fleet's), else this relay's.
    pub(crate) async fn now(&self) -> u64 {
        self.map.server_ms().await.unwrap_or_else(|_| now_ms())
    }

    /// Until shutdown: the map's version asked every [`POLL`]; when it
    /// moved, each changed entry applied.
    async fn poll(self: Arc<Self>) {
        loop {
            tokio::time::sleep(POLL).await;
            if self.catalog.is_closing() {
                return;
            }
            let version = match self.map.version().await {
                Ok(v) => v,
                Err(e) => {
                    tracing::debug!(error = %e, "the fleet's destination changes: version not read");
                    continue;
                }
            };
            if version == self.seen.load(Ordering::Acquire) {
                self.shared.map_read.store(true, Ordering::Release);
                continue;
            }
            // Read under the turn: a change this relay makes meanwhile is
            // in what is read, never undone by an older reading.
            let _turn = self.turn.lock().await;
            self.catch_up().await;
        }
    }

    /// Applies every change the fleet made since this relay last read the
    /// map (the caller holds [`turn`](Self::turn)): what a poll does, and
    /// what a change made here does first, so that it starts from what the
    /// fleet holds (an application deleted on another relay a moment ago
    /// is gone here too before it is made again). Best effort: a map that
    /// cannot be read is read at the next poll.
    pub(crate) async fn catch_up(&self) {
        let seen = self.seen.load(Ordering::Acquire);
        let read = match self.map.since(seen).await {
            Ok((version, _)) if version == seen => return,
            Ok((version, Some(changed))) => Ok((version, changed)),
            // The log cannot say what changed: every entry.
            Ok((_, None)) => self.map.entries().await,
            Err(e) => Err(e),
        };
        let (version, entries) = match read {
            Ok(read) => read,
            Err(e) => {
                tracing::debug!(error = %e, "the fleet's destination changes: not read");
                return;
            }
        };
        // Many at once (a whole read): one line for them all, not one
        // each.
        let loud = entries.len() <= QUIET_PAST;
        let mut changed = 0;
        for (name, raw) in entries {
            if lock(&self.applied).get(&name) != Some(&seal(&raw)) {
                self.apply(&name, &raw, loud).await;
                changed += 1;
            }
        }
        if !loud && changed > 0 {
            tracing::info!(changed, "destinations changed by the fleet's admin API");
        }
        self.seen.store(version, Ordering::Release);
        self.shared.map_read.store(true, Ordering::Release);
    }

    /// The endpoints of application `app` the map holds made (`PUT`), read
    /// whole from Redis: those this relay refused to apply too (its
    /// catalog does not list them).
    pub(crate) async fn endpoints_in_map(&self, app: &str) -> Result<Vec<String>, String> {
        let (_, entries) = self.map.entries().await.map_err(|e| e.to_string())?;
        Ok(entries
            .into_iter()
            .filter(|(_, raw)| {
                matches!(Change::parse(raw), Some(Change::Put(f)) if f.application.as_deref() == Some(app))
            })
            .map(|(name, _)| name)
            .collect())
    }

    /// What `name` holds in the map now (`None`: nothing, it is as
    /// configured), read from Redis.
    pub(crate) async fn read(
        &self,
        name: &str,
    ) -> Result<(Option<String>, Option<Change>), String> {
        let raw = self.map.get(name).await.map_err(|e| e.to_string())?;
        let change = raw.as_deref().and_then(Change::parse);
        Ok((raw, change))
    }

    /// Writes `change` of `name` to the map if it still holds `expected`
    /// (as [`read`](Self::read) gave it), and applies it here (the caller
    /// holds [`turn`](Self::turn)). `Ok(false)`: another change came
    /// first, nothing written; `Err`: Redis did not answer (the change may
    /// or may not have been written).
    pub(crate) async fn write(
        &self,
        name: &str,
        change: &Change,
        expected: Option<&str>,
    ) -> Result<bool, String> {
        self.write_both(name, change, expected, None).await
    }

    /// [`write`](Self::write), only if the entry `guard` names still holds
    /// what it says too (`None`: absent).
    pub(crate) async fn write_both(
        &self,
        name: &str,
        change: &Change,
        expected: Option<&str>,
        guard: Option<(&str, Option<&str>)>,
    ) -> Result<bool, String> {
        let raw = change.text();
        let written = self
            .map
            .set_if(name, &raw, expected, guard)
            .await
            .map_err(|e| e.to_string())?;
        if written.is_some() {
            self.apply(name, &raw, true).await;
        }
        Ok(written.is_some())
    }

    /// Applies the change `raw` of `name` here, saying so in the log when
    /// `loud` (else at debug level).
    async fn apply(&self, name: &str, raw: &str, loud: bool) {
        lock(&self.applied).insert(name.to_owned(), seal(raw));
        match Change::parse(raw) {
            Some(Change::Put(fields)) => {
                let d = match checked(&fields) {
                    Ok(d) => d,
                    Err(e) => {
                        tracing::error!(destination = %name, error = %e, "a destination the fleet's admin API made does not check here: closed on this relay");
                        return self.refuse_here(name).await;
                    }
                };
                if let Err(e) = self.limits.check(&d) {
                    tracing::error!(destination = %name, error = %e, "a destination the fleet's admin API made is beyond this relay's limits: closed on this relay");
                    return self.refuse_here(name).await;
                }
                if let Err(refused) = self.guard.check_destination(&d.url, self.resolve).await {
                    tracing::error!(destination = %name, url = %d.url, %refused, "a destination the fleet's admin API made is refused by this relay's address guard: closed on this relay");
                    return self.refuse_here(name).await;
                }
                // Made again while its deletion was ending here: that ends.
                if let Some(task) = lock(&self.deletions).remove(name) {
                    task.abort();
                }
                self.shared.define(&d);
                self.catalog.put(d);
                if loud {
                    tracing::info!(destination = %name, "destination changed by the fleet's admin API");
                } else {
                    tracing::debug!(destination = %name, "destination changed by the fleet's admin API");
                }
            }
            Some(Change::Deleted { until_unix_ms, .. }) => {
                let wait = until_unix_ms.saturating_sub(self.now().await);
                self.deleting(name, raw, wait);
                tracing::info!(destination = %name, "destination deleted by the fleet's admin API");
            }
            Some(Change::App(app)) => {
                if let Some(app_name) = name.strip_prefix("app:") {
                    self.catalog.put_app(app_name, app);
                }
            }
            Some(Change::AppDeleted | Change::AppDeleting) => {
                if let Some(app_name) = name.strip_prefix("app:") {
                    self.catalog.remove_app(app_name);
                }
            }
            None => {
                tracing::error!(destination = %name, "a fleet destination change does not read: closed on this relay");
                self.refuse_here(name).await;
            }
        }
    }

    /// The configured destinations a reload changes, all or none: each
    /// defined here (`Some`) or closed here (`None`; its queue in Redis is
    /// left to the relays that still have it), unless the fleet's admin
    /// API holds the name (returned). Every one is checked before any is
    /// applied.
    pub(crate) async fn reconfigure(
        &self,
        changes: Vec<(String, Option<Destination>)>,
    ) -> Result<Vec<String>, ChangeRefused> {
        let _turn = self.turn.lock().await;
        if self.catalog.is_closing() {
            return Err(ChangeRefused::closing());
        }
        let (kept, changes): (Vec<_>, Vec<_>) = changes
            .into_iter()
            .partition(|(name, _)| lock(&self.applied).contains_key(name));
        for (name, dest) in &changes {
            if let Some(d) = dest
                && let Err(e) = self.limits.check(d)
            {
                return Err(ChangeRefused::new(
                    422,
                    "bad-destination",
                    format!("{name}: {e}"),
                ));
            }
        }
        for (name, dest) in changes {
            match dest {
                Some(d) => {
                    self.shared.define(&d);
                    self.catalog.put(d);
                    tracing::info!(destination = %name, "destination changed by a reload of the configuration");
                }
                None => {
                    if self.catalog.get(&name).is_some() {
                        self.refuse_here(&name).await;
                        self.catalog.forget(&name);
                        tracing::info!(destination = %name, "destination no longer configured: closed on this relay");
                    }
                }
            }
        }
        Ok(kept.into_iter().map(|(name, _)| name).collect())
    }

    /// A change this relay cannot apply: it takes no webhooks for `name`
    /// and delivers none (the rest of the fleet does), rather than deliver
    /// as the destination was before.
    async fn refuse_here(&self, name: &str) {
        self.catalog.close(name);
        self.shared.close(name);
        // Awaited under the turn: no later change starts a drain meanwhile.
        self.shared.stop_drain(name).await;
    }

    /// Closes `name` here and, once admissions that picked it have ended
    /// and `wait` (ms, to the deadline by the fleet's clock) has passed,
    /// stops its drain and dead-letters what its queue still holds, while
    /// the map still holds `tombstone` for it.
    fn deleting(&self, name: &str, tombstone: &str, wait: u64) {
        self.catalog.close(name);
        self.shared.remember_deleted(name);
        self.shared.close(name);
        let (catalog, shared, map) = (self.catalog.clone(), self.shared.clone(), self.map.clone());
        let (gone, tombstone) = (name.to_owned(), tombstone.to_owned());
        let task = tokio::spawn(async move {
            catalog.admissions_done(&gone).await;
            tokio::time::sleep(Duration::from_millis(wait)).await;
            shared.stop_drain(&gone).await;
            shared.forget_deliveries(&gone);
            let swept = shared.sweep(&gone, &map, &tombstone).await;
            catalog.forget(&gone);
            tracing::info!(destination = %gone, dead_lettered = swept, "deleted destination ended");
        });
        if let Some(old) = lock(&self.deletions).insert(name.to_owned(), task) {
            old.abort();
        }
    }

    /// A deletion's deadline `grace` after `now`, Unix ms.
    pub(crate) fn deadline(now: u64, grace: Duration) -> u64 {
        now.saturating_add(u64::try_from(grace.as_millis()).unwrap_or(u64::MAX))
    }

    /// The shared queue.
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_reads_back_as_written() {
        let put = Change::Put(Fields {
            name: Some("billing".into()),
            url: Some("https://billing.example/hooks".into()),
            rate: Some(5.0),
            ..Fields::default()
        });
        let text = put.text();
        assert!(text.starts_with("{\"put\":{"), "{text}");
        match Change::parse(&text) {
            Some(Change::Put(f)) => {
                assert_eq!(f.name.as_deref(), Some("billing"));
                assert_eq!(f.rate, Some(5.0));
                assert!(checked(&f).is_ok());
            }
            _ => panic!("not a put: {text}"),
        }
        let gone = Change::Deleted {
            until_unix_ms: 42,
            reason: None,
        }
        .text();
        assert_eq!(gone, "{\"deleted\":{\"until_unix_ms\":42}}");
        assert!(matches!(
            Change::parse(&gone),
            Some(Change::Deleted {
                until_unix_ms: 42,
                reason: None
            })
        ));
        assert!(Change::parse("{\"moved\":1}").is_none());
        let app = Change::App(crate::catalog::App {
            description: Some("shop".into()),
            since: 0,
            made: 0,
        })
        .text();
        assert_eq!(app, "{\"app\":{\"description\":\"shop\"}}");
        assert!(
            matches!(Change::parse(&app), Some(Change::App(a)) if a.description.as_deref() == Some("shop"))
        );
        assert!(matches!(
            Change::parse(&Change::AppDeleted.text()),
            Some(Change::AppDeleted)
        ));
        assert!(matches!(
            Change::parse(&Change::AppDeleting.text()),
            Some(Change::AppDeleting)
        ));
        let bad = Fields {
            name: Some("x".into()),
            url: Some("ftp://x".into()),
            ..Fields::default()
        };
        assert!(checked(&bad).unwrap_err().contains("url"));
    }
}
