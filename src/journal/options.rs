//! How a journal is opened: durability, segment size, size bound.

use std::path::Path;

use super::files::FileModes;
use super::{Journal, JournalError};

/// What "admitted" means for a job the journal records.
///
/// ```
/// use dripfeed::journal::Durability;
/// assert_eq!(Durability::default(), Durability::Sync);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// The record is on disk (`fsync`ed) before the caller is answered; one
    /// `fsync` covers every job that arrived while the previous one ran
    /// (group commit). Survives a power cut.
    #[default]
    Sync,
    /// The record is written to the operating system before the caller is
    /// answered: survives the process being killed, not a power cut.
    Written,
    /// The caller is answered at once and the record is written soon after:
    /// a crash may lose the last moments' jobs.
    Queued,
}

/// Settings for [`Journal`]: start from [`Journal::options`].
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use dripfeed::journal::{Durability, Journal};
/// let dir = std::env::temp_dir().join(format!("dripfeed-doc-options-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// let journal = Journal::options()
///     .durability(Durability::Written)
///     .segment_bytes(1 << 20)
///     .max_bytes(64 << 20)
///     .open(&dir)?;
/// assert_eq!(journal.stats().max_bytes, 64 << 20);
/// # drop(journal);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JournalOptions {
    pub(crate) durability: Durability,
    pub(crate) segment_bytes: u64,
    pub(crate) max_bytes: u64,
    pub(crate) max_record_bytes: usize,
    pub(crate) file_modes: FileModes,
}

impl Default for JournalOptions {
    fn default() -> Self {
        JournalOptions {
            durability: Durability::Sync,
            segment_bytes: 16 << 20,
            max_bytes: 1 << 30,
            max_record_bytes: 4 << 20,
            file_modes: FileModes::Fix,
        }
    }
}

impl JournalOptions {
    /// What to do with the directory or a file in it that others may read
    /// or write (default [`FileModes::Fix`]: made owner-only, with a
    /// warning). A link planted where a file is kept is always refused.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::journal::Journal;
    /// use dripfeed::journal::files::FileModes;
    /// use std::os::unix::fs::PermissionsExt;
    /// let dir = std::env::temp_dir().join(format!("dripfeed-doc-modes-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// std::fs::create_dir_all(&dir)?;
    /// std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
    /// assert!(Journal::options().file_modes(FileModes::Refuse).open(&dir).is_err());
    /// let journal = Journal::options().open(&dir)?; // fixed
    /// assert_eq!(std::fs::metadata(&dir)?.permissions().mode() & 0o777, 0o700);
    /// # drop(journal);
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn file_modes(mut self, modes: FileModes) -> Self {
        self.file_modes = modes;
        self
    }

    /// What "admitted" means (default [`Durability::Sync`]).
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// A segment is closed and a new one started past this size (default
    /// 16 MiB, at least 4 KiB). Space comes back a segment at a time. The
    /// journal keeps each segment open until it is given back, so about
    /// `max_bytes / segment_bytes` files are open (64 by default): what
    /// lets it journal its unfinished jobs again if the directory is
    /// deleted.
    pub fn segment_bytes(mut self, bytes: u64) -> Self {
        self.segment_bytes = bytes.max(4096);
        self
    }

    /// The journal's bound on disk (default 1 GiB): past it, new jobs are
    /// refused with [`JournalError::Full`] until finished ones are reclaimed.
    pub fn max_bytes(mut self, bytes: u64) -> Self {
        self.max_bytes = bytes;
        self
    }

    /// The largest job encoding accepted (default 4 MiB).
    pub fn max_record_bytes(mut self, bytes: usize) -> Self {
        self.max_record_bytes = bytes.min(u32::MAX as usize - 64);
        self
    }

    /// Opens (or creates) the journal in `dir`: takes the directory's lock,
    /// recovers what an earlier run left unfinished, and starts the writer.
    pub fn open(self, dir: impl AsRef<Path>) -> Result<Journal, JournalError> {
        Journal::open_with(dir.as_ref(), self)
    }
}
