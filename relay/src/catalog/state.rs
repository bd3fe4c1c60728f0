//! The state file an earlier version kept: `state.json` in `state_dir`,
//! each destination made or changed through the API as its `PUT` body gave
//! it, and the names deleted through it, rewritten whole at every change.
//! The registry ([`super::registry`]) replaces it: at the first start the
//! file is read, migrated into the registry and renamed
//! `state.json.migrated`. `check-config` and `print-config` still read one
//! that was not migrated yet.

use std::collections::BTreeSet;
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
    let origin = Origin::Api(path.into());
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

/// What `dir`'s state file keeps, to write into the registry, in the order
/// it was made (deletions last): each name with its fields, or `None` for
/// one deleted; nothing when there is no file.
pub(crate) fn migrate(dir: &Path) -> Result<Vec<(String, Option<Fields>)>, String> {
    let path = dir.join(FILE);
    if !path.exists() {
        return Ok(Vec::new());
    }
    let saved = read(&path)?;
    let mut out = Vec::new();
    for fields in saved.destinations {
        if let Some(name) = fields.name.clone() {
            out.push((name, Some(fields)));
        }
    }
    out.extend(saved.deleted.into_iter().map(|name| (name, None)));
    tracing::info!(file = %path.display(), changes = out.len(), "the state file is migrated into the registry");
    Ok(out)
}

/// The state file, once migrated, renamed `state.json.migrated` (kept, not
/// read again).
pub(crate) fn migrated(dir: &Path) {
    let path = dir.join(FILE);
    if let Err(e) = std::fs::rename(&path, dir.join("state.json.migrated")) {
        tracing::warn!(file = %path.display(), error = %e, "the migrated state file could not be renamed: it is not read again while the registry holds changes");
    }
}

/// Removes what a crashed run of an earlier version left half-written
/// (`state.json.PID.tmp`, owner-only, perhaps holding secrets).
pub(crate) fn remove_stale(dir: &Path) {
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

/// Where the registry lives: `state_dir`, else the journal directory; none
/// without a journal.
pub(crate) fn dir_of(cfg: &Config) -> Option<PathBuf> {
    cfg.paths.state_dir.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_corrupt_file_is_refused_with_its_path() {
        let dir =
            std::env::temp_dir().join(format!("dripfeed-state-corrupt-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(FILE), b"{\"version\":1,\"destinations\":{").unwrap();
        let e = migrate(&dir).err().unwrap();
        assert!(e.contains("state.json") && e.contains("remove it"), "{e}");
        std::fs::write(dir.join(FILE), b"{\"version\":2}").unwrap();
        assert!(migrate(&dir).err().unwrap().contains("version 2"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
