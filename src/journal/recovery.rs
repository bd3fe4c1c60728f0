//! Recovery: what an earlier run left in the directory. Segments are read
//! in order; a torn tail is cut, a damaged segment set aside with its good
//! records kept ([`repair`](super::repair)), and the jobs admitted and not
//! ended are handed back in the order they were admitted.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::path::{Path, PathBuf};

use super::JournalError;
use super::files::{self, FileModes};
use super::frame::{self, Kind, Record};
use super::key::{self, HEAD, Key};
use super::live::{LiveSet, Seg};
use super::repair;
use super::scan::scan;
use super::segments::list;

/// An unfinished job an earlier run left.
#[derive(Debug)]
pub(crate) struct Found {
    pub(crate) id: u64,
    /// Its record: the tag, if any, then the job's encoding.
    pub(crate) record: Vec<u8>,
    /// The attempts it had made and when its next was due (none
    /// recorded: 0 and at once).
    pub(crate) tried: frame::Tried,
}

/// What an earlier run left.
#[derive(Debug)]
pub(crate) struct Recovered {
    /// The directory's key: the newest segment's, or a fresh one.
    pub(crate) key: Key,
    pub(crate) live: LiveSet,
    /// Each segment kept, open for reading.
    pub(crate) files: BTreeMap<u64, File>,
    /// Unfinished jobs, in the order they were admitted.
    pub(crate) jobs: Vec<Found>,
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
    /// Unfinished jobs' payloads with the order they were admitted in and
    /// the attempts they had made.
    payloads: HashMap<u64, Unfinished>,
    order: usize,
}

/// An unfinished job as read so far.
struct Unfinished {
    order: usize,
    payload: Vec<u8>,
    tried: frame::Tried,
}

impl Replay {
    fn apply(&mut self, live: &mut LiveSet, seq: u64, records: &[Record<'_>]) {
        for r in records {
            match frame::job_of(r.kind, r.payload) {
                Some((tried, job)) => {
                    live.admit(r.id, seq, r.len);
                    let order = &mut self.order;
                    let found = self.payloads.entry(r.id).or_insert_with(|| {
                        *order += 1;
                        Unfinished {
                            order: *order,
                            payload: job.to_vec(),
                            tried,
                        }
                    });
                    // A later retry's record: it counts further (an
                    // earlier one's copy, moved forward, does not undo it).
                    if tried.made > found.tried.made {
                        found.tried = tried;
                    }
                }
                None if r.kind == Kind::End => {
                    live.end(r.id);
                    self.payloads.remove(&r.id);
                }
                None => {} // a retry's record too short: nothing to take
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
        let mut file = files::read(&path).map_err(|e| JournalError::io("open", &path, e))?;
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
            file = files::read(&path).map_err(|e| JournalError::io("open", &path, e))?;
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
    jobs.sort_by_key(|(_, u)| u.order);
    out.jobs = jobs
        .into_iter()
        .map(|(id, u)| Found {
            id,
            record: u.payload,
            tried: u.tried,
        })
        .collect();
    Ok(out)
}

/// The key in the newest segment whose header holds one (every keyed
/// segment of a directory has the same), or a fresh one for a directory
/// that has none yet.
fn dir_key(segments: &[(u64, PathBuf)]) -> Result<Key, JournalError> {
    for (_, path) in segments.iter().rev() {
        let mut head = Vec::with_capacity(HEAD);
        files::read(path)
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
    let mut options = OpenOptions::new();
    options.write(true);
    let file = files::open(&options, path, FileModes::Fix)
        .map_err(|e| JournalError::io("open", path, e))?;
    file.set_len(len)
        .and_then(|()| file.sync_all())
        .map_err(|e| JournalError::io("truncate", path, e))
}
