//! The dead-letter files on disk: the live file at the configured path,
//! written in whole lines and synced before they count as written, and the
//! rotated files beside it.
//!
//! The live file is the one *at the path*: before each batch the open
//! file's device and inode are compared with the path's, so a file deleted
//! or moved away while the relay runs is noticed and the path opened again
//! (and a batch that went to a file deleted while it was written is written
//! again). A batch that fails is cut back to the last whole line, so the
//! file never holds half a line. A line that would take the live file past
//! `max_bytes` goes to a new one: the full file is renamed `FILE.N` (see
//! `rotated`) unless `keep` files exist already; then nothing is written
//! ([`WriteError::Full`]) and nothing is deleted.

use std::fs::{File, Metadata};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::error::WriteError;
use super::rotated::{self, Rotated};

/// Bytes written to the file at once.
const CHUNK: usize = 64 * 1024;

/// A file deleted while a batch was written to it: written again this
/// many times before the batch counts as failed.
const REWRITES: u32 = 3;

/// The live file and the rotated ones.
pub(super) struct Files {
    path: PathBuf,
    max_bytes: u64,
    keep: u32,
    live: Option<Live>,
    rotated: Rotated,
}

/// The open live file.
struct Live {
    file: File,
    id: Identity,
    bytes: u64,
    lines: u64,
}

/// A file's device and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity(u64, u64);

#[cfg(unix)]
fn identity(m: &Metadata) -> Identity {
    use std::os::unix::fs::MetadataExt;
    Identity(m.dev(), m.ino())
}

#[cfg(not(unix))]
fn identity(_: &Metadata) -> Identity {
    Identity(0, 0)
}

/// Whether an open file has no name left (it was deleted).
#[cfg(unix)]
fn unlinked(m: &Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    m.nlink() == 0
}

#[cfg(not(unix))]
fn unlinked(_: &Metadata) -> bool {
    false
}

/// Syncs `dir`, so a file made (or renamed) in it survives a crash.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

impl Files {
    /// Opens (appends to, or makes) the live file at `path`, counting its
    /// lines and those of the rotated files beside it.
    pub(super) fn open(path: PathBuf, max_bytes: u64, keep: u32) -> Result<Files, WriteError> {
        let mut files = Files {
            path,
            max_bytes,
            keep,
            live: None,
            rotated: Rotated::default(),
        };
        files.open_live()?;
        files.scan()?;
        Ok(files)
    }

    /// The live file's path.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Lines in the live file and the rotated ones.
    pub(super) fn lines(&self) -> u64 {
        self.live.as_ref().map_or(0, |l| l.lines) + self.rotated.lines()
    }

    /// Finds the rotated files as they are now.
    pub(super) fn scan(&mut self) -> Result<(), WriteError> {
        self.rotated
            .scan(&self.path)
            .map_err(|e| WriteError::io(rotated::dir_of(&self.path), e))
    }

    /// Makes sure the open file is the one at the path: a file deleted,
    /// moved or replaced is let go and the path opened (made) again.
    pub(super) fn check(&mut self) -> Result<(), WriteError> {
        let Some(live) = &self.live else {
            return self.open_live();
        };
        let same = match std::fs::symlink_metadata(&self.path) {
            Ok(m) => identity(&m) == live.id,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(WriteError::io(&self.path, e)),
        };
        if !same {
            let deleted = live.file.metadata().is_ok_and(|m| unlinked(&m));
            tracing::warn!(
                file = %self.path.display(),
                lines = live.lines,
                "dead-letter file {}: making it again at its path",
                if deleted { "deleted" } else { "moved or replaced" }
            );
            self.live = None;
            self.open_live()?;
        }
        Ok(())
    }

    /// Writes `lines` in order, each batch synced; how many are written
    /// (durably), and what stopped the rest.
    pub(super) fn append<L: AsRef<[u8]>>(
        &mut self,
        lines: &[L],
    ) -> (usize, Result<(), WriteError>) {
        let mut done = 0;
        let mut rewrites = 0;
        while done < lines.len() {
            if let Err(e) = self.check() {
                return (done, Err(e));
            }
            let end = self.fitting(lines, done);
            if end == done {
                if let Err(e) = self.rotate() {
                    return (done, Err(e));
                }
                continue;
            }
            let Some(live) = self.live.as_mut() else {
                continue; // check() opened it; not reached
            };
            match write_synced(live, &lines[done..end]) {
                Ok(false) => done = end,
                Ok(true) if rewrites < REWRITES => {
                    // Deleted while written: the lines went nowhere.
                    rewrites += 1;
                    tracing::warn!(file = %self.path.display(), "dead-letter file deleted while written: writing the lines again at its path");
                    self.live = None;
                }
                Ok(true) => {
                    let gone = std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        "deleted again and again while written",
                    );
                    self.live = None;
                    return (done, Err(WriteError::io(&self.path, gone)));
                }
                Err(e) => return (done, Err(WriteError::io(&self.path, e))),
            }
        }
        (done, Ok(()))
    }

    /// The end of the run of `lines` from `from` that fits in the live
    /// file (a line alone in an empty file always fits).
    fn fitting<L: AsRef<[u8]>>(&self, lines: &[L], from: usize) -> usize {
        let Some(live) = &self.live else {
            return from;
        };
        let mut size = live.bytes;
        let mut end = from;
        for line in &lines[from..] {
            let n = line.as_ref().len() as u64;
            if size > 0 && size.saturating_add(n) > self.max_bytes {
                break;
            }
            size += n;
            end += 1;
        }
        end
    }

    /// Renames the full live file `FILE.N` and opens a new one, unless
    /// `keep` files exist already.
    fn rotate(&mut self) -> Result<(), WriteError> {
        self.scan()?;
        if self.rotated.len() + 1 >= self.keep as usize {
            return Err(WriteError::Full {
                path: self.path.clone(),
                keep: self.keep,
            });
        }
        let n = self.rotated.next();
        let to = rotated::path_of(&self.path, n);
        if std::fs::symlink_metadata(&to).is_ok() {
            let taken = std::io::Error::new(std::io::ErrorKind::AlreadyExists, "already exists");
            return Err(WriteError::io(to, taken));
        }
        std::fs::rename(&self.path, &to).map_err(|e| WriteError::io(&self.path, e))?;
        let lines = self.live.take().map_or(0, |l| l.lines);
        self.rotated.add(n, lines);
        tracing::info!(file = %self.path.display(), to = %to.display(), lines, "dead-letter file full: rotated");
        self.open_live()
    }

    /// Opens (or makes) the file at the path as the live file. A file that
    /// ends in the middle of a line (a crash while it was written) gets a
    /// newline first, so that line stays whole-or-unreadable on its own.
    fn open_live(&mut self) -> Result<(), WriteError> {
        let io = |e| WriteError::io(&self.path, e);
        let existed = std::fs::symlink_metadata(&self.path).is_ok();
        let mut options = std::fs::OpenOptions::new();
        options.create(true).append(true);
        let mut file = crate::util::private::open(&options, &self.path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        let (mut bytes, mut lines) = (meta.len(), 0);
        if meta.is_file() && bytes > 0 {
            let (counted, whole) = rotated::count_lines(&self.path).map_err(io)?;
            lines = counted;
            if !whole {
                file.write_all(b"\n").map_err(io)?;
                (bytes, lines) = (bytes + 1, lines + 1);
            }
        }
        if !existed {
            let dir = rotated::dir_of(&self.path);
            sync_dir(dir).map_err(|e| WriteError::io(dir, e))?;
        }
        self.live = Some(Live {
            file,
            id: identity(&meta),
            bytes,
            lines,
        });
        Ok(())
    }
}

/// Writes `lines` to `live` and syncs them, counting them in; on an error
/// cuts the file back to where it was. `Ok(true)`: the file was deleted
/// meanwhile (the lines went nowhere).
fn write_synced<L: AsRef<[u8]>>(live: &mut Live, lines: &[L]) -> std::io::Result<bool> {
    let start = live.bytes;
    let written = (|| {
        let mut out = &live.file;
        let mut buf = Vec::with_capacity(CHUNK);
        for line in lines {
            buf.extend_from_slice(line.as_ref());
            if buf.len() >= CHUNK {
                out.write_all(&buf)?;
                buf.clear();
            }
        }
        out.write_all(&buf)?;
        live.file.sync_data()
    })();
    if let Err(e) = written {
        let _ = live.file.set_len(start);
        return Err(e);
    }
    let deleted = live.file.metadata().is_ok_and(|m| unlinked(&m));
    if !deleted {
        live.bytes += lines.iter().map(|l| l.as_ref().len() as u64).sum::<u64>();
        live.lines += lines.len() as u64;
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("dripfeed-files-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn rotates_at_the_bound_and_refuses_when_every_file_is_full() {
        let d = dir("rotate");
        let path = d.join("dl.jsonl");
        let mut f = Files::open(path.clone(), 10, 2).unwrap();
        let lines = ["aaaa\n", "bbbb\n", "cccc\n", "dddd\n", "eeee\n"];
        let (n, r) = f.append(&lines);
        assert_eq!(n, 4, "two files of two lines");
        assert!(matches!(r, Err(WriteError::Full { keep: 2, .. })));
        assert_eq!(
            std::fs::read_to_string(rotated::path_of(&path, 1)).unwrap(),
            "aaaa\nbbbb\n"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "cccc\ndddd\n");
        assert_eq!(f.lines(), 4);
        // Moved away: room again.
        std::fs::rename(rotated::path_of(&path, 1), d.join("moved")).unwrap();
        let (n, r) = f.append(&lines[4..]);
        assert!(r.is_ok() && n == 1);
        assert_eq!(
            std::fs::read_to_string(rotated::path_of(&path, 1)).unwrap(),
            "cccc\ndddd\n"
        );
        assert_eq!(f.lines(), 3);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_deleted_file_is_made_again_and_a_torn_line_is_closed() {
        let d = dir("deleted");
        let path = d.join("dl.jsonl");
        std::fs::write(&path, b"whole\ntorn").unwrap();
        let mut f = Files::open(path.clone(), 1 << 20, 1).unwrap();
        assert_eq!(f.lines(), 2);
        assert!(f.append(&["x\n"]).1.is_ok());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "whole\ntorn\nx\n");
        std::fs::remove_file(&path).unwrap();
        assert!(f.append(&["y\n"]).1.is_ok());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "y\n");
        assert_eq!(f.lines(), 1);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
