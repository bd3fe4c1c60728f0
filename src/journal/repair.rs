//! A damaged segment is set aside, never deleted, and replaced by one
//! holding its good records.
//!
//! The steps, each made durable before the next:
//!
//! 1. the good records are written to `NNN.seg.tmp` and `fsync`ed, and the
//!    directory too;
//! 2. the damaged segment is renamed to `NNN.seg.damaged` (or
//!    `NNN.seg.damaged.1`, `.2`, … when that name is taken);
//! 3. `NNN.seg.tmp` is renamed to `NNN.seg`.
//!
//! A crash at any point leaves the original segment or its cleaned copy
//! under a name the next open finds: [`finish_interrupted`] removes a
//! `.tmp` whose segment is still in place (step 1 may not have finished)
//! and renames one whose segment is gone (step 2 ran, so step 1 had).

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::JournalError;
use super::files;
use super::frame::{self, Record};
use super::key::{self, HEAD, Key};
use super::segments::{self, sync_dir};

/// Where segment `seq`'s cleaned copy is written before it replaces it.
fn tmp_path(dir: &Path, seq: u64) -> PathBuf {
    let mut name = segments::path(dir, seq).into_os_string();
    name.push(".tmp");
    PathBuf::from(name)
}

/// The first free name to set segment `seq` aside under.
fn aside_path(dir: &Path, seq: u64) -> PathBuf {
    let base = segments::path(dir, seq).into_os_string();
    (0u32..)
        .map(|n| {
            let mut name = base.clone();
            name.push(".damaged");
            if n > 0 {
                name.push(format!(".{n}"));
            }
            PathBuf::from(name)
        })
        .find(|p| !p.exists())
        .unwrap_or_else(|| dir.join(format!("{seq:016x}.seg.damaged.last")))
}

/// Completes or undoes a repair a crash interrupted (see the module).
pub(crate) fn finish_interrupted(dir: &Path) -> Result<(), JournalError> {
    let entries = fs::read_dir(dir).map_err(|e| JournalError::io("list", dir, e))?;
    let mut changed = false;
    for entry in entries {
        let entry = entry.map_err(|e| JournalError::io("list", dir, e))?;
        let seq = entry
            .file_name()
            .to_str()
            .and_then(|n| n.strip_suffix(".seg.tmp"))
            .and_then(|n| u64::from_str_radix(n, 16).ok());
        let Some(seq) = seq else { continue };
        let (tmp, seg) = (entry.path(), segments::path(dir, seq));
        if entry.file_type().is_ok_and(|t| t.is_symlink()) {
            // Never renamed into a segment: a link is not a repair.
            tracing::warn!(file = %tmp.display(), "journal: removing a link left where a repair is kept");
            fs::remove_file(&tmp).map_err(|e| JournalError::io("remove", &tmp, e))?;
            changed = true;
            continue;
        }
        if seg.exists() {
            tracing::warn!(file = %tmp.display(), "journal: removing an unfinished repair (the segment is intact)");
            fs::remove_file(&tmp).map_err(|e| JournalError::io("remove", &tmp, e))?;
        } else {
            tracing::warn!(file = %tmp.display(), "journal: finishing a repair a crash interrupted");
            fs::rename(&tmp, &seg).map_err(|e| JournalError::io("rename", &tmp, e))?;
        }
        changed = true;
    }
    if changed {
        sync_dir(dir);
    }
    Ok(())
}

/// The bytes of a keyed segment holding `records`, under `key` (the
/// directory's).
pub(crate) fn rewrite(records: &[Record<'_>], key: &Key) -> Vec<u8> {
    let len = records
        .iter()
        .map(|r| r.payload.len() + frame::OVERHEAD)
        .sum::<usize>();
    let mut out = Vec::with_capacity(HEAD + len);
    out.extend_from_slice(&key::head(key));
    for r in records {
        frame::encode(&mut out, key, r.kind, r.id, r.payload);
    }
    out
}

/// Sets segment `seq` aside and puts `cleaned` (see [`rewrite`]) in its
/// place; returns the name it was set aside under.
pub(crate) fn replace(dir: &Path, seq: u64, cleaned: &[u8]) -> Result<PathBuf, JournalError> {
    let seg = segments::path(dir, seq);
    let tmp = tmp_path(dir, seq);
    // Made afresh: whatever a crash (or anyone) left at its name goes.
    match fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(JournalError::io("remove", &tmp, e));
        }
        _ => {}
    }
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    let mut file = files::open(&options, &tmp, files::FileModes::Refuse)
        .map_err(|e| JournalError::io("create", &tmp, e))?;
    file.write_all(cleaned)
        .and_then(|()| file.sync_all())
        .map_err(|e| JournalError::io("write", &tmp, e))?;
    drop(file);
    sync_dir(dir);
    let aside = aside_path(dir, seq);
    fs::rename(&seg, &aside).map_err(|e| JournalError::io("set aside", &seg, e))?;
    sync_dir(dir);
    fs::rename(&tmp, &seg).map_err(|e| JournalError::io("rename", &tmp, e))?;
    sync_dir(dir);
    Ok(aside)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::frame::Kind;
    use crate::journal::frame::build::{segment, test_key};
    use crate::journal::scan::scan;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("dripfeed-repair-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).expect("temp dir");
        d
    }

    #[test]
    fn a_damaged_segment_is_set_aside_and_its_good_records_kept() {
        let d = dir("replace");
        let mut bytes = segment(&[
            (Kind::Admit, 1, b"a"),
            (Kind::Admit, 2, b"b"),
            (Kind::Admit, 3, b"c"),
        ]);
        let key = test_key();
        let second = scan(&bytes, 64, &key).expect("segment").records[1];
        let last = second.at + second.len - 1;
        bytes[last] ^= 1;
        let seg = segments::path(&d, 5);
        fs::write(&seg, &bytes).expect("write");
        let found = scan(&bytes, 64, &key).expect("segment");
        let cleaned = rewrite(&found.records, &key);
        let aside = replace(&d, 5, &cleaned).expect("replace");
        assert!(aside.ends_with("0000000000000005.seg.damaged"));
        assert_eq!(fs::read(&aside).expect("aside"), bytes, "kept as it was");
        let now = fs::read(&seg).expect("segment");
        let ids: Vec<_> = scan(&now, 64, &key)
            .expect("segment")
            .records
            .iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(ids, [1, 3]);
        // Damaged again later: a second name, the first copy untouched.
        let again = replace(&d, 5, &cleaned).expect("replace");
        assert!(again.ends_with("0000000000000005.seg.damaged.1"));
        assert_eq!(fs::read(&aside).expect("aside"), bytes);
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn a_crash_at_any_step_leaves_the_segment_or_its_cleaned_copy() {
        let d = dir("crash");
        let cleaned = segment(&[(Kind::Admit, 1, b"kept")]);
        // Crashed in step 1: the segment is in place, the copy may be partial.
        fs::write(segments::path(&d, 1), b"original").expect("write");
        fs::write(tmp_path(&d, 1), &cleaned[..5]).expect("write");
        // Crashed after step 2: the segment was set aside, the copy is whole.
        fs::write(tmp_path(&d, 2), &cleaned).expect("write");
        fs::write(d.join("0000000000000002.seg.damaged"), b"damaged").expect("write");
        finish_interrupted(&d).expect("finish");
        assert_eq!(fs::read(segments::path(&d, 1)).expect("seg 1"), b"original");
        assert!(!tmp_path(&d, 1).exists(), "a partial copy is removed");
        assert_eq!(fs::read(segments::path(&d, 2)).expect("seg 2"), cleaned);
        assert!(!tmp_path(&d, 2).exists());
        assert!(
            d.join("0000000000000002.seg.damaged").exists(),
            "never deleted"
        );
        let _ = fs::remove_dir_all(&d);
    }
}
