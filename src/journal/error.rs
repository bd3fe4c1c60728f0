//! What can go wrong with a journal.

use std::path::PathBuf;

/// A journal that cannot open, or cannot take a job now.
///
/// ```
/// use dripfeed::journal::JournalError;
/// let e = JournalError::Full { bytes: 10, max_bytes: 8 };
/// assert_eq!(e.to_string(), "the journal is full: 10 bytes on disk, at most 8");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum JournalError {
    /// Another process (or another journal in this one) holds the directory.
    Locked {
        /// The journal directory.
        dir: PathBuf,
    },
    /// A file operation failed (full disk, permissions, …).
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// A file in the directory is not a journal segment written by dripfeed.
    Foreign {
        /// The file.
        path: PathBuf,
    },
    /// The journal holds its size bound: new jobs wait until finished ones
    /// are reclaimed.
    Full {
        /// Bytes on disk and waiting to be written.
        bytes: u64,
        /// The bound.
        max_bytes: u64,
    },
    /// A job's encoding is larger than one record may be.
    TooLarge {
        /// The encoding's length.
        len: usize,
        /// The largest allowed.
        max: usize,
    },
    /// The journal's directory, its lock file or its active segment was
    /// deleted or replaced: jobs are refused until the journal has
    /// re-created it and journaled its unfinished jobs there again.
    DirectoryGone {
        /// The journal directory.
        dir: PathBuf,
    },
    /// The journal's writer has stopped.
    Closed,
}

impl std::fmt::Display for JournalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JournalError::Locked { dir } => write!(
                f,
                "the journal directory {} is in use by another process",
                dir.display()
            ),
            JournalError::Io { op, path, source } => {
                write!(f, "journal: cannot {op} {}: {source}", path.display())
            }
            JournalError::Foreign { path } => {
                write!(f, "{} is not a dripfeed journal segment", path.display())
            }
            JournalError::Full { bytes, max_bytes } => write!(
                f,
                "the journal is full: {bytes} bytes on disk, at most {max_bytes}"
            ),
            JournalError::TooLarge { len, max } => {
                write!(
                    f,
                    "a job of {len} bytes is above the journal's record limit of {max}"
                )
            }
            JournalError::DirectoryGone { dir } => write!(
                f,
                "the journal directory {} is gone; jobs are refused until it is back",
                dir.display()
            ),
            JournalError::Closed => write!(f, "the journal's writer has stopped"),
        }
    }
}

impl std::error::Error for JournalError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            JournalError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl JournalError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        JournalError::Io {
            op,
            path: path.into(),
            source,
        }
    }
}
