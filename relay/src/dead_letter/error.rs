//! Why dead-letter lines could not be written.

use std::fmt;
use std::path::PathBuf;

/// A dead-letter write that failed; the lines stay held (and their
/// webhooks in the journal) until one works.
#[derive(Debug)]
pub enum WriteError {
    /// The disk refused: a write, a sync, or making the file again.
    Io {
        /// The file (or directory) it was about.
        path: PathBuf,
        /// What the system said.
        error: std::io::Error,
    },
    /// Every file of the set is full; none is deleted to make room.
    Full {
        /// The live file.
        path: PathBuf,
        /// How many files are kept.
        keep: u32,
    },
}

impl WriteError {
    /// An I/O error about `path`.
    pub fn io(path: impl Into<PathBuf>, error: std::io::Error) -> Self {
        WriteError::Io {
            path: path.into(),
            error,
        }
    }

    /// The metric's `reason` label: `io` or `full`.
    pub fn reason(&self) -> &'static str {
        match self {
            WriteError::Io { .. } => "io",
            WriteError::Full { .. } => "full",
        }
    }
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteError::Io { path, error } => write!(f, "{}: {error}", path.display()),
            WriteError::Full { path, keep } => write!(
                f,
                "{}: all {keep} dead-letter files are full; move rotated ones away (once redriven) \
                 to make room",
                path.display()
            ),
        }
    }
}

impl std::error::Error for WriteError {}
