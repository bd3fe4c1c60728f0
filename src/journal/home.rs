//! The journal's directory as the writer opened it: the identity (device
//! and inode) of the directory, its lock file and the active segment, to
//! notice that any of them is gone. What the writer does then is in
//! [`comeback`](super::comeback).

use std::fs::{self, File};
use std::path::Path;
use std::time::{Duration, Instant};

use super::segments;

/// How often the writer checks its directory.
pub(crate) const CHECK_EVERY: Duration = Duration::from_millis(500);

/// A file's identity: its device and inode (on systems without them, that
/// it exists).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileId(u64, u64);

impl FileId {
    #[cfg(unix)]
    fn of(meta: &fs::Metadata) -> FileId {
        use std::os::unix::fs::MetadataExt;
        FileId(meta.dev(), meta.ino())
    }

    #[cfg(not(unix))]
    fn of(_meta: &fs::Metadata) -> FileId {
        FileId(0, 0)
    }

    pub(crate) fn at(path: &Path) -> Option<FileId> {
        fs::metadata(path).ok().map(|m| FileId::of(&m))
    }

    pub(crate) fn open(file: &File) -> Option<FileId> {
        file.metadata().ok().map(|m| FileId::of(&m))
    }
}

/// The directory as the writer opened it.
pub(crate) struct Home {
    /// Held for its lock: released when the writer stops or moves to a
    /// re-created directory.
    _lock: File,
    dir: Option<FileId>,
    lock_id: Option<FileId>,
    active: Option<FileId>,
    /// Set while the directory is gone.
    pub(crate) gone: Option<Gone>,
    pub(crate) next_check: Instant,
}

/// What the writer keeps while the directory is gone.
#[derive(Default)]
pub(crate) struct Gone {
    /// Records of admissions that were not waiting for an answer
    /// ([`Durability::Queued`](super::Durability::Queued)) and arrived as
    /// the loss was noticed: written when the directory is back.
    pub(crate) held: Vec<(u64, Vec<u8>)>,
    /// Whether a failed attempt to come back was logged.
    pub(crate) told: bool,
}

impl Home {
    /// The directory `dir`, locked by `lock`, with `active` its active segment.
    pub(crate) fn new(dir: &Path, lock: File, active: &File) -> Home {
        Home {
            dir: FileId::at(dir),
            lock_id: FileId::open(&lock),
            active: FileId::open(active),
            _lock: lock,
            gone: None,
            next_check: Instant::now() + CHECK_EVERY,
        }
    }

    /// Whether the directory, its lock and the active segment `seq` are
    /// still the ones opened.
    pub(crate) fn intact(&self, dir: &Path, seq: u64) -> bool {
        let same = |now: Option<FileId>, then: Option<FileId>| now.is_some() && now == then;
        same(FileId::at(dir), self.dir)
            && same(FileId::at(&dir.join(segments::LOCK)), self.lock_id)
            && same(FileId::at(&segments::path(dir, seq)), self.active)
    }

    /// A new active segment was created.
    pub(crate) fn started(&mut self, active: &File) {
        self.active = FileId::open(active);
    }

    pub(crate) fn is_gone(&self) -> bool {
        self.gone.is_some()
    }
}
