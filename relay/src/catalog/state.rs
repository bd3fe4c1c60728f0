//! The state file: the admin API's changes to destinations, kept so a
//! restart keeps them. `state.json` in `state_dir` (the journal directory
//! unless set) holds each destination made or changed through the API as
//! its `PUT` body gave it (secrets included: the file is mode 0600) and the
//! names deleted through it. At start it is applied over the configured
//! destinations: a name it holds replaces the configured one, a name it
//! deleted is gone even if the configuration still names it.
//!
//! Every change is written whole to `state.json.tmp` (mode 0600), fsynced,
//! renamed over `state.json`, and the directory fsynced, before the API
//! answers: a crash leaves the old file or the new one, never a mix.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::{Config, ConfigError, Fields, Origin};

/// The file's name in its directory.
pub const FILE: &str = "state.json";

/// What the file holds.
#[derive(Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Saved {
    /// The format, 1.
    version: u32,
    /// Destinations made or changed through the API, by name.
    #[serde(default)]
    destinations: BTreeMap<String, Fields>,
    /// Names deleted through the API.
    #[serde(default)]
    deleted: BTreeSet<String>,
}

/// The state file of one relay.
pub struct StateFile {
    path: PathBuf,
    saved: Saved,
}

impl StateFile {
    /// Reads `dir/state.json` (none yet: nothing changed), making `dir` if
    /// it is missing.
    pub fn open(dir: &Path) -> Result<StateFile, String> {
        let path = dir.join(FILE);
        std::fs::create_dir_all(dir).map_err(|e| format!("state_dir {}: {e}", dir.display()))?;
        let saved = match std::fs::read(&path) {
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
        Ok(StateFile { path, saved })
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the API has changed anything.
    pub fn is_empty(&self) -> bool {
        self.saved.destinations.is_empty() && self.saved.deleted.is_empty()
    }

    /// Applies the saved changes over `cfg`'s destinations; what the file
    /// holds that no longer checks (a changed allow list is checked later,
    /// as for any destination) is an error naming the file.
    pub fn apply(&self, cfg: &mut Config) -> Vec<ConfigError> {
        let origin = Origin::Api(self.path.clone());
        let mut errors = Vec::new();
        cfg.destinations.retain(|d| {
            !self.saved.deleted.contains(&d.name) && !self.saved.destinations.contains_key(&d.name)
        });
        for (name, fields) in &self.saved.destinations {
            let fields = Fields {
                name: Some(name.clone()),
                ..fields.clone()
            };
            let at = format!("destinations.{name}");
            cfg.destinations
                .extend(fields.check(&at, &origin, &mut errors));
        }
        errors
    }

    /// Keeps `fields` for `name` (written and fsynced before it returns);
    /// on error nothing changed.
    pub fn put(&mut self, name: &str, fields: &Fields) -> std::io::Result<()> {
        let mut next = self.saved.clone();
        let fields = Fields {
            name: None,
            ..fields.clone()
        };
        next.destinations.insert(name.to_owned(), fields);
        next.deleted.remove(name);
        self.replace(next)
    }

    /// Keeps `name` deleted (written and fsynced before it returns); on
    /// error nothing changed.
    pub fn delete(&mut self, name: &str) -> std::io::Result<()> {
        let mut next = self.saved.clone();
        next.destinations.remove(name);
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

/// `bytes` at `path`, through a fsynced temporary file (mode 0600) renamed
/// over it, then the directory fsynced.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&tmp)?;
    #[cfg(unix)]
    file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Where the state file lives: `state_dir`, else the journal directory; none
/// without a journal.
pub fn dir_of(cfg: &Config) -> Option<PathBuf> {
    let s = &cfg.settings;
    match (&s.state_dir, s.no_journal) {
        (Some(dir), _) => Some(dir.clone()),
        (None, false) => Some(s.journal_dir.clone()),
        (None, true) => None,
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
        s.put("crm", &fields("http://crm.example/hook")).unwrap();
        s.put("gone", &fields("http://gone.example/")).unwrap();
        s.delete("gone").unwrap();
        s.delete("billing").unwrap();
        let again = StateFile::open(&dir).unwrap();
        let text = |s: &StateFile| serde_json::to_string(&s.saved).unwrap();
        assert_eq!(text(&again), text(&s));
        assert_eq!(
            again.saved.deleted.iter().collect::<Vec<_>>(),
            ["billing", "gone"]
        );
        assert!(again.saved.destinations.contains_key("crm"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join(FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(!dir.join("state.json.tmp").exists());
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
