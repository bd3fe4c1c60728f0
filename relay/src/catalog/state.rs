//! The state file: the admin API's changes to destinations, kept so a
//! restart keeps them. `state.json` in `state_dir` (the journal directory
//! unless set) holds each destination made or changed through the API as
//! its `PUT` body gave it (secrets included: the file is mode 0600) and the
//! names deleted through it. At start it is applied over the configured
//! destinations: a name it holds replaces the configured one, a name it
//! deleted is gone even if the configuration still names it.
//!
//! Every change is written whole to a new temporary file (mode 0600, made
//! afresh: never through a link someone left there), fsynced, renamed over
//! `state.json`, and the directory fsynced, before the API answers: a crash
//! leaves the old file or the new one, never a mix. The relay holds
//! `state.lock` in the directory for as long as it runs: two relays never
//! share a state file.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::{Config, ConfigError, Fields, Origin};

/// The file's name in its directory.
pub(crate) const FILE: &str = "state.json";

/// What the file holds.
#[derive(Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Saved {
    /// The format, 1.
    version: u32,
    /// Destinations made or changed through the API, each with its name,
    /// in the order they were made.
    #[serde(default)]
    destinations: Vec<Fields>,
    /// Names deleted through the API.
    #[serde(default)]
    deleted: BTreeSet<String>,
}

impl Saved {
    fn find(&self, name: &str) -> Option<usize> {
        self.destinations
            .iter()
            .position(|f| f.name.as_deref() == Some(name))
    }
}

/// What the file held before a change, to put back if the change is
/// refused after all.
pub(crate) struct Undo(Saved);

/// The state file of one relay.
pub(crate) struct StateFile {
    path: PathBuf,
    saved: Saved,
    /// `state.lock`, held while the relay runs.
    _lock: std::fs::File,
}

/// Reads `path` (absent: nothing changed yet).
fn read(path: &Path) -> Result<Saved, String> {
    let read = || -> std::io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        let mut file = crate::util::private::read(path)?;
        std::io::Read::read_to_end(&mut file, &mut bytes)?;
        Ok(bytes)
    };
    let saved = match read() {
            Ok(bytes) => serde_json::from_slice::<Saved>(&bytes).map_err(|e| {
                format!(
                    "state file {}: {e} (it holds the admin API's changes: fix it, or remove it to start from the configuration alone)",
                    path.display()
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Saved {
                version: 1,
                ..Saved::default()
            },
            Err(e) => return Err(format!("state file {}: {e}", path.display())),
        };
    if saved.version != 1 {
        return Err(format!(
            "state file {}: version {} is not one this relay reads (1)",
            path.display(),
            saved.version
        ));
    }
    Ok(saved)
}

/// For `check-config` and `print-config`: the changes kept in `dir` (if
/// any) applied over `cfg`, without taking the lock; `Ok(false)` when
/// there is no state file.
pub(crate) fn apply_kept(dir: &Path, cfg: &mut Config) -> Result<bool, Vec<ConfigError>> {
    let path = dir.join(FILE);
    if !path.exists() {
        return Ok(false);
    }
    let saved = read(&path).map_err(|e| vec![ConfigError::new("state_dir", None, e)])?;
    let errors = apply(&saved, &path, cfg);
    match errors.is_empty() {
        true => Ok(true),
        false => Err(errors),
    }
}

/// `saved` (read from `path`) over `cfg`'s destinations.
fn apply(saved: &Saved, path: &Path, cfg: &mut Config) -> Vec<ConfigError> {
    let origin = Origin::Api(path.to_owned());
    let mut errors = Vec::new();
    for (i, fields) in saved.destinations.iter().enumerate() {
        let Some(name) = &fields.name else { continue };
        if saved.destinations[..i]
            .iter()
            .any(|f| f.name.as_ref() == Some(name))
        {
            errors.push(ConfigError::new(
                format!("destinations.{name}"),
                Some(origin.clone()),
                "named twice in the state file: fix it (keep the one meant), or remove the \
                 file to start from the configuration alone",
            ));
        }
    }
    cfg.destinations
        .retain(|d| !saved.deleted.contains(&d.name) && saved.find(&d.name).is_none());
    for fields in &saved.destinations {
        let name = fields.name.clone().unwrap_or_default();
        let at = format!("destinations.{name}");
        cfg.destinations
            .extend(fields.clone().check(&at, &origin, &mut errors));
    }
    errors
}

impl StateFile {
    /// Takes `dir`'s lock and reads `dir/state.json` (none yet: nothing
    /// changed), making `dir` (mode 0700) if it is missing.
    pub(crate) fn open(dir: &Path) -> Result<StateFile, String> {
        let path = dir.join(FILE);
        crate::util::private::dir(dir).map_err(|e| format!("state_dir {}: {e}", dir.display()))?;
        let lock_path = dir.join("state.lock");
        let mut options = std::fs::OpenOptions::new();
        options.create(true).truncate(false).write(true);
        let lock = crate::util::private::open(&options, &lock_path)
            .map_err(|e| format!("state_dir {}: {e}", lock_path.display()))?;
        match fs4::fs_std::FileExt::try_lock_exclusive(&lock) {
            Ok(true) => {}
            Ok(false) => {
                return Err(format!(
                    "state_dir {}: in use by another process (state.lock): give each relay its own",
                    dir.display()
                ));
            }
            Err(e) => return Err(format!("state_dir {}: {e}", lock_path.display())),
        }
        // Held: no other relay writes here. What a crashed run left
        // half-written (a temporary file, 0600, perhaps holding secrets)
        // goes.
        remove_stale(dir);
        let saved = read(&path)?;
        Ok(StateFile {
            path,
            saved,
            _lock: lock,
        })
    }

    /// Its path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the API has changed anything.
    pub(crate) fn is_empty(&self) -> bool {
        self.saved.destinations.is_empty() && self.saved.deleted.is_empty()
    }

    /// Applies the saved changes over `cfg`'s destinations; what the file
    /// holds that no longer checks is an error naming the file.
    pub(crate) fn apply(&self, cfg: &mut Config) -> Vec<ConfigError> {
        apply(&self.saved, &self.path, cfg)
    }

    /// What the file holds now, to [`restore`](Self::restore) if the change
    /// about to be made is refused after all.
    pub(crate) fn undo_point(&self) -> Undo {
        Undo(self.saved.clone())
    }

    /// Puts back what the file held at `undo`.
    pub(crate) fn restore(&mut self, undo: Undo) -> std::io::Result<()> {
        let written = self.replace(undo.0.clone());
        // Even unwritten, what it holds in memory is what stands: the next
        // change writes that, not the refused one.
        self.saved = undo.0;
        written
    }

    /// Whether the admin API changed or deleted `name` (the file holds it).
    pub(crate) fn holds(&self, name: &str) -> bool {
        self.saved.find(name).is_some() || self.saved.deleted.contains(name)
    }

    /// Keeps `fields` for `name` (written and fsynced before it returns);
    /// on error nothing changed.
    pub(crate) fn put(&mut self, name: &str, fields: &Fields) -> std::io::Result<()> {
        let mut next = self.saved.clone();
        let fields = Fields {
            name: Some(name.to_owned()),
            ..fields.clone()
        };
        match next.find(name) {
            Some(i) => next.destinations[i] = fields,
            None => next.destinations.push(fields),
        }
        next.deleted.remove(name);
        self.replace(next)
    }

    /// Keeps `name` deleted (written and fsynced before it returns); on
    /// error nothing changed.
    pub(crate) fn delete(&mut self, name: &str) -> std::io::Result<()> {
        let mut next = self.saved.clone();
        if let Some(i) = next.find(name) {
            next.destinations.remove(i);
        }
        next.deleted.insert(name.to_owned());
        self.replace(next)
    }

    fn replace(&mut self, next: Saved) -> std::io::Result<()> {
        let text = serde_json::to_vec_pretty(&next).map_err(std::io::Error::other)?;
        write_atomically(&self.path, &text)?;
        self.saved = next;
        Ok(())
    }
}

/// Removes the temporary files (`state.json.PID.tmp`) a crashed run left
/// in `dir`.
fn remove_stale(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let stale = name
            .strip_prefix("state.json.")
            .and_then(|rest| rest.strip_suffix(".tmp"))
            .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()));
        if stale {
            match std::fs::remove_file(entry.path()) {
                Ok(()) => {
                    tracing::info!(file = %entry.path().display(), "a crashed run's temporary state file removed")
                }
                Err(e) => {
                    tracing::warn!(file = %entry.path().display(), error = %e, "a crashed run's temporary state file could not be removed")
                }
            }
        }
    }
}

/// `bytes` at `path`, through a temporary file made afresh (mode 0600),
/// fsynced and renamed over it; then the directory is fsynced. Once the
/// rename is done the change is made (a failing directory fsync is logged:
/// the file is in place).
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("json.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp); // a crashed run's, never followed
    let written = (|| {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        let mut file = crate::util::private::open(&options, &tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if let Some(dir) = path.parent()
        && let Err(e) = std::fs::File::open(dir).and_then(|d| d.sync_all())
    {
        tracing::warn!(file = %path.display(), error = %e, "state file written but its directory could not be fsynced");
    }
    Ok(())
}

/// Where the state file lives: `state_dir`, else the journal directory; none
/// without a journal.
pub(crate) fn dir_of(cfg: &Config) -> Option<PathBuf> {
    cfg.paths.state_dir.clone()
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

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("dripfeed-state-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn changes_survive_a_reopen_and_the_file_is_private() {
        let dir = scratch("reopen");
        let mut s = StateFile::open(&dir).unwrap();
        assert!(s.is_empty());
        s.put("zeta", &fields("http://zeta.example/hook")).unwrap();
        s.put("crm", &fields("http://crm.example/hook")).unwrap();
        s.put("gone", &fields("http://gone.example/")).unwrap();
        s.delete("gone").unwrap();
        s.delete("billing").unwrap();
        let undo = s.undo_point();
        s.put("refused", &fields("http://refused.example/"))
            .unwrap();
        s.restore(undo).unwrap();
        let err = StateFile::open(&dir).err().unwrap();
        assert!(err.contains("in use by another process"), "{err}");
        let text = |s: &StateFile| serde_json::to_string(&s.saved).unwrap();
        let before = text(&s);
        drop(s);
        let again = StateFile::open(&dir).unwrap();
        assert_eq!(text(&again), before);
        let names: Vec<_> = again
            .saved
            .destinations
            .iter()
            .map(|f| f.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["zeta", "crm"], "in the order they were made");
        assert_eq!(
            again.saved.deleted.iter().collect::<Vec<_>>(),
            ["billing", "gone"]
        );

        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join(FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_corrupt_file_is_refused_with_its_path() {
        let dir = scratch("corrupt");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(FILE), b"{\"version\":1,\"destinations\":{").unwrap();
        let e = StateFile::open(&dir).err().unwrap();
        assert!(e.contains("state.json") && e.contains("remove it"), "{e}");
        std::fs::write(dir.join(FILE), b"{\"version\":2}").unwrap();
        assert!(StateFile::open(&dir).err().unwrap().contains("version 2"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
