//! The registry: the admin API's changes to destinations, kept so a restart
//! keeps them, in a small store of its own (`registry.kv` in `state_dir`,
//! the journal directory unless set: [`Kv`], an append-only checksummed
//! file with its keys in memory).
//! Each destination made or changed through the API is kept as its body
//! gave it (secrets included: the file is owner-only), and each name
//! deleted through it as a tombstone. At start it is applied over the
//! configured destinations: a name it holds replaces the configured one, a
//! name it deleted is gone even if the configuration still names it.
//!
//! A change costs one ordered-map write, O(log n), and one appended frame,
//! durable (fsynced) before the API answers; changes arriving together share one transaction and its
//! fsync (a writer thread takes every change waiting at once, as the
//! journal does). The store holds an exclusive lock on its file for as
//! long as the relay runs: two relays never share it.
//!
//! A `state.json` that an earlier version kept in the directory is
//! migrated at the first start: its changes are written to the registry in
//! the order they were made, and the file is renamed `state.json.migrated`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::util::kv::{Kv, Table};
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use crate::config::{Config, ConfigError, Fields, Origin};

/// The store's file in its directory.
pub(crate) const FILE: &str = "registry.kv";

/// An earlier version's store (redb), no longer read.
const EARLIER: &str = "registry.redb";

/// Destinations by name: a [`Record`] as JSON.
const DESTINATIONS: Table = 0;

/// Applications by name: a [`super::App`] as JSON.
const APPS: Table = 1;

/// The tables.
const TABLES: usize = 2;

/// What the registry keeps of a name.
// Fields is large, and these are few and short-lived (one per change):
// boxing it would cost every reader an indirection for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Kept {
    /// Made or changed through the API: its fields, with its name.
    Put(Fields),
    /// Deleted through the API.
    Deleted,
}

/// A name's record: what is kept, and its place in the order the API's
/// changes were first made (the listing's order after the configured).
#[derive(Clone, Serialize, Deserialize)]
struct Record {
    seq: u64,
    kept: Kept,
}

/// One write for the writer thread: `None` removes the name's record.
struct Write {
    /// Its table.
    table: Table,
    name: String,
    bytes: Option<Vec<u8>>,
    done: oneshot::Sender<Result<(), String>>,
}

/// Why the registry did not open.
#[derive(Debug)]
pub(crate) enum Opening {
    /// It could not be read or written.
    Failed(String),
    /// A state file to migrate does not check.
    Refused(Vec<ConfigError>),
}

impl From<String> for Opening {
    fn from(e: String) -> Opening {
        Opening::Failed(e)
    }
}

/// The registry of one relay (see the [module](self) docs).
pub(crate) struct Registry {
    path: PathBuf,
    /// To the writer thread (`None` once dropped).
    writes: Option<std::sync::mpsc::Sender<Write>>,
    writer: Option<std::thread::JoinHandle<()>>,
    /// The store, read here (a read sees every write answered before it)
    /// and written by the writer thread. Its keys are in memory, its
    /// values on disk.
    db: Arc<Kv>,
    next_seq: AtomicU64,
    /// Transactions committed by the writer (each one fsync).
    #[cfg_attr(not(test), allow(dead_code))]
    commits: std::sync::Arc<AtomicU64>,
}

impl Registry {
    /// Opens (or makes) the registry in `dir` (made owner-only if
    /// missing), taking its lock; migrates a `state.json` found there
    /// while it holds nothing, once the file checks over `cfg` whole.
    pub(crate) fn open(dir: &Path, cfg: &Config) -> Result<Registry, Opening> {
        let at = |e: &dyn std::fmt::Display| format!("state_dir {}: {e}", dir.display());
        crate::util::private::dir(dir).map_err(|e| at(&e))?;
        let path = dir.join(FILE);
        let db = open_db(&path)?;
        // Held: no other relay works here.
        super::state::remove_stale(dir);
        let mut kept = load(&db).map_err(|e| format!("registry {}: {e}", path.display()))?;
        let migrated = match kept.is_empty() {
            true => {
                // Nothing half-migrated, nothing migrated that does not check.
                super::state::apply_kept(dir, &mut cfg.clone()).map_err(Opening::Refused)?;
                super::state::migrate(dir)?
            }
            false => Vec::new(),
        };
        let next_seq = AtomicU64::new(
            kept.values()
                .map(|r| r.seq.saturating_add(1))
                .max()
                .unwrap_or(0),
        );
        if !migrated.is_empty() {
            let mut txn = db.write();
            for (name, fields) in migrated {
                let record = Record {
                    seq: next_seq.fetch_add(1, Ordering::Relaxed),
                    kept: fields.map_or(Kept::Deleted, Kept::Put),
                };
                let bytes = serde_json::to_vec(&record).map_err(|e| at(&e))?;
                txn.insert(DESTINATIONS, name.as_bytes(), &bytes);
                kept.insert(name, record);
            }
            txn.commit(true).map_err(|e| at(&e))?;
            super::state::migrated(dir);
        }
        drop(kept);
        let db = Arc::new(db);
        let (writes, rx) = std::sync::mpsc::channel();
        let commits = Arc::new(AtomicU64::new(0));
        let counted = commits.clone();
        let written = db.clone();
        let writer = std::thread::Builder::new()
            .name("dripfeed-registry".into())
            .spawn(move || writer(&written, rx, &counted))
            .map_err(|e| at(&e))?;
        Ok(Registry {
            path,
            writes: Some(writes),
            writer: Some(writer),
            db,
            next_seq,
            commits,
        })
    }

    /// Its file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// How many transactions (fsyncs) the writes took so far.
    #[cfg(test)]
    pub(crate) fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// Whether the API has changed anything.
    pub(crate) fn is_empty(&self) -> bool {
        self.db
            .read()
            .range(DESTINATIONS, b"", None)
            .next()
            .is_none()
    }

    /// Whether the admin API changed or deleted `name`.
    pub(crate) fn holds(&self, name: &str) -> bool {
        matches!(self.record(name), Ok(Some(_)))
    }

    /// What the registry keeps of `name`.
    pub(crate) fn kept(&self, name: &str) -> Result<Option<Kept>, String> {
        Ok(self.record(name)?.map(|r| r.kept))
    }

    /// `name`'s record: one map lookup and one read of its value.
    fn record(&self, name: &str) -> Result<Option<Record>, String> {
        let Some(value) = self.db.read().get(DESTINATIONS, name.as_bytes())? else {
            return Ok(None);
        };
        serde_json::from_slice(&value)
            .map(Some)
            .map_err(|e| format!("the record of {name:?} does not read: {e}"))
    }

    /// Applies what it keeps over `cfg`'s destinations; what no longer
    /// checks (or does not read) is an error naming the registry.
    pub(crate) fn apply(&self, cfg: &mut Config) -> Vec<ConfigError> {
        match load(&self.db) {
            Ok(kept) => apply(&kept, &self.path, cfg),
            Err(e) => vec![ConfigError::new(
                "state_dir",
                None,
                format!("registry {}: {e}", self.path.display()),
            )],
        }
    }

    /// Keeps `fields` for `name`, durable before it returns; on error
    /// nothing changed.
    pub(crate) async fn put(&self, name: &str, fields: &Fields) -> Result<(), String> {
        let fields = Fields {
            name: Some(name.to_owned()),
            ..fields.clone()
        };
        self.keep(name, Some(Kept::Put(fields))).await
    }

    /// Keeps `name` deleted, durable before it returns; on error nothing
    /// changed.
    pub(crate) async fn delete(&self, name: &str) -> Result<(), String> {
        self.keep(name, Some(Kept::Deleted)).await
    }

    /// Puts back what the registry kept of `name` before a change (`None`:
    /// nothing).
    pub(crate) async fn restore(&self, name: &str, before: Option<Kept>) -> Result<(), String> {
        self.keep(name, before).await
    }

    /// Writes `kept` for `name` (`None`: removes its record), durable
    /// before it returns. One change of a name at a time (its caller holds
    /// the name's lock), so the place read here is still its own.
    async fn keep(&self, name: &str, kept: Option<Kept>) -> Result<(), String> {
        let seq = match self.record(name)? {
            Some(r) => r.seq,
            None => self.next_seq.fetch_add(1, Ordering::Relaxed),
        };
        let record = kept.map(|kept| Record { seq, kept });
        let bytes = match &record {
            Some(r) => Some(serde_json::to_vec(r).map_err(|e| e.to_string())?),
            None => None,
        };
        self.send(DESTINATIONS, name, bytes).await
    }

    /// Writes `bytes` for `name` in `table` (`None`: removes it), durable
    /// before it returns.
    async fn send(&self, table: Table, name: &str, bytes: Option<Vec<u8>>) -> Result<(), String> {
        let (done, answer) = oneshot::channel();
        let write = Write {
            table,
            name: name.to_owned(),
            bytes,
            done,
        };
        self.writes
            .as_ref()
            .and_then(|w| w.send(write).ok())
            .ok_or_else(|| "the registry's writer has stopped".to_owned())?;
        answer
            .await
            .map_err(|_| "the registry's writer has stopped".to_owned())?
    }

    /// Keeps application `name`, durable before it returns.
    pub(crate) async fn put_app(&self, name: &str, app: &super::App) -> Result<(), String> {
        let bytes = serde_json::to_vec(app).map_err(|e| e.to_string())?;
        self.send(APPS, name, Some(bytes)).await
    }

    /// Forgets application `name`, durable before it returns.
    pub(crate) async fn delete_app(&self, name: &str) -> Result<(), String> {
        self.send(APPS, name, None).await
    }

    /// Every application kept.
    pub(crate) fn apps(&self) -> Result<Vec<(String, super::App)>, String> {
        rows(&self.db, APPS, "application")
    }
}

/// The writer ends once every write sent is committed, and with it the
/// store and its lock.
impl Drop for Registry {
    fn drop(&mut self) {
        drop(self.writes.take());
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

/// The store at `path`, made if missing (owner-only, never through a
/// link), locked. An earlier version's `registry.redb` beside it is not
/// read: refused, saying so, rather than its changes silently dropped.
fn open_db(path: &Path) -> Result<Kv, String> {
    let at = |e: &dyn std::fmt::Display| format!("registry {}: {e}", path.display());
    let earlier = path.with_file_name(EARLIER);
    if earlier.exists() && !path.exists() {
        return Err(format!(
            "{} is an earlier version's registry, which this version does not read: \
             make the admin API's changes again (the earlier version's print-config shows \
             them) and remove the file",
            earlier.display()
        ));
    }
    Kv::open(path, TABLES).map_err(|e| match e.contains("held by another process") {
        true => at(&"in use by another process (another relay on the same data_dir?): give each relay its own data_dir, or state_dir"),
        false => at(&e),
    })
}

/// Every row of `table`, by name, each value as JSON (`what` names one
/// in an error).
fn rows<T: serde::de::DeserializeOwned>(
    db: &Kv,
    table: Table,
    what: &str,
) -> Result<Vec<(String, T)>, String> {
    let read = db.read();
    read.range(table, b"", None)
        .map(|(name, value)| {
            let name = String::from_utf8_lossy(name).into_owned();
            let row = serde_json::from_slice(&value.bytes()?)
                .map_err(|e| format!("the {what} {name:?} does not read: {e}"))?;
            Ok((name, row))
        })
        .collect()
}

/// Every record in the store.
fn load(db: &Kv) -> Result<BTreeMap<String, Record>, String> {
    Ok(rows(db, DESTINATIONS, "record of")?.into_iter().collect())
}

/// The writer: takes every write waiting, applies them in one transaction
/// (one fsync), answers each.
fn writer(db: &Kv, rx: std::sync::mpsc::Receiver<Write>, commits: &AtomicU64) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
        }
        let written = commit(db, &batch);
        commits.fetch_add(1, Ordering::Relaxed);
        for w in batch {
            let _ = w.done.send(written.clone());
        }
    }
}

/// `batch` in one durable transaction.
fn commit(db: &Kv, batch: &[Write]) -> Result<(), String> {
    let mut txn = db.write();
    for w in batch {
        match &w.bytes {
            Some(bytes) => txn.insert(w.table, w.name.as_bytes(), bytes),
            None => {
                txn.remove(w.table, w.name.as_bytes());
            }
        }
    }
    txn.commit(true)
}

/// `kept` (read from `path`) over `cfg`'s destinations, in the order the
/// API first made them.
fn apply(kept: &BTreeMap<String, Record>, path: &Path, cfg: &mut Config) -> Vec<ConfigError> {
    let origin = Origin::Api(path.into());
    let mut errors = Vec::new();
    cfg.destinations.retain(|d| !kept.contains_key(&d.name));
    let mut made: Vec<(&String, &Record)> = kept.iter().collect();
    made.sort_by_key(|(_, r)| r.seq);
    for (name, record) in made {
        if let Kept::Put(fields) = &record.kept {
            let at = format!("destinations.{name}");
            let fields = Fields {
                name: Some(name.clone()),
                ..fields.clone()
            };
            cfg.destinations
                .extend(fields.check(&at, &origin, &mut errors));
        }
    }
    errors
}

/// For `check-config` and `print-config`: the changes kept in `dir` (if
/// any) applied over `cfg`; `Ok(None)` when there is no registry, and a
/// note when it is in use (a relay runs on it: its changes are not shown).
pub(crate) fn apply_kept(dir: &Path, cfg: &mut Config) -> Result<Option<String>, Vec<ConfigError>> {
    let path = dir.join(FILE);
    if !path.exists() {
        return super::state::apply_kept(dir, cfg).map(|applied| {
            applied.then(|| {
                format!(
                    "with the admin API's changes kept in {}",
                    dir.join(super::state::FILE).display()
                )
            })
        });
    }
    let refused = |e: String| vec![ConfigError::new("state_dir", None, e)];
    let db = match Kv::open(&path, TABLES) {
        Ok(db) => db,
        Err(e) if e.contains("held by another process") => {
            return Ok(Some(format!(
                "a relay runs on {}: the admin API's changes kept there are not shown",
                path.display()
            )));
        }
        Err(e) => return Err(refused(format!("registry {e}"))),
    };
    let kept = load(&db).map_err(|e| refused(format!("registry {}: {e}", path.display())))?;
    let errors = apply(&kept, &path, cfg);
    match errors.is_empty() {
        true => Ok(Some(format!(
            "with the admin API's changes kept in {}",
            path.display()
        ))),
        false => Err(errors),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(url: &str) -> Fields {
        Fields {
            url: Some(url.into()),
            rate: Some(5.0),
            secret: Some("whsec_c2VjcmV0".into()),
            ..Fields::default()
        }
    }

    fn none() -> Config {
        crate::config::tests::load_with(&[], &[], None).unwrap()
    }

    fn scratch(tag: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("dripfeed-registry-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn an_earlier_versions_registry_is_refused_not_dropped() {
        let dir = scratch("earlier");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(EARLIER), b"redb").unwrap();
        let refused = Registry::open(&dir, &none());
        assert!(
            matches!(&refused, Err(Opening::Failed(e)) if e.contains("earlier version")),
            "{:?}",
            refused.err()
        );
        assert!(!dir.join(FILE).exists(), "nothing made beside it");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn changes_survive_a_reopen_in_the_order_made_and_the_file_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch("reopen");
        {
            let r = Registry::open(&dir, &none()).unwrap();
            assert!(r.is_empty());
            r.put("zeta", &fields("http://zeta.example/hook"))
                .await
                .unwrap();
            r.put("crm", &fields("http://crm.example/hook"))
                .await
                .unwrap();
            r.put("gone", &fields("http://gone.example/"))
                .await
                .unwrap();
            r.delete("gone").await.unwrap();
            r.delete("billing").await.unwrap();
            r.put("zeta", &fields("http://zeta2.example/hook"))
                .await
                .unwrap();
            assert!(
                matches!(Registry::open(&dir, &none()), Err(Opening::Failed(e)) if e.contains("in use")),
                "one relay at a time"
            );
        }
        let mode = std::fs::metadata(dir.join(FILE))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
        let r = Registry::open(&dir, &none()).unwrap();
        assert!(r.holds("billing") && r.holds("gone") && !r.holds("other"));
        let mut cfg = crate::config::tests::load_with(
            &["--destination", "billing=http://billing.example/"],
            &[],
            None,
        )
        .unwrap();
        assert!(r.apply(&mut cfg).is_empty());
        let names: Vec<_> = cfg.destinations.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["zeta", "crm"], "first made first; billing deleted");
        assert_eq!(
            cfg.destinations[0].url.as_str(),
            "http://zeta2.example/hook"
        );
        r.restore("zeta", None).await.unwrap();
        assert!(!r.holds("zeta"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_arriving_together_share_a_transaction() {
        let dir = scratch("batch");
        let r = std::sync::Arc::new(Registry::open(&dir, &none()).unwrap());
        let all: Vec<_> = (0..200)
            .map(|i| {
                let r = r.clone();
                tokio::spawn(
                    async move { r.put(&format!("d{i}"), &fields("http://x.example/")).await },
                )
            })
            .collect();
        for w in all {
            w.await.unwrap().unwrap();
        }
        assert!(r.commits() < 200, "{} commits for 200 writes", r.commits());
        drop(r);
        let r = Registry::open(&dir, &none()).unwrap();
        assert!((0..200).all(|i| r.holds(&format!("d{i}"))));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_state_file_is_migrated_once_in_its_order() {
        let dir = scratch("migrate");
        std::fs::create_dir_all(&dir).unwrap();
        let saved = serde_json::json!({"version": 1, "destinations": [
            {"name": "b", "url": "http://b.example/"},
            {"name": "a", "url": "http://a.example/"}
        ], "deleted": ["gone"]});
        std::fs::write(dir.join(super::super::state::FILE), saved.to_string()).unwrap();
        std::fs::write(dir.join("state.json.77.tmp"), b"{}").unwrap();
        let r = Registry::open(&dir, &none()).unwrap();
        assert!(!dir.join(super::super::state::FILE).exists());
        assert!(dir.join("state.json.migrated").exists());
        assert!(
            !dir.join("state.json.77.tmp").exists(),
            "a crashed run's file removed"
        );
        let mut cfg = crate::config::tests::load_with(
            &["--destination", "gone=http://gone.example/"],
            &[],
            None,
        )
        .unwrap();
        assert!(r.apply(&mut cfg).is_empty());
        let names: Vec<_> = cfg.destinations.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["b", "a"]);
        drop(r);
        // Not migrated again: a later state.json is not read.
        std::fs::write(dir.join(super::super::state::FILE), b"not json").unwrap();
        assert!(Registry::open(&dir, &none()).unwrap().holds("gone"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
