//! The journal directory: its lock, its segment files, and recovery.
//!
//! Segments are named by a sequence number (`0000000000000001.seg`, …) and
//! only ever appended to; the oldest goes first when every job it admitted
//! has ended, so an `End` record is never deleted before the `Admit` it
//! answers. Recovery reads them in order, cuts a torn tail, and keeps the
//! jobs admitted and not ended.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::JournalError;
use super::frame::{self, Kind, MAGIC};

/// What the journal knows about one segment.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seg {
    /// Bytes in the file.
    pub(crate) len: u64,
    /// Jobs admitted here and not ended.
    pub(crate) live: u64,
    /// Their records' bytes.
    pub(crate) live_bytes: u64,
}

impl Seg {
    /// A segment just created: its magic and nothing else.
    pub(crate) const EMPTY: Seg = Seg {
        len: MAGIC.len() as u64,
        live: 0,
        live_bytes: 0,
    };
}

/// Where a live job's `Admit` record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Live {
    pub(crate) seg: u64,
    pub(crate) len: u32,
}

/// The live set: jobs admitted and not ended, and the segments' counts.
#[derive(Debug, Default)]
pub(crate) struct LiveSet {
    pub(crate) segs: BTreeMap<u64, Seg>,
    pub(crate) jobs: HashMap<u64, Live>,
}

impl LiveSet {
    /// A job's `Admit` record was written in `seg` (a copy replaces the old one).
    pub(crate) fn admit(&mut self, id: u64, seg: u64, len: usize) {
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        if let Some(old) = self.jobs.insert(id, Live { seg, len }) {
            self.forget(old);
        }
        let s = self.segs.entry(seg).or_default();
        s.live += 1;
        s.live_bytes += u64::from(len);
    }

    /// A job ended; `false` if it was not live.
    pub(crate) fn end(&mut self, id: u64) -> bool {
        match self.jobs.remove(&id) {
            Some(old) => {
                self.forget(old);
                true
            }
            None => false,
        }
    }

    fn forget(&mut self, old: Live) {
        if let Some(s) = self.segs.get_mut(&old.seg) {
            s.live = s.live.saturating_sub(1);
            s.live_bytes = s.live_bytes.saturating_sub(u64::from(old.len));
        }
    }

    /// Segment `seq` was just created (see [`create`]).
    pub(crate) fn started(&mut self, seq: u64) {
        self.segs.insert(seq, Seg::EMPTY);
    }

    /// Bytes in every segment.
    pub(crate) fn disk_bytes(&self) -> u64 {
        self.segs.values().map(|s| s.len).sum()
    }
}

/// The file of segment `seq`.
pub(crate) fn path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("{seq:016x}.seg"))
}

/// Takes the directory's lock file, creating the directory if need be.
/// Held for as long as the returned file is open; the OS drops it when the
/// process dies, so a killed process never leaves it stale.
pub(crate) fn lock(dir: &Path) -> Result<File, JournalError> {
    fs::create_dir_all(dir).map_err(|e| JournalError::io("create", dir, e))?;
    let path = dir.join("LOCK");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| JournalError::io("open", &path, e))?;
    match fs4::fs_std::FileExt::try_lock_exclusive(&file) {
        Ok(true) => Ok(file),
        Ok(false) => Err(JournalError::Locked {
            dir: dir.to_path_buf(),
        }),
        Err(e) => Err(JournalError::io("lock", &path, e)),
    }
}

/// Creates segment `seq` with its magic, durable along with its name.
pub(crate) fn create(dir: &Path, seq: u64) -> Result<File, JournalError> {
    let path = path(dir, seq);
    let mut file = OpenOptions::new()
        .create_new(true)
        .append(true)
        .open(&path)
        .map_err(|e| JournalError::io("create", &path, e))?;
    file.write_all(MAGIC)
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

/// The segments in `dir`, oldest first.
fn list(dir: &Path) -> Result<Vec<(u64, PathBuf)>, JournalError> {
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
        if let Some(seq) = seq {
            out.push((seq, path));
        }
    }
    out.sort();
    Ok(out)
}

/// What an earlier run left.
#[derive(Debug, Default)]
pub(crate) struct Recovered {
    pub(crate) live: LiveSet,
    /// Unfinished jobs, `(id, encoding)`, in the order they were admitted.
    pub(crate) jobs: Vec<(u64, Vec<u8>)>,
    /// The next segment's number.
    pub(crate) next_seq: u64,
    /// Bytes cut from torn tails.
    pub(crate) cut: u64,
}

/// Reads every segment: torn tails are cut (logged), empty leftovers of a
/// crash at creation removed, foreign files refused.
pub(crate) fn recover(dir: &Path, max_record: usize) -> Result<Recovered, JournalError> {
    let mut out = Recovered {
        next_seq: 1,
        ..Recovered::default()
    };
    let mut payloads: HashMap<u64, (usize, Vec<u8>)> = HashMap::new();
    let mut order = 0;
    for (seq, path) in list(dir)? {
        out.next_seq = seq + 1;
        let bytes = fs::read(&path).map_err(|e| JournalError::io("read", &path, e))?;
        let (records, good) = frame::parse(&bytes, max_record);
        if good == 0 {
            if bytes.len() <= MAGIC.len() && MAGIC.starts_with(&bytes) {
                // Created, never written: a crash right at a roll.
                fs::remove_file(&path).map_err(|e| JournalError::io("remove", &path, e))?;
                continue;
            }
            return Err(JournalError::Foreign { path });
        }
        if good < bytes.len() {
            let cut = (bytes.len() - good) as u64;
            tracing::warn!(segment = %path.display(), at = good, bytes = cut, "journal: cutting a torn or corrupt tail");
            let file = OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|e| JournalError::io("open", &path, e))?;
            file.set_len(good as u64)
                .and_then(|()| file.sync_all())
                .map_err(|e| JournalError::io("truncate", &path, e))?;
            out.cut += cut;
        }
        out.live.segs.insert(
            seq,
            Seg {
                len: good as u64,
                ..Seg::default()
            },
        );
        for r in records {
            match r.kind {
                Kind::Admit => {
                    out.live.admit(r.id, seq, r.len);
                    payloads.entry(r.id).or_insert_with(|| {
                        order += 1;
                        (order, r.payload.to_vec())
                    });
                }
                Kind::End => {
                    out.live.end(r.id);
                    payloads.remove(&r.id);
                }
            }
        }
    }
    let mut jobs: Vec<_> = payloads.into_iter().collect();
    jobs.sort_by_key(|(_, (order, _))| *order);
    out.jobs = jobs.into_iter().map(|(id, (_, p))| (id, p)).collect();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_set_follows_copies_and_ends() {
        let mut live = LiveSet::default();
        live.admit(1, 1, 30);
        live.admit(2, 1, 40);
        live.admit(1, 2, 30); // compacted into segment 2
        assert_eq!(
            live.segs[&1],
            Seg {
                len: 0,
                live: 1,
                live_bytes: 40
            }
        );
        assert_eq!(live.segs[&2].live, 1);
        assert!(live.end(1));
        assert!(!live.end(1), "ended twice");
        assert_eq!((live.segs[&2].live, live.segs[&2].live_bytes), (0, 0));
    }
}
