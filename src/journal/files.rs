//! How the journal opens its files, and how a program keeping its own
//! files beside it (a dead-letter file, an index) can open them alike:
//! owner-only and never through a link. (The journal checks its directory
//! and lock file as [`FileModes`] says; its segments it makes `0600` itself
//! and reads back without following a link.)
//!
//! - A file is opened with `O_NOFOLLOW`: a symbolic link planted where it
//!   should be is refused, naming the path, never followed (what is
//!   written would land in the file it points at). A file made is made
//!   `0600` whatever the umask.
//! - A file or directory that is already there and that others may read
//!   or write (any group or other permission bit) is fixed (`0600`,
//!   `0700`, with a warning naming it), refused, or left with a warning,
//!   as [`FileModes`] says. A directory given by its path may be a link
//!   (systemd's `StateDirectory` with `DynamicUser`): [`dir`] follows it;
//!   a directory a program makes itself, or makes again once it is gone,
//!   is made with [`dir_no_link`], which refuses a link planted there. A
//!   device (`/dev/null`) is left as it is.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io;
use std::path::Path;

/// What to do with a file or directory others may read or write.
///
/// ```
/// use dripfeed::journal::files::FileModes;
/// assert_eq!(FileModes::default(), FileModes::Fix);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum FileModes {
    /// Make it owner-only (`0600` a file, `0700` a directory) and log a
    /// warning naming it. What cannot be made so (another user's, or a
    /// shared directory with the sticky bit, such as `/tmp`) is left as it
    /// is, with the warning.
    #[default]
    Fix,
    /// Refuse it: the open fails with an error naming it and its mode.
    Refuse,
    /// Leave it as it is, with a warning naming it (the permissions are
    /// managed elsewhere: a log shipper's group, say).
    Warn,
}

/// A refusal that names `path`.
fn named(path: &Path, what: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("{}: {what}", path.display()),
    )
}

/// Opens `path` with `options` (its own flags kept), never through a link:
/// made `0600` when it is created; a regular file others may read or write
/// is fixed or refused as `modes` says (a device such as `/dev/null` is
/// left as it is).
///
/// ```
/// # fn main() -> std::io::Result<()> {
/// use dripfeed::journal::files::{FileModes, open};
/// use std::os::unix::fs::{PermissionsExt, symlink};
/// let dir = std::env::temp_dir().join(format!("dripfeed-doc-files-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("kept.jsonl");
/// let mut options = std::fs::OpenOptions::new();
/// options.create(true).append(true);
/// open(&options, &path, FileModes::Fix)?;
/// assert_eq!(std::fs::metadata(&path)?.permissions().mode() & 0o777, 0o600);
///
/// // Readable by others: fixed, or refused.
/// std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))?;
/// assert!(open(&options, &path, FileModes::Refuse).is_err());
/// open(&options, &path, FileModes::Fix)?;
/// assert_eq!(std::fs::metadata(&path)?.permissions().mode() & 0o777, 0o600);
///
/// // A link planted in its place is never followed.
/// let planted = dir.join("planted.jsonl");
/// symlink(&path, &planted)?;
/// let refused = open(&options, &planted, FileModes::Fix).unwrap_err();
/// assert!(refused.to_string().contains("symbolic link"), "{refused}");
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok(())
/// # }
/// ```
pub fn open(options: &OpenOptions, path: &Path, modes: FileModes) -> io::Result<File> {
    let mut options = options.clone();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600).custom_flags(libc::O_NOFOLLOW);
    }
    let file = options.open(path).map_err(|e| refused_link(path, e))?;
    check_file(&file, path, modes)?;
    Ok(file)
}

/// Opens `path` to read, never through a link.
///
/// ```
/// # fn main() -> std::io::Result<()> {
/// use dripfeed::journal::files::read;
/// let dir = std::env::temp_dir().join(format!("dripfeed-doc-read-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// std::fs::create_dir_all(&dir)?;
/// std::fs::write(dir.join("a"), b"x")?;
/// assert!(read(&dir.join("a")).is_ok());
/// std::os::unix::fs::symlink(dir.join("a"), dir.join("b"))?;
/// assert!(read(&dir.join("b")).is_err());
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok(())
/// # }
/// ```
pub fn read(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NOFOLLOW);
    options.open(path).map_err(|e| refused_link(path, e))
}

/// `ELOOP` from `O_NOFOLLOW`, said plainly.
fn refused_link(path: &Path, e: io::Error) -> io::Error {
    #[cfg(unix)]
    if e.raw_os_error() == Some(libc::ELOOP) {
        return named(
            path,
            "a symbolic link where a file is kept: refused (it is never followed); remove it",
        );
    }
    let _ = path;
    e
}

/// A regular file owner-only (fixed or refused as `modes` says); anything
/// else named so (`/dev/null` for dead letters nobody keeps) is left as it
/// is: its permissions are not the file's to change.
fn check_file(file: &File, path: &Path, modes: FileModes) -> io::Result<()> {
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Ok(());
    }
    fix_mode(path, &meta, 0o600, modes, |p| file.set_permissions(p))
}

/// The permission bits owner-only, or the refusal.
fn fix_mode(
    path: &Path,
    meta: &std::fs::Metadata,
    owner_only: u32,
    modes: FileModes,
    set: impl FnOnce(std::fs::Permissions) -> io::Result<()>,
) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o077 == 0 {
            return Ok(());
        }
        let left = |why: &str| {
            tracing::warn!(path = %path.display(), mode = %format!("{mode:04o}"), "others may read or write it ({why}): left as it is");
        };
        match modes {
            FileModes::Refuse => Err(named(
                path,
                format_args!(
                    "mode {mode:04o} lets others read or write it: make it {owner_only:04o} \
                     (or let the relay fix it: file_modes = \"fix\")"
                ),
            )),
            FileModes::Warn => {
                left("file_modes = \"warn\"");
                Ok(())
            }
            // A shared directory (the sticky bit: /tmp) is not the relay's
            // to close.
            FileModes::Fix if mode & 0o1000 != 0 => {
                left("a shared directory, the sticky bit set");
                Ok(())
            }
            FileModes::Fix => match set(std::fs::Permissions::from_mode(owner_only)) {
                Ok(()) => {
                    tracing::warn!(path = %path.display(), was = %format!("{mode:04o}"), now = %format!("{owner_only:04o}"), "a file others could read or write was made owner-only");
                    Ok(())
                }
                // Not ours to change (another user's): said, and kept.
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                    left("not this user's to change");
                    Ok(())
                }
                Err(e) => Err(named(
                    path,
                    format_args!("mode {mode:04o}, and it cannot be made {owner_only:04o}: {e}"),
                )),
            },
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (path, meta, owner_only, modes, set);
        Ok(())
    }
}

/// [`dir`], refusing a symbolic link at `path` itself (its parents may be
/// links): for a directory a program makes itself inside one it was given
/// (a journal's in a data directory), or makes again once it is gone,
/// where a link can only have been planted.
///
/// ```
/// # fn main() -> std::io::Result<()> {
/// use dripfeed::journal::files::{FileModes, dir_no_link};
/// let root = std::env::temp_dir().join(format!("dripfeed-doc-nolink-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&root);
/// dir_no_link(&root.join("journal"), FileModes::Fix)?;
/// std::fs::create_dir(root.join("elsewhere"))?;
/// std::os::unix::fs::symlink(root.join("elsewhere"), root.join("planted"))?;
/// let refused = dir_no_link(&root.join("planted"), FileModes::Fix).unwrap_err();
/// assert!(refused.to_string().contains("symbolic link"), "{refused}");
/// # std::fs::remove_dir_all(&root)?;
/// # Ok(())
/// # }
/// ```
pub fn dir_no_link(path: &Path, modes: FileModes) -> io::Result<()> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(named(
            path,
            "a symbolic link where a directory is kept: refused (it is never followed); \
             remove it, or give the directory it points to",
        ));
    }
    dir(path, modes)
}

/// Makes `dir` (and its parents) if missing, the last one `0700`; one
/// already there that others may read or write is fixed or refused as
/// `modes` says.
///
/// ```
/// # fn main() -> std::io::Result<()> {
/// use dripfeed::journal::files::{FileModes, dir};
/// use std::os::unix::fs::PermissionsExt;
/// let root = std::env::temp_dir().join(format!("dripfeed-doc-dir-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&root);
/// let data = root.join("data");
/// dir(&data, FileModes::Fix)?;
/// assert_eq!(std::fs::metadata(&data)?.permissions().mode() & 0o777, 0o700);
/// std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o777))?;
/// assert!(dir(&data, FileModes::Refuse).is_err());
/// dir(&data, FileModes::Fix)?;
/// assert_eq!(std::fs::metadata(&data)?.permissions().mode() & 0o777, 0o700);
/// # std::fs::remove_dir_all(&root)?;
/// # Ok(())
/// # }
/// ```
pub fn dir(path: &Path, modes: FileModes) -> io::Result<()> {
    let mut builder = DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(path)?;
    let meta = std::fs::metadata(path)?;
    if !meta.is_dir() {
        return Err(named(path, "not a directory"));
    }
    fix_mode(path, &meta, 0o700, modes, |p| {
        std::fs::set_permissions(path, p)
    })
}
