//! The journal directory: its lock, its segment files, and recovery.
//!
//! Segments are named by a sequence number (`0000000000000001.seg`, …) and
//! only ever appended to; the oldest goes first when every job it admitted
//! has ended, so an `End` record is never deleted before the `Admit` it
//! answers. Recovery reads them in order, cuts a torn tail, sets a damaged
//! segment aside with its good records kept ([`repair`](super::repair)),
//! and keeps the jobs admitted and not ended.
//!
//! The journal keeps each segment open while it holds unfinished jobs, so
//! their records can be read back even if the files are unlinked (the
//! directory deleted): see the writer's `rejournal`.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use super::JournalError;
use super::frame::{Kind, Record};
use super::key::{self, HEAD, Key};
use super::live::{LiveSet, Seg};
use super::repair;
use super::scan::scan;

/// The file of segment `seq`.
pub(crate) fn path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("{seq:016x}.seg"))
}

/// Options that create a file only its owner may read: segments hold the
/// jobs (request bodies, say) and the key that signs their records.
pub(crate) fn private(opts: &mut OpenOptions) -> &mut OpenOptions {
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(opts, 0o600);
    opts
}

/// Creates `dir` (and its parents) if missing, the last one readable by its
/// owner only.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// The lock file's name in a journal directory.
pub(crate) const LOCK: &str = "LOCK";

/// Takes the directory's lock file, creating the directory if need be.
/// Held for as long as the returned file is open; the OS drops it when the
/// process dies, so a killed process never leaves it stale.
pub(crate) fn lock(dir: &Path) -> Result<File, JournalError> {
    private_dir(dir).map_err(|e| JournalError::io("create", dir, e))?;
    let path = dir.join(LOCK);
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

/// Creates segment `seq` with its header (magic and `key`), durable along
/// with its name.
pub(crate) fn create(dir: &Path, seq: u64, key: &Key) -> Result<File, JournalError> {
    let path = path(dir, seq);
    let mut file = private(OpenOptions::new().create_new(true).read(true).append(true))
        .open(&path)
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
        if let Some(seq) = seq {
            out.push((seq, path));
        }
    }
    out.sort();
    Ok(out)
}

/// What an earlier run left.
#[derive(Debug)]
pub(crate) struct Recovered {
    /// The directory's key: the newest segment's, or a fresh one.
    pub(crate) key: Key,
    pub(crate) live: LiveSet,
    /// Each segment kept, open for reading.
    pub(crate) files: BTreeMap<u64, File>,
    /// Unfinished jobs, `(id, encoding)`, in the order they were admitted.
    pub(crate) jobs: Vec<(u64, Vec<u8>)>,
    /// The next segment's number.
    pub(crate) next_seq: u64,
    /// Bytes cut from torn tails.
    pub(crate) cut: u64,
    /// Records lost in damaged regions (at least), and those regions' bytes.
    pub(crate) skipped: u64,
    pub(crate) skipped_bytes: u64,
}

/// What recovery has read so far.
#[derive(Default)]
struct Replay {
    /// Unfinished jobs' payloads with the order they were admitted in.
    payloads: HashMap<u64, (usize, Vec<u8>)>,
    order: usize,
}

impl Replay {
    fn apply(&mut self, live: &mut LiveSet, seq: u64, records: &[Record<'_>]) {
        for r in records {
            match r.kind {
                Kind::Admit => {
                    live.admit(r.id, seq, r.len);
                    let order = &mut self.order;
                    self.payloads.entry(r.id).or_insert_with(|| {
                        *order += 1;
                        (*order, r.payload.to_vec())
                    });
                }
                Kind::End => {
                    live.end(r.id);
                    self.payloads.remove(&r.id);
                }
            }
        }
    }
}

/// Reads every segment: torn tails are cut and damaged segments set aside
/// (both logged), empty leftovers of a crash at creation removed, foreign
/// files refused.
pub(crate) fn recover(dir: &Path, max_record: usize) -> Result<Recovered, JournalError> {
    repair::finish_interrupted(dir)?;
    let segments = list(dir)?;
    let mut out = Recovered {
        key: dir_key(&segments)?,
        live: LiveSet::default(),
        files: BTreeMap::new(),
        jobs: Vec::new(),
        next_seq: 1,
        cut: 0,
        skipped: 0,
        skipped_bytes: 0,
    };
    let mut replay = Replay::default();
    for (seq, path) in segments {
        out.next_seq = seq + 1;
        let mut file = File::open(&path).map_err(|e| JournalError::io("open", &path, e))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| JournalError::io("read", &path, e))?;
        let Some(found) = scan(&bytes, max_record, &out.key) else {
            if key::unwritten(&bytes) {
                // Created, never written: a crash right at a roll.
                drop(file);
                fs::remove_file(&path).map_err(|e| JournalError::io("remove", &path, e))?;
                continue;
            }
            return Err(JournalError::Foreign { path });
        };
        let torn = (bytes.len() - found.end) as u64;
        let len = if found.skipped.is_empty() {
            if torn > 0 {
                tracing::warn!(segment = %path.display(), at = found.end, bytes = torn, "journal: cutting a torn tail");
                cut(&path, found.end as u64)?;
            }
            replay.apply(&mut out.live, seq, &found.records);
            found.end as u64
        } else {
            for s in &found.skipped {
                tracing::error!(segment = %path.display(), at = s.at, bytes = s.bytes, records = s.records, "journal: skipped a damaged region; the records after it are kept");
            }
            let cleaned = repair::rewrite(&found.records, &out.key);
            let aside = repair::replace(dir, seq, &cleaned)?;
            tracing::warn!(segment = %path.display(), aside = %aside.display(), kept = found.records.len(), torn, "journal: damaged segment set aside and rewritten with its good records");
            out.skipped += found.skipped_records();
            out.skipped_bytes += found.skipped_bytes();
            file = File::open(&path).map_err(|e| JournalError::io("open", &path, e))?;
            if let Some(again) = scan(&cleaned, max_record, &out.key) {
                replay.apply(&mut out.live, seq, &again.records);
            }
            cleaned.len() as u64
        };
        out.cut += torn;
        if let Some(s) = out.live.segs.get_mut(&seq) {
            s.len = len;
        } else {
            out.live.segs.insert(
                seq,
                Seg {
                    len,
                    ..Seg::default()
                },
            );
        }
        out.files.insert(seq, file);
    }
    let mut jobs: Vec<_> = replay.payloads.into_iter().collect();
    jobs.sort_by_key(|(_, (order, _))| *order);
    out.jobs = jobs.into_iter().map(|(id, (_, p))| (id, p)).collect();
    Ok(out)
}

/// The key in the newest segment whose header holds one (every keyed
/// segment of a directory has the same), or a fresh one for a directory
/// that has none yet.
fn dir_key(segments: &[(u64, PathBuf)]) -> Result<Key, JournalError> {
    for (_, path) in segments.iter().rev() {
        let mut head = Vec::with_capacity(HEAD);
        File::open(path)
            .and_then(|f| f.take(HEAD as u64).read_to_end(&mut head))
            .map_err(|e| JournalError::io("read", path, e))?;
        if let Some(key::Head::Keyed { key: Some(key), .. }) = key::read_head(&head) {
            return Ok(key);
        }
    }
    Ok(Key::generate())
}

/// Cuts a segment back to `len` bytes, durably.
fn cut(path: &Path, len: u64) -> Result<(), JournalError> {
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| JournalError::io("open", path, e))?;
    file.set_len(len)
        .and_then(|()| file.sync_all())
        .map_err(|e| JournalError::io("truncate", path, e))
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
        let _lock = lock(&dir).unwrap();
        let key = Key::generate();
        create(&dir, 1, &key).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&path(&dir, 1)), 0o600);
        let _ = fs::remove_dir_all(&dir);
    }
}
