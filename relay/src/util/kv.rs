//! A small ordered key-value store on one append-only file, for the
//! registry and the events store: Bitcask's design. Every key, and where
//! its value lies in the file, is held in memory (one ordered map per
//! table); values stay on disk and are read where they lie. A write
//! transaction appends one frame (`length`, `crc32`, then its puts and
//! removals) and, when durable, fsyncs it before it answers: a crash keeps
//! whole transactions or none (a torn last frame is cut off at the next
//! open, the bytes cut kept beside the file as `NAME.cut-at-OFFSET`). A
//! frame that does not read with whole ones after it, running to the
//! file's end, is damage, not a crash: the store refuses to open, naming
//! the file and the offset, and cuts nothing (skipping one transaction
//! could bring back what it removed).
//! When the file holds more than twice what is live (plus 8 MiB),
//! a commit rewrites the live entries to a new file and renames it over
//! the old one. The file is owner-only and locked for as long as the
//! store is open: two relays never share it. Without a file the store is
//! in memory.
//!
//! Memory: the keys, and about 40 bytes per entry; not the values.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufReader, BufWriter, Read, Write as _};
use std::ops::Bound;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// A table: its index among those the store was opened with.
pub(crate) type Table = usize;

/// A key and its value, as a range gives them.
pub(crate) type Entry = (Vec<u8>, Vec<u8>);

/// A put (`Some`) or a removal, as a transaction's frame will hold it.
type Op = (Table, Vec<u8>, Option<Arc<[u8]>>);

/// A rewrite is due once the file holds this much more than twice what is
/// live.
const COMPACT_SLACK: u64 = 8 << 20;

/// A frame larger than this is damage, not a transaction.
const MAX_FRAME: u64 = 1 << 30;

/// The most one frame of a rewrite holds.
const REWRITE_FRAME: usize = 1 << 20;

/// Where a value lies.
#[derive(Clone)]
enum Loc {
    /// In the file, at this offset, this long.
    Disk { at: u64, len: u32 },
    /// In memory: a store without a file, or written and not yet committed.
    Mem(Arc<[u8]>),
}

impl Loc {
    fn len(&self) -> u64 {
        match self {
            Loc::Disk { len, .. } => u64::from(*len),
            Loc::Mem(v) => v.len() as u64,
        }
    }
}

/// The file, its length and its path.
struct Log {
    file: File,
    len: u64,
    path: PathBuf,
}

struct Inner {
    maps: Vec<BTreeMap<Vec<u8>, Loc>>,
    log: Option<Log>,
    /// Bytes of the live keys and values.
    live: u64,
    /// Set while its file is gone and cannot be made again (one ERROR
    /// line an episode).
    unmade: bool,
}

impl Inner {
    /// `key`'s value in `table` set to `loc` (`None`: removed); the one it
    /// had.
    fn set(&mut self, table: Table, key: &[u8], loc: Option<Loc>) -> Option<Loc> {
        let map = &mut self.maps[table];
        let had = match loc {
            Some(loc) => {
                self.live += key.len() as u64 + loc.len();
                map.insert(key.to_vec(), loc)
            }
            None => map.remove(key),
        };
        if let Some(h) = &had {
            self.live = self.live.saturating_sub(key.len() as u64 + h.len());
        }
        had
    }

    /// `key`'s value in `table`.
    fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        self.maps[table]
            .get(key)
            .map(|loc| self.value(loc))
            .transpose()
    }

    fn value(&self, loc: &Loc) -> Result<Vec<u8>, String> {
        match loc {
            Loc::Mem(v) => Ok(v.to_vec()),
            Loc::Disk { at, len } => {
                let log = self.log.as_ref().ok_or("a value on disk without a file")?;
                let mut buf = vec![0u8; *len as usize];
                log.file
                    .read_exact_at(&mut buf, *at)
                    .map_err(|e| format!("{}: {e}", log.path.display()))?;
                Ok(buf)
            }
        }
    }
}

/// See the [module](self) docs.
pub(crate) struct Kv {
    inner: RwLock<Inner>,
}

/// One put (`Some`) or removal, as a frame holds it.
fn encode(body: &mut Vec<u8>, table: Table, key: &[u8], value: Option<&[u8]>) -> Option<u64> {
    body.push(table as u8);
    body.push(u8::from(value.is_some()));
    body.extend_from_slice(&(key.len() as u32).to_le_bytes());
    body.extend_from_slice(key);
    let v = value?;
    body.extend_from_slice(&(v.len() as u32).to_le_bytes());
    let at = body.len() as u64;
    body.extend_from_slice(v);
    Some(at)
}

/// `body` framed: its length and checksum first.
fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 8);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
    out.extend_from_slice(body);
    out
}

/// The ops of a frame's `body` (starting at `start` in the file), applied
/// to `inner`; `None` if the body is not whole.
fn replay(inner: &mut Inner, body: &[u8], start: u64) -> Option<()> {
    let mut i = 0usize;
    let take = |i: &mut usize, n: usize| -> Option<std::ops::Range<usize>> {
        let r = *i..i.checked_add(n)?;
        (r.end <= body.len()).then(|| {
            *i = r.end;
            r
        })
    };
    let word = |i: &mut usize| -> Option<usize> {
        let r = take(i, 4)?;
        Some(u32::from_le_bytes(body[r].try_into().ok()?) as usize)
    };
    while i < body.len() {
        let head = take(&mut i, 2)?;
        let (table, put) = (usize::from(body[head.start]), body[head.start + 1] == 1);
        if table >= inner.maps.len() {
            return None;
        }
        let klen = word(&mut i)?;
        let key = body[take(&mut i, klen)?].to_vec();
        let loc = match put {
            true => {
                let vlen = word(&mut i)?;
                let at = take(&mut i, vlen)?.start as u64;
                Some(Loc::Disk {
                    at: start + 8 + at,
                    len: vlen as u32,
                })
            }
            false => None,
        };
        inner.set(table, &key, loc);
    }
    Some(())
}

impl Kv {
    /// Whether it has a file (what it holds outlives the process).
    pub(crate) fn on_disk(&self) -> bool {
        self.inner
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .log
            .is_some()
    }

    /// A store of `tables` tables in memory.
    pub(crate) fn memory(tables: usize) -> Kv {
        Kv {
            inner: RwLock::new(Inner {
                maps: vec![BTreeMap::new(); tables],
                log: None,
                live: 0,
                unmade: false,
            }),
        }
    }

    /// Opens (or makes, owner-only) the store of `tables` tables at `path`,
    /// taking its lock, and reads its keys; a torn last frame is cut off.
    pub(crate) fn open(path: &Path, tables: usize) -> Result<Kv, String> {
        let at = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        let file = crate::util::private::open(&options, path).map_err(|e| at(&e))?;
        lock(&file).map_err(|e| at(&e))?;
        let mut inner = Inner {
            maps: vec![BTreeMap::new(); tables],
            log: None,
            live: 0,
            unmade: false,
        };
        let size = file.metadata().map_err(|e| at(&e))?.len();
        let mut reader = BufReader::with_capacity(1 << 20, &file);
        let mut pos = 0u64;
        while pos < size {
            let mut head = [0u8; 8];
            let read = reader.read_exact(&mut head).is_ok();
            let (len, crc) = header(head);
            // Its length checked before its body is taken in.
            let whole = read && len < MAX_FRAME && pos + 8 + len <= size && {
                let mut body = vec![0u8; len as usize];
                reader.read_exact(&mut body).is_ok()
                    && crc32fast::hash(&body) == crc
                    && replay(&mut inner, &body, pos).is_some()
            };
            if !whole {
                if let Some(next) = whole_frame_after(&file, pos, size) {
                    return Err(format!(
                        "{}: damaged at byte {pos}, with whole writes after it (from byte {next}): \
                         not a torn last write, so nothing is cut; restore the file from a backup, \
                         or move it aside to start without what it holds",
                        path.display()
                    ));
                }
                // Kept beside it, or nothing is cut.
                let kept = keep_cut(path, &file, pos, size).map_err(|e| {
                    format!(
                        "{}: a torn last write (from byte {pos}) cannot be kept aside before it \
                         is cut, so nothing is cut: {e}",
                        path.display()
                    )
                })?;
                tracing::warn!(file = %path.display(), at = pos, dropped = size - pos, kept = %kept.display(), "a torn or damaged last write is cut off");
                file.set_len(pos).map_err(|e| at(&e))?;
                file.sync_all().map_err(|e| at(&e))?;
                break;
            }
            pos += 8 + len;
        }
        drop(reader);
        // Its directory given as a link is followed once, here (as the
        // journal does): made again later, it is made at its real path.
        inner.log = Some(Log {
            file,
            len: pos,
            path: crate::util::private::real_path(path),
        });
        Ok(Kv {
            inner: RwLock::new(inner),
        })
    }

    /// Reads, seeing every transaction committed before.
    pub(crate) fn read(&self) -> Reader<'_> {
        Reader(self.inner.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// A write transaction (one at a time; reads wait for its commit).
    /// If the file is gone (its directory deleted or moved while the
    /// process runs), it is written again whole at its path first (the
    /// directory made again, a link planted there refused): a commit never
    /// lands in a file nobody will open. If that fails, the commit does.
    pub(crate) fn write(&self) -> Tx<'_> {
        let mut inner = self.inner.write().unwrap_or_else(|p| p.into_inner());
        let mut broken = None;
        if let Some(log) = &inner.log
            && crate::util::private::gone(&log.file, &log.path)
        {
            let path = log.path.clone();
            let made = crate::util::private::dir_again(&path)
                .map_err(|e| format!("{}: {e}", path.display()));
            match made.and_then(|()| rewrite(&mut inner)) {
                Ok(()) => {
                    inner.unmade = false;
                    tracing::warn!(file = %path.display(), "a store's file was gone (its directory deleted or moved): written again whole from what the relay holds");
                }
                Err(e) => {
                    if !std::mem::replace(&mut inner.unmade, true) {
                        tracing::error!(file = %path.display(), error = %e, "a store's file is gone and cannot be written again: changes are refused until it can");
                    }
                    broken = Some(e);
                }
            }
        }
        Tx {
            inner,
            ops: Vec::new(),
            undo: Vec::new(),
            broken,
        }
    }

    /// The bytes of the live keys and values.
    pub(crate) fn live_bytes(&self) -> u64 {
        self.read().0.live
    }
}

/// The file's exclusive lock, or why it cannot be had.
fn lock(file: &File) -> std::io::Result<()> {
    match fs4::fs_std::FileExt::try_lock_exclusive(file) {
        Ok(true) => Ok(()),
        Ok(false) => Err(std::io::Error::other(
            "held by another process (another relay on this directory?)",
        )),
        Err(e) => Err(e),
    }
}

/// A value as it lies: read with [`Stored::bytes`].
pub(crate) struct Stored<'a> {
    inner: &'a Inner,
    loc: &'a Loc,
}

impl Stored<'_> {
    pub(crate) fn bytes(&self) -> Result<Vec<u8>, String> {
        self.inner.value(self.loc)
    }
}

/// A read: what was committed when it began.
pub(crate) struct Reader<'a>(RwLockReadGuard<'a, Inner>);

impl<'a> Reader<'a> {
    /// `key`'s value in `table`.
    pub(crate) fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        self.0.get(table, key)
    }

    /// The entries of `table` from `from` (included) to `to` (excluded; `None`:
    /// to the end), in key order (`.rev()` for the other).
    pub(crate) fn range<'s>(
        &'s self,
        table: Table,
        from: &[u8],
        to: Option<&[u8]>,
    ) -> impl DoubleEndedIterator<Item = (&'s [u8], Stored<'s>)> + 's {
        // An end before the start is an empty range (a map's range would
        // panic).
        let to = to.map_or(Bound::Unbounded, |t| Bound::Excluded(t.max(from).to_vec()));
        let inner: &'s Inner = &self.0;
        inner.maps[table]
            .range::<Vec<u8>, _>((Bound::Included(from.to_vec()), to))
            .map(move |(k, loc)| (k.as_slice(), Stored { inner, loc }))
    }
}

/// One write transaction: its changes are seen by its own reads at once,
/// by others once committed; dropped without [`commit`](Tx::commit), they
/// are undone.
pub(crate) struct Tx<'a> {
    inner: RwLockWriteGuard<'a, Inner>,
    /// What the frame will hold.
    ops: Vec<Op>,
    /// Each change's previous value, to undo.
    undo: Vec<(Table, Vec<u8>, Option<Loc>)>,
    /// Why the file cannot be written (gone, and not made again).
    broken: Option<String>,
}

impl Tx<'_> {
    /// `key`'s value in `table`, this transaction's changes included.
    pub(crate) fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        self.inner.get(table, key)
    }

    /// Whether `table` holds `key`.
    pub(crate) fn has(&self, table: Table, key: &[u8]) -> bool {
        self.inner.maps[table].contains_key(key)
    }

    /// The first `most` entries of `table` from `from` (included) to `to`
    /// (excluded), in key order.
    pub(crate) fn range(
        &self,
        table: Table,
        from: &[u8],
        to: &[u8],
        most: usize,
    ) -> Result<Vec<Entry>, String> {
        if from >= to {
            return Ok(Vec::new());
        }
        self.inner.maps[table]
            .range::<[u8], _>((Bound::Included(from), Bound::Excluded(to)))
            .take(most)
            .map(|(k, loc)| Ok((k.clone(), self.inner.value(loc)?)))
            .collect()
    }

    /// Sets `key` to `value` in `table`.
    pub(crate) fn insert(&mut self, table: Table, key: &[u8], value: &[u8]) {
        let value: Arc<[u8]> = Arc::from(value);
        let had = self.inner.set(table, key, Some(Loc::Mem(value.clone())));
        self.undo.push((table, key.to_vec(), had));
        self.ops.push((table, key.to_vec(), Some(value)));
    }

    /// Removes `key` from `table`: whether it was there.
    pub(crate) fn remove(&mut self, table: Table, key: &[u8]) -> bool {
        let had = self.inner.set(table, key, None);
        let was = had.is_some();
        if was {
            self.undo.push((table, key.to_vec(), had));
            self.ops.push((table, key.to_vec(), None));
        }
        was
    }

    /// Writes the transaction's frame, fsynced if `durable` (a later
    /// durable commit covers earlier ones), and rewrites the file if it
    /// is due. On a failure nothing of it stays.
    pub(crate) fn commit(mut self, durable: bool) -> Result<(), String> {
        if self.ops.is_empty() {
            return Ok(());
        }
        if let Some(e) = self.broken.take() {
            return Err(e); // undone on drop
        }
        let inner = &mut *self.inner;
        let Some(log) = inner.log.as_mut() else {
            self.undo.clear();
            return Ok(());
        };
        let mut body = Vec::new();
        let mut placed = Vec::with_capacity(self.ops.len());
        for (table, key, value) in &self.ops {
            if let Some(at) = encode(&mut body, *table, key, value.as_deref()) {
                placed.push(at);
            }
        }
        let start = log.len;
        let written = log
            .file
            .write_all_at(&frame(&body), start)
            .and_then(|()| match durable {
                true => log.file.sync_data(),
                false => Ok(()),
            });
        if let Err(e) = written {
            // Whatever part of the frame landed is cut off (or, if not,
            // its checksum fails at the next open).
            let _ = log.file.set_len(start);
            return Err(format!("{}: {e}", log.path.display()));
        }
        log.len = start + 8 + body.len() as u64;
        // Each value written now lies in the file (unless a later write of
        // this transaction replaced it).
        let mut at = placed.into_iter();
        for (table, key, value) in std::mem::take(&mut self.ops) {
            let Some(value) = value else {
                continue;
            };
            let Some(offset) = at.next() else {
                break;
            };
            if let Some(Loc::Mem(now)) = inner.maps[table].get_mut(&key)
                && Arc::ptr_eq(now, &value)
            {
                let disk = Loc::Disk {
                    at: start + 8 + offset,
                    len: value.len() as u32,
                };
                inner.maps[table].insert(key, disk);
            }
        }
        self.undo.clear();
        if log.len > inner.live.saturating_mul(2) + COMPACT_SLACK
            && let Err(e) = rewrite(inner)
        {
            tracing::warn!(error = %e, "the store's file was not rewritten; it stays as it is");
        }
        Ok(())
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        while let Some((table, key, had)) = self.undo.pop() {
            self.inner.set(table, &key, had);
        }
    }
}

/// Writes the live entries to a new file beside the old one, fsyncs and
/// locks it, and renames it over the old one.
fn rewrite(inner: &mut Inner) -> Result<(), String> {
    let Some(old) = inner.log.as_ref() else {
        return Ok(());
    };
    let path = old.path.clone();
    let tmp = path.with_extension("rewriting");
    let at = |e: &dyn std::fmt::Display| format!("{}: {e}", tmp.display());
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true).truncate(true);
    let file = crate::util::private::open(&options, &tmp).map_err(|e| at(&e))?;
    lock(&file).map_err(|e| at(&e))?;
    let mut out = BufWriter::with_capacity(1 << 20, &file);
    let mut moved: Vec<(Table, Vec<u8>, Loc)> = Vec::new();
    let (mut pos, mut body, mut pending) = (0u64, Vec::new(), Vec::new());
    let mut flush = |body: &mut Vec<u8>,
                     pending: &mut Vec<(Table, Vec<u8>, u64, u32)>,
                     pos: &mut u64|
     -> Result<(), String> {
        out.write_all(&frame(body)).map_err(|e| at(&e))?;
        for (t, k, off, len) in pending.drain(..) {
            moved.push((
                t,
                k,
                Loc::Disk {
                    at: *pos + 8 + off,
                    len,
                },
            ));
        }
        *pos += 8 + body.len() as u64;
        body.clear();
        Ok(())
    };
    for (t, map) in inner.maps.iter().enumerate() {
        for (key, loc) in map {
            let value = inner.value(loc)?;
            if let Some(off) = encode(&mut body, t, key, Some(&value)) {
                pending.push((t, key.clone(), off, value.len() as u32));
            }
            if body.len() >= REWRITE_FRAME {
                flush(&mut body, &mut pending, &mut pos)?;
            }
        }
    }
    if !body.is_empty() {
        flush(&mut body, &mut pending, &mut pos)?;
    }
    out.flush().map_err(|e| at(&e))?;
    drop(out);
    file.sync_all().map_err(|e| at(&e))?;
    std::fs::rename(&tmp, &path).map_err(|e| at(&e))?;
    if let Some(dir) = path.parent() {
        let _ = File::open(dir).and_then(|d| d.sync_all());
    }
    for (t, k, loc) in moved {
        inner.maps[t].insert(k, loc);
    }
    inner.log = Some(Log {
        file,
        len: pos,
        path,
    });
    Ok(())
}

/// How far past a frame that does not read a whole one is looked for
/// (its length may be what was damaged), and the longest frame looked for
/// there: a commit's frame is most often far smaller (a rewrite's at most
/// [`REWRITE_FRAME`]).
const RESYNC_SPAN: u64 = REWRITE_FRAME as u64 + 8;

/// Where whole frames begin after the frame at `pos` that does not read
/// and run back to back to the file's very end: then that frame is damage
/// with writes after it, not a torn last write. They are looked for where
/// its length says it ends, and from its body on within [`RESYNC_SPAN`]
/// (its length may be what was damaged, longer or shorter). A torn last
/// write has nothing after it: bytes inside it shaped like frames (a
/// webhook's body could hold some) would have to end exactly where the
/// crash cut the write to count.
fn whole_frame_after(file: &File, pos: u64, size: u64) -> Option<u64> {
    let mut head = [0u8; 8];
    file.read_exact_at(&mut head, pos).ok()?;
    let declared = pos + 8 + header(head).0;
    if declared < size
        && frame_len(file, declared, size, MAX_FRAME).is_some_and(|len| len > 0)
        && runs_to_end(file, declared, size)
    {
        return Some(declared);
    }
    // The window read once; a candidate's body only when its length could
    // be a commit's (no longer than one most often is).
    let from = pos + 8;
    let end = size.min(from.saturating_add(RESYNC_SPAN + 8));
    let mut window = vec![0u8; usize::try_from(end.saturating_sub(from)).ok()?];
    file.read_exact_at(&mut window, from).ok()?;
    window.windows(8).enumerate().find_map(|(o, head)| {
        let (len, _) = header(head.try_into().ok()?);
        let at = from + o as u64;
        let could = len > 0 && len < RESYNC_SPAN && at + 8 + len <= size && at != declared;
        (could && frame_len(file, at, size, RESYNC_SPAN).is_some() && runs_to_end(file, at, size))
            .then_some(at)
    })
}

/// The body length of a whole frame at `at` (its length under `most` and
/// within the file, its checksum good).
fn frame_len(file: &File, at: u64, size: u64, most: u64) -> Option<u64> {
    let mut head = [0u8; 8];
    file.read_exact_at(&mut head, at).ok()?;
    let (len, crc) = header(head);
    (len < most && at + 8 + len <= size && crc_of(file, at + 8, len) == Some(crc)).then_some(len)
}

/// Whether whole frames, none empty (zeros a crash left are no frames),
/// run from `at` back to back to exactly `size`.
fn runs_to_end(file: &File, mut at: u64, size: u64) -> bool {
    while at < size {
        match frame_len(file, at, size, MAX_FRAME) {
            Some(len) if len > 0 => at += 8 + len,
            _ => return false,
        }
    }
    at == size
}

/// A frame's header: its body's length and crc32.
fn header(head: [u8; 8]) -> (u64, u32) {
    let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    (u64::from(len), crc)
}

/// Hands `each` the bytes of `file` from `at` to `end`, read a piece of at
/// most `piece` bytes at a time.
fn in_pieces(
    file: &File,
    mut at: u64,
    end: u64,
    piece: u64,
    mut each: impl FnMut(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; piece.min(end.saturating_sub(at)) as usize];
    while at < end {
        let n = (end - at).min(buf.len() as u64) as usize;
        file.read_exact_at(&mut buf[..n], at)?;
        each(&buf[..n])?;
        at += n as u64;
    }
    Ok(())
}

/// The crc32 of `len` bytes of `file` at `at`.
fn crc_of(file: &File, at: u64, len: u64) -> Option<u32> {
    let mut hasher = crc32fast::Hasher::new();
    in_pieces(file, at, at + len, 64 << 10, |b| {
        hasher.update(b);
        Ok(())
    })
    .ok()?;
    Some(hasher.finalize())
}

/// Copies the bytes a cut drops (`pos` to `size` of `file`) beside `path`,
/// owner-only, in a file of its own (`NAME.cut-at-POS`, or `.N` after it
/// when that is taken): where they went.
fn keep_cut(path: &Path, file: &File, pos: u64, size: u64) -> std::io::Result<PathBuf> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    let base = format!("{}.cut-at-{pos}", path.display());
    let (to, mut out) = (0..100)
        .map(|n| match n {
            0 => PathBuf::from(&base),
            n => PathBuf::from(format!("{base}.{n}")),
        })
        .find_map(|to| {
            crate::util::private::open(&options, &to)
                .ok()
                .map(|f| (to, f))
        })
        .ok_or_else(|| std::io::Error::other(format!("{base}: no free name")))?;
    in_pieces(file, pos, size, 1 << 20, |b| out.write_all(b))?;
    out.sync_all()?;
    Ok(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "dripfeed-kv-{tag}-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn committed_writes_survive_a_reopen_and_undone_ones_do_not() {
        let d = dir("reopen");
        let path = d.join("s.kv");
        {
            let kv = Kv::open(&path, 2).unwrap();
            let mut tx = kv.write();
            tx.insert(0, b"a", b"1");
            tx.insert(1, b"b", b"2");
            tx.insert(0, b"a", b"3");
            assert_eq!(tx.get(0, b"a").unwrap().as_deref(), Some(&b"3"[..]));
            tx.commit(true).unwrap();
            let mut tx = kv.write();
            tx.insert(0, b"c", b"4");
            assert!(tx.remove(1, b"b"));
            drop(tx); // not committed
            assert_eq!(kv.read().get(1, b"b").unwrap().as_deref(), Some(&b"2"[..]));
            assert_eq!(kv.read().get(0, b"c").unwrap(), None);
            let mut tx = kv.write();
            assert!(tx.remove(1, b"b"));
            tx.commit(false).unwrap();
        }
        let kv = Kv::open(&path, 2).unwrap();
        let r = kv.read();
        assert_eq!(r.get(0, b"a").unwrap().as_deref(), Some(&b"3"[..]));
        assert_eq!(r.get(1, b"b").unwrap(), None);
        let keys: Vec<&[u8]> = r.range(0, b"", None).map(|(k, _)| k).collect();
        assert_eq!(keys, vec![&b"a"[..]]);
        drop(r);
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn a_file_whose_directory_is_deleted_or_moved_is_written_again() {
        let d = dir("gone");
        let path = d.join("inner/s.kv");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let kv = Kv::open(&path, 1).unwrap();
        let put = |k: &[u8], v: &[u8]| {
            let mut tx = kv.write();
            tx.insert(0, k, v);
            tx.commit(true)
        };
        put(b"before", b"1").unwrap();
        std::fs::remove_dir_all(d.join("inner")).unwrap();
        put(b"deleted", b"2").unwrap();
        std::fs::rename(d.join("inner"), d.join("moved")).unwrap();
        put(b"moved", b"3").unwrap();
        // A link planted where the directory was is refused, never followed.
        std::fs::rename(d.join("inner"), d.join("moved-again")).unwrap();
        std::fs::create_dir(d.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(d.join("elsewhere"), d.join("inner")).unwrap();
        let refused = put(b"linked", b"4").unwrap_err();
        assert!(refused.contains("symbolic link"), "{refused}");
        assert_eq!(kv.read().get(0, b"linked").unwrap(), None, "undone");
        assert_eq!(std::fs::read_dir(d.join("elsewhere")).unwrap().count(), 0);
        std::fs::remove_file(d.join("inner")).unwrap();
        put(b"after", b"5").unwrap();
        drop(kv);
        let kv = Kv::open(&path, 1).unwrap();
        let r = kv.read();
        let keys: Vec<&[u8]> = r.range(0, b"", None).map(|(k, _)| k).collect();
        assert_eq!(keys, vec![&b"after"[..], b"before", b"deleted", b"moved"]);
        drop(r);
        let _ = std::fs::remove_dir_all(d);
    }

    /// Makes a store at `path` of three commits, key `i` holding 100 × `i`.
    fn three_frames(path: &Path) {
        let kv = Kv::open(path, 1).unwrap();
        for i in 0..3u8 {
            let mut tx = kv.write();
            tx.insert(0, &[i], &[i; 100]);
            tx.commit(true).unwrap();
        }
    }

    #[test]
    fn a_torn_last_frame_is_cut_off_and_the_rest_kept() {
        let d = dir("torn");
        let path = d.join("s.kv");
        three_frames(&path);
        let len = std::fs::metadata(&path).unwrap().len();
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(len - 7).unwrap();
        drop(f);
        let kv = Kv::open(&path, 1).unwrap();
        let r = kv.read();
        assert_eq!(r.get(0, &[1]).unwrap(), Some(vec![1; 100]));
        assert_eq!(r.get(0, &[2]).unwrap(), None, "the torn one is gone");
        drop(r);
        // What was cut is kept beside it.
        let cut = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().contains(".cut-at-"))
            .expect("the cut bytes kept");
        assert!(std::fs::metadata(&cut).unwrap().len() > 0);
        let mut tx = kv.write();
        tx.insert(0, &[9], b"after");
        tx.commit(true).unwrap();
        drop(kv);
        let kv = Kv::open(&path, 1).unwrap();
        assert_eq!(
            kv.read().get(0, &[9]).unwrap().as_deref(),
            Some(&b"after"[..])
        );
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn a_damaged_frame_with_whole_ones_after_it_is_refused_not_cut() {
        let d = dir("damaged");
        let path = d.join("s.kv");
        three_frames(&path);
        let before = std::fs::read(&path).unwrap();
        // One byte of the first frame's body flipped: two whole frames follow.
        let mut bytes = before.clone();
        bytes[20] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let refused = Kv::open(&path, 1).err().expect("refused");
        assert!(refused.contains("damaged at byte 0"), "{refused}");
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "nothing cut");
        // Its length damaged, shorter, longer by one, past the file's end
        // or past any frame: the same.
        let first = before[0];
        for (at, value) in [(0, 5u8), (0, first + 1), (2, 0xff), (3, 0x7f)] {
            let mut bytes = before.clone();
            bytes[at] = value;
            std::fs::write(&path, &bytes).unwrap();
            let refused = Kv::open(&path, 1).err().expect("refused");
            assert!(refused.contains("damaged at byte 0"), "{refused}");
        }
        // Put back, it opens whole.
        std::fs::write(&path, &before).unwrap();
        let kv = Kv::open(&path, 1).unwrap();
        assert_eq!(kv.read().range(0, b"", None).count(), 3);
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn a_frame_shaped_value_in_a_torn_last_write_is_no_frame() {
        let d = dir("forged");
        let path = d.join("s.kv");
        // A value holding the bytes of a whole frame, as a webhook's body
        // could.
        let body = [1u8; 40];
        let mut forged = Vec::new();
        forged.extend_from_slice(&(body.len() as u32).to_le_bytes());
        forged.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        forged.extend_from_slice(&body);
        forged.extend_from_slice(&[0u8; 200]);
        {
            let kv = Kv::open(&path, 1).unwrap();
            let mut tx = kv.write();
            tx.insert(0, b"a", b"first");
            tx.commit(true).unwrap();
            let mut tx = kv.write();
            tx.insert(0, b"b", &forged);
            tx.commit(true).unwrap();
        }
        // Torn after the forged frame, inside the value.
        let len = std::fs::metadata(&path).unwrap().len();
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(len - 100).unwrap();
        drop(f);
        let kv = Kv::open(&path, 1).expect("a torn last write, cut");
        assert_eq!(
            kv.read().get(0, b"a").unwrap().as_deref(),
            Some(&b"first"[..])
        );
        assert_eq!(kv.read().get(0, b"b").unwrap(), None);
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn the_file_is_rewritten_once_it_holds_mostly_dead_values_and_is_locked() {
        let d = dir("rewrite");
        let path = d.join("s.kv");
        let kv = Kv::open(&path, 1).unwrap();
        assert!(Kv::open(&path, 1).is_err(), "one process at a time");
        let big = vec![7u8; 64 << 10];
        for round in 0..300u32 {
            let mut tx = kv.write();
            tx.insert(0, &(round % 4).to_be_bytes(), &big);
            tx.commit(false).unwrap();
        }
        // 300 writes of 64 KiB (19 MiB) over 4 live keys: rewritten.
        let size = std::fs::metadata(&path).unwrap().len();
        assert!(size < COMPACT_SLACK + (2 << 20), "{size}");
        assert_eq!(
            kv.read().get(0, &3u32.to_be_bytes()).unwrap(),
            Some(big.clone())
        );
        drop(kv);
        let kv = Kv::open(&path, 1).unwrap();
        assert_eq!(kv.read().range(0, b"", None).count(), 4);
        assert_eq!(kv.live_bytes(), 4 * (4 + big.len() as u64));
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn in_memory_it_keeps_nothing_on_disk() {
        let kv = Kv::memory(1);
        let mut tx = kv.write();
        tx.insert(0, b"k", b"v");
        tx.commit(true).unwrap();
        assert_eq!(kv.read().get(0, b"k").unwrap().as_deref(), Some(&b"v"[..]));
        let mut tx = kv.write();
        tx.insert(0, b"a", b"1");
        tx.insert(0, b"z", b"2");
        tx.commit(true).unwrap();
        let tx = kv.write();
        let got = tx.range(0, b"a", b"l", 10).unwrap();
        assert_eq!(got.len(), 2, "a and k");
        assert!(
            tx.range(0, b"z", b"a", 10).unwrap().is_empty(),
            "an end before the start"
        );
        drop(tx);
        assert_eq!(kv.read().range(0, b"z", Some(b"a")).count(), 0);
        assert_eq!(kv.read().range(0, b"k", Some(b"z")).count(), 1);
    }
}
