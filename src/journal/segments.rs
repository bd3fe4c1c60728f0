//! The journal directory: its lock and its segment files (created private,
//! listed, read back). Recovery reads them ([`recovery`](super::recovery)).
//!
//! Segments are named by a sequence number (`0000000000000001.seg`, …) and
//! only ever appended to; the oldest goes first when every job it admitted
//! has ended, so an `End` record is never deleted before the `Admit` it
//! answers.
//!
//! The journal keeps each segment open while it holds unfinished jobs, so
//! their records can be read back even if the files are unlinked (the
//! directory deleted): see the writer's `rejournal`.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::JournalError;
use super::files::{self, FileModes};
use super::key::{self, Key};

/// The file of segment `seq`.
pub(crate) fn path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("{seq:016x}.seg"))
}

/// The lock file's name in a journal directory.
pub(crate) const LOCK: &str = "LOCK";

/// Takes the directory's lock file, creating the directory if need be
/// (`again`: once it was gone, where a link found is refused, never
/// followed). Held for as long as the returned file is open; the OS drops
/// it when the process dies, so a killed process never leaves it stale.
pub(crate) fn lock(dir: &Path, modes: FileModes, again: bool) -> Result<File, JournalError> {
    let made = match again {
        true => files::dir_no_link(dir, modes),
        false => files::dir(dir, modes),
    };
    made.map_err(|e| JournalError::io("create", dir, e))?;
    let path = dir.join(LOCK);
    let mut options = OpenOptions::new();
    options.create(true).truncate(false).write(true);
    let file =
        files::open(&options, &path, modes).map_err(|e| JournalError::io("open", &path, e))?;
    match fs4::fs_std::FileExt::try_lock_exclusive(&file) {
        Ok(true) => Ok(file),
        Ok(false) => Err(JournalError::Locked {
            dir: dir.to_path_buf(),
        }),
        Err(e) => Err(JournalError::io("lock", &path, e)),
    }
}

/// Creates segment `seq` with its header (magic and `key`), durable along
/// with its name.
pub(crate) fn create(dir: &Path, seq: u64, key: &Key) -> Result<File, JournalError> {
    let path = path(dir, seq);
    let mut options = OpenOptions::new();
    options.create_new(true).read(true).append(true);
    // Made here (create_new): the mode is checked, not fixed.
    let mut file = files::open(&options, &path, FileModes::Refuse)
        .map_err(|e| JournalError::io("create", &path, e))?;
    file.write_all(&key::head(key))
        .and_then(|()| file.sync_data())
        .map_err(|e| JournalError::io("write", &path, e))?;
    sync_dir(dir);
    Ok(file)
}

/// Makes a new or removed name durable (best effort: not every system can).
pub(crate) fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// The first `len` bytes of an open segment, read by position (the
/// file's cursor is not moved, and an unlinked file still reads).
pub(crate) fn read(file: &File, len: u64) -> std::io::Result<Vec<u8>> {
    let len = usize::try_from(len).map_err(|_| std::io::ErrorKind::OutOfMemory)?;
    let mut bytes = vec![0; len];
    read_exact_at(file, &mut bytes)?;
    Ok(bytes)
}

#[cfg(unix)]
fn read_exact_at(file: &File, buf: &mut [u8]) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, 0)
}

#[cfg(not(unix))]
fn read_exact_at(file: &File, buf: &mut [u8]) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom};
    let mut f = file.try_clone()?;
    f.seek(SeekFrom::Start(0))?;
    f.read_exact(buf)
}

/// The segments in `dir`, oldest first.
pub(crate) fn list(dir: &Path) -> Result<Vec<(u64, PathBuf)>, JournalError> {
    let mut out = Vec::new();
    let entries = fs::read_dir(dir).map_err(|e| JournalError::io("list", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| JournalError::io("list", dir, e))?;
        let path = entry.path();
        let seq = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".seg"))
            .and_then(|n| u64::from_str_radix(n, 16).ok());
        let Some(seq) = seq else { continue };
        // A link named as a segment is refused, never read through.
        if entry.file_type().is_ok_and(|t| t.is_symlink()) {
            let e = std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                "a symbolic link where a segment is kept: refused (it is never followed); remove it",
            );
            return Err(JournalError::io("open", &path, e));
        }
        out.push((seq, path));
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn the_directory_and_its_segments_are_its_owners_alone() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("dripfeed-private-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let _lock = lock(&dir, FileModes::Fix, false).unwrap();
        let key = Key::generate();
        create(&dir, 1, &key).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&path(&dir, 1)), 0o600);
        let _ = fs::remove_dir_all(&dir);
    }
}
