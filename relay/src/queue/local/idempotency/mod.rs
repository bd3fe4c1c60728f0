//! Idempotent intake: a sender that retries its POST after a timeout sends
//! an `Idempotency-Key`; a repeat of a key its tenant had accepted (within
//! `idempotency_window`, default 24 h) for the same destination and body
//! answers 202 with the first id and enqueues nothing; the key with
//! another body or another destination answers 422; a repeat while the
//! first is still being admitted answers 409.
//!
//! Keys are scoped by the tenant as intake resolves it: the same key from
//! two tenants is two webhooks. Each remembered key holds its bytes (key,
//! tenant and bookkeeping) against the relay's byte budget; a refused
//! request's key is forgotten at once; when the budget needs room for new
//! work the oldest accepted keys are forgotten first.
//!
//! With a journal the keys live beside it in `idempotency.jsonl` (see
//! [`mod@file`]), opened only once the journal holds the directory's lock.

mod file;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use dripfeed::journal::Journal;

use crate::domain::budget::{ByteBudget, Ticket};
pub(crate) use crate::domain::names::body_hash;
use crate::domain::names::{DEFAULT_TENANT, MAX_NAME_BYTES};
use crate::util::mutex::lock;
use file::{KeysFile, Line};

/// The most keys remembered.
pub(crate) const MAX_KEYS: usize = 1_000_000;

/// Bytes charged per remembered key on top of its key and tenant: its map
/// entry and its place in the order.
pub(crate) const KEY_OVERHEAD: u64 = 128;

/// What a request's key says.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Begin {
    /// Not seen: admit it, then [`Idempotency::accepted`] or [`Idempotency::refused`].
    New,
    /// Accepted before with the same body: answer 202 with this id.
    Repeat(u64),
    /// Accepted before with another body: 422.
    Conflict,
    /// The first request with this key is still being admitted: 409.
    InProgress,
    /// The byte budget has no room for the key: 503.
    NoRoom,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Admitting,
    Accepted(u64),
}

/// A remembered key.
struct Entry {
    state: State,
    /// Its body's hash.
    hash: u64,
    /// The destination it named (`None`: read from an older file, any).
    destination: Option<Arc<str>>,
    at_ms: u64,
    seq: u64,
    /// Bytes of its line in the file (0 until accepted).
    line: u64,
    /// Its bytes against the budget.
    _ticket: Ticket,
}

/// The keys: by scoped key, and oldest first.
#[derive(Default)]
struct Keys {
    map: HashMap<Arc<str>, Entry>,
    order: BTreeMap<u64, Arc<str>>,
    seq: u64,
    /// Bytes of the accepted keys' lines: what a compacted file holds.
    live_lines: u64,
}

/// `tenant` and `key` as one map key, as both engines encode them (no
/// tenant and key collide with another pair).
fn scoped(tenant: &str, key: &str) -> String {
    crate::domain::names::scoped_key(tenant, key)
}

impl Keys {
    fn remove(&mut self, scoped: &str) -> Option<Entry> {
        let entry = self.map.remove(scoped)?;
        self.order.remove(&entry.seq);
        self.live_lines -= entry.line;
        Some(entry)
    }

    fn insert(&mut self, scoped: Arc<str>, mut entry: Entry) {
        self.remove(&scoped);
        self.seq += 1;
        entry.seq = self.seq;
        self.live_lines += entry.line;
        self.order.insert(self.seq, scoped.clone());
        self.map.insert(scoped, entry);
    }

    /// Forgets keys accepted before `oldest` (ms), and the oldest beyond
    /// `max_keys - 1` so one more fits.
    fn expire(&mut self, oldest: u64, max_keys: usize) {
        while let Some((_, k)) = self.order.first_key_value() {
            let k = k.clone();
            let fresh = self.map.get(&k).is_some_and(|e| e.at_ms >= oldest);
            if fresh && self.map.len() < max_keys {
                break;
            }
            self.remove(&k);
        }
    }

    /// Forgets the oldest accepted keys until `bytes` more fit in
    /// `budget`, or none is left; how many were forgotten.
    fn make_room(&mut self, budget: &ByteBudget, bytes: u64) -> usize {
        let mut forgotten = 0;
        while budget.held().saturating_add(bytes) > budget.max() {
            let oldest = self
                .order
                .values()
                .find(|k| matches!(self.map.get(*k), Some(e) if e.state != State::Admitting))
                .cloned();
            let Some(k) = oldest else { break };
            self.remove(&k);
            forgotten += 1;
        }
        forgotten
    }

    /// The accepted keys as lines, oldest first.
    fn lines(&self) -> Vec<Line> {
        self.order
            .values()
            .filter_map(|k| {
                let e = self.map.get(k)?;
                let State::Accepted(id) = e.state else {
                    return None;
                };
                let (tenant, key) = crate::domain::names::unscoped(k)?;
                Some(Line {
                    tenant: Some(tenant.to_owned()),
                    key: key.to_owned(),
                    destination: e.destination.as_deref().map(str::to_owned),
                    id,
                    hash: e.hash,
                    at_ms: e.at_ms,
                })
            })
            .collect()
    }
}

/// The accepted keys, in memory and (with a journal) on disk.
pub(crate) struct Idempotency {
    keys: Arc<Mutex<Keys>>,
    file: Option<KeysFile>,
    budget: ByteBudget,
    window: Duration,
    max_keys: usize,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Idempotency {
    /// Keys in memory only, holding their bytes in `budget`.
    pub(crate) fn in_memory(budget: ByteBudget, window: Duration, max_keys: usize) -> Self {
        Idempotency {
            keys: Arc::default(),
            file: None,
            budget,
            window,
            max_keys,
        }
    }

    /// Keys in `idempotency.jsonl` in the directory `journal` holds locked
    /// (so a second relay on the directory fails before touching it): read
    /// a line at a time, the unexpired ones kept (as many as `budget` and
    /// `max_keys` allow, newest first), the file rewritten with only them.
    pub(crate) fn open(
        journal: &Journal,
        budget: ByteBudget,
        window: Duration,
        max_keys: usize,
    ) -> std::io::Result<Self> {
        let path = journal.dir().join("idempotency.jsonl");
        let this = Idempotency::in_memory(budget, window, max_keys);
        let oldest = now_ms().saturating_sub(this.window_ms());
        file::read(&path, |line| this.load(line, oldest))?;
        let lines = this.lock().lines();
        let file = KeysFile::create(path.clone(), lines)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        Ok(Idempotency {
            file: Some(file),
            ..this
        })
    }

    /// Remembers a key read from the file, unless expired or too long.
    fn load(&self, line: Line, oldest: u64) {
        let tenant = line.tenant.as_deref().unwrap_or(DEFAULT_TENANT);
        if line.at_ms < oldest || line.key.len() > MAX_NAME_BYTES || tenant.len() > MAX_NAME_BYTES {
            return;
        }
        let scoped: Arc<str> = scoped(tenant, &line.key).into();
        let mut keys = self.lock();
        keys.expire(oldest, self.max_keys);
        let Some(ticket) = self.hold(&mut keys, &scoped) else {
            return;
        };
        let entry = Entry {
            state: State::Accepted(line.id),
            hash: line.hash,
            destination: line.destination.as_deref().map(Arc::from),
            at_ms: line.at_ms,
            seq: 0,
            line: line.encode().len() as u64,
            _ticket: ticket,
        };
        keys.insert(scoped, entry);
    }

    fn window_ms(&self) -> u64 {
        u64::try_from(self.window.as_millis()).unwrap_or(u64::MAX)
    }

    fn lock(&self) -> MutexGuard<'_, Keys> {
        lock(&self.keys)
    }

    /// The budget's bytes for a scoped key, forgetting the oldest keys if
    /// that makes room.
    fn hold(&self, keys: &mut Keys, scoped: &str) -> Option<Ticket> {
        let bytes = scoped.len() as u64 + KEY_OVERHEAD;
        self.budget.try_hold(bytes).or_else(|| {
            keys.make_room(&self.budget, bytes);
            self.budget.try_hold(bytes)
        })
    }

    /// Forgets expired keys, then the oldest accepted ones until `bytes`
    /// more fit in the budget; how many were forgotten to make room.
    pub(crate) fn make_room(&self, bytes: u64) -> usize {
        let mut keys = self.lock();
        let oldest = now_ms().saturating_sub(self.window_ms());
        keys.expire(oldest, self.max_keys.saturating_add(1));
        keys.make_room(&self.budget, bytes)
    }

    /// Looks `key` up among `tenant`'s for a request to `destination`
    /// with a body hashing to `hash`; a new key is marked as being
    /// admitted, holding its bytes.
    pub(crate) fn begin(
        &self,
        tenant: &str,
        key: &str,
        destination: &Arc<str>,
        hash: u64,
    ) -> Begin {
        let now = now_ms();
        let mut keys = self.lock();
        keys.expire(now.saturating_sub(self.window_ms()), self.max_keys);
        let scoped = scoped(tenant, key);
        match keys.map.get(scoped.as_str()) {
            Some(e) if e.hash != hash => Begin::Conflict,
            Some(e) if e.destination.as_ref().is_some_and(|d| d != destination) => Begin::Conflict,
            Some(Entry {
                state: State::Admitting,
                ..
            }) => Begin::InProgress,
            Some(Entry {
                state: State::Accepted(id),
                ..
            }) => Begin::Repeat(*id),
            None => {
                let Some(ticket) = self.hold(&mut keys, &scoped) else {
                    return Begin::NoRoom;
                };
                let entry = Entry {
                    state: State::Admitting,
                    hash,
                    destination: Some(destination.clone()),
                    at_ms: now,
                    seq: 0,
                    line: 0,
                    _ticket: ticket,
                };
                keys.insert(scoped.into(), entry);
                Begin::New
            }
        }
    }

    /// `tenant`'s key was accepted as `id`: durable before the 202.
    pub(crate) async fn accepted(&self, tenant: &str, key: &str, id: u64) -> std::io::Result<()> {
        let encoded = {
            let mut keys = self.lock();
            let keys = &mut *keys;
            let Some(entry) = keys.map.get_mut(scoped(tenant, key).as_str()) else {
                return Ok(());
            };
            let line = Line {
                tenant: Some(tenant.to_owned()),
                key: key.to_owned(),
                destination: entry.destination.as_deref().map(str::to_owned),
                id,
                hash: entry.hash,
                at_ms: entry.at_ms,
            }
            .encode();
            entry.state = State::Accepted(id);
            entry.line = line.len() as u64;
            keys.live_lines += line.len() as u64;
            line
        };
        let Some(file) = self.file.clone() else {
            return Ok(());
        };
        let keys = self.keys.clone();
        let path = file.path().to_owned();
        tokio::task::spawn_blocking(move || {
            file.append(&encoded, || lock(&keys).live_lines, || lock(&keys).lines())
        })
        .await
        .map_err(std::io::Error::other)?
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))
    }

    /// `tenant`'s key was refused: forgotten at once (its bytes given
    /// back), so a retry may try again.
    pub(crate) fn refused(&self, tenant: &str, key: &str) {
        let mut keys = self.lock();
        let scoped = scoped(tenant, key);
        if matches!(
            keys.map.get(scoped.as_str()),
            Some(Entry {
                state: State::Admitting,
                ..
            })
        ) {
            keys.remove(&scoped);
        }
    }

    /// Keys remembered now.
    pub(crate) fn count(&self) -> usize {
        self.lock().map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dest() -> Arc<str> {
        Arc::from("billing")
    }

    fn idem(max_keys: usize, budget: u64) -> (Idempotency, ByteBudget) {
        let budget = ByteBudget::new(budget);
        let idem = Idempotency::in_memory(budget.clone(), Duration::from_secs(60), max_keys);
        (idem, budget)
    }

    #[test]
    fn repeats_conflicts_and_the_bound() {
        let (idem, _) = idem(2, 1 << 20);
        assert_eq!(idem.begin("t", "a", &dest(), 1), Begin::New);
        assert_eq!(idem.begin("t", "a", &dest(), 1), Begin::InProgress);
        idem.refused("t", "a");
        assert_eq!(idem.begin("t", "a", &dest(), 1), Begin::New);
        assert_eq!(idem.begin("t", "a", &dest(), 2), Begin::Conflict);
        let other: Arc<str> = Arc::from("shipping");
        assert_eq!(
            idem.begin("t", "a", &other, 1),
            Begin::Conflict,
            "another destination"
        );
        assert_eq!(
            idem.begin("u", "a", &dest(), 2),
            Begin::New,
            "another tenant's key"
        );
        assert_eq!(idem.begin("t", "c", &dest(), 1), Begin::New); // "t/a" goes: at most 2 keys
        assert_eq!(idem.begin("t", "a", &dest(), 9), Begin::New);
    }

    #[test]
    fn keys_hold_budget_bytes_given_back_when_refused_or_forgotten() {
        let per_key = scoped("t", "k0").len() as u64 + KEY_OVERHEAD;
        let (idem, budget) = idem(100, 3 * per_key);
        assert_eq!(idem.begin("t", "k0", &dest(), 1), Begin::New);
        assert_eq!(budget.held(), per_key);
        idem.refused("t", "k0");
        assert_eq!((budget.held(), idem.count()), (0, 0), "released at once");
        for k in ["k0", "k1", "k2"] {
            assert_eq!(idem.begin("t", k, &dest(), 1), Begin::New);
        }
        assert_eq!(
            idem.begin("t", "k3", &dest(), 1),
            Begin::NoRoom,
            "all admitting"
        );
        // Accepted keys give way to new work, oldest first.
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(idem.accepted("t", "k0", 10)).unwrap();
        assert_eq!(idem.begin("t", "k3", &dest(), 1), Begin::New);
        assert_eq!(
            idem.begin("t", "k0", &dest(), 1),
            Begin::NoRoom,
            "k0 was forgotten"
        );
        assert_eq!(budget.held(), 3 * per_key);
    }
}
