//! How the relay opens the files that hold webhook bodies, tenants, keys
//! or secrets (dead letters and their rotated and companion files, webhook
//! statuses, idempotency keys, the registry): owner-only,
//! `0600`, and their directories `0700`, whatever the process's umask;
//! never through a link (one planted where such a file is kept is
//! refused, naming the path); and one already there that others may read
//! or write is fixed (with a warning) or refused as `file_modes` says
//! ([`set_modes`], once at start). The library's journal opens its own
//! files the same way ([`dripfeed::journal::files`]).

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub(crate) use dripfeed::journal::files::FileModes;

/// `file_modes`, set once at start.
static MODES: OnceLock<FileModes> = OnceLock::new();

/// What to do with a file or directory others may read or write, from
/// now on (the first call wins).
pub(crate) fn set_modes(modes: FileModes) {
    let _ = MODES.set(modes);
}

/// `file_modes` (fix until set).
pub(crate) fn modes() -> FileModes {
    MODES.get().copied().unwrap_or_default()
}

/// Opens `path` with `options`: made `0600`, never through a link, a
/// regular file owner-only (fixed or refused).
pub(crate) fn open(options: &OpenOptions, path: &Path) -> std::io::Result<File> {
    dripfeed::journal::files::open(options, path, modes())
}

/// Whether `open` is no longer a file at `path`: unlinked (its directory
/// deleted, say, or another file renamed over it), or nothing at `path`.
/// Not by comparing inode numbers, which some filesystems (overlays)
/// report differently for an open file and its path.
pub(crate) fn gone(open: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    if open.metadata().is_ok_and(|held| held.nlink() == 0) {
        return true;
    }
    matches!(std::fs::symlink_metadata(path), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
}

/// Opens `path` to read, never through a link.
pub(crate) fn read(path: &Path) -> std::io::Result<File> {
    dripfeed::journal::files::read(path)
}

/// `dir` made if missing (with its parents), owner-only (`0700`); one
/// already there others may read or write is fixed or refused.
pub(crate) fn dir(dir: &Path) -> std::io::Result<()> {
    dripfeed::journal::files::dir(dir, modes())
}

/// `path` with its directory's links followed (its directory as it is
/// now; `path` as given if that cannot be read): a file whose directory
/// was given as a link is made again, once gone, at its real place, and
/// a link planted there later is refused ([`dir_no_link`]).
pub(crate) fn real_path(path: &Path) -> PathBuf {
    path.parent()
        .and_then(|dir| std::fs::canonicalize(dir).ok())
        .zip(path.file_name())
        .map_or_else(|| path.to_path_buf(), |(dir, name)| dir.join(name))
}

/// [`dir`], refusing a symbolic link at `dir` itself: for a directory
/// the relay makes again once it is gone.
pub(crate) fn dir_no_link(dir: &Path) -> std::io::Result<()> {
    dripfeed::journal::files::dir_no_link(dir, modes())
}

/// The directory of a file [`gone`] from it made again ([`dir_no_link`]:
/// never through a link planted there), before the file is.
pub(crate) fn dir_again(file: &Path) -> std::io::Result<()> {
    file.parent().map_or(Ok(()), dir_no_link)
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn made_owner_only_whatever_the_umask() {
        let root = std::env::temp_dir().join(format!("dripfeed-private-{}", fastrand::u64(..)));
        let dir = root.join("a/b");
        super::dir(&dir).unwrap();
        let file = dir.join("f");
        let mut options = std::fs::OpenOptions::new();
        options.create(true).append(true);
        let mut f = super::open(&options, &file).unwrap();
        f.write_all(b"x").unwrap();
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&dir), mode(&file)), (0o700, 0o600));
        let _ = std::fs::remove_dir_all(&root);
    }
}
