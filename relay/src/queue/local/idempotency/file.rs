//! `idempotency.jsonl`: one line per accepted key, appended and `fsync`ed
//! before the 202. Read at start a line at a time (a line longer than
//! [`MAX_LINE`] is skipped, never held whole), so memory stays bounded
//! whatever the file's size; rewritten with only the live keys at start and
//! whenever it holds more than twice their lines (and over
//! [`COMPACT_FLOOR`]), so it stays bounded while the relay runs.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::util::mutex::lock;

/// The longest line read; a longer one is skipped.
pub(super) const MAX_LINE: u64 = 4096;
/// Below this size the file is never rewritten while running.
pub(super) const COMPACT_FLOOR: u64 = 64 * 1024;

/// One accepted key.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub(super) struct Line {
    /// The tenant whose key it is; absent in files written before keys
    /// were scoped (read as the default tenant).
    #[serde(default)]
    pub tenant: Option<String>,
    /// The `Idempotency-Key`.
    pub key: String,
    /// The destination its webhook went to; absent in files written
    /// before a key named its destination (any destination matches).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
    /// The webhook's id.
    pub id: u64,
    /// Its body's hash.
    pub hash: u64,
    /// Accepted at, ms since the Unix epoch.
    pub at_ms: u64,
}

impl Line {
    /// The line as written, newline included.
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec(self).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }
}

/// Reads `path` a line at a time, handing each line that parses to
/// `each`; a missing file is empty. Torn or garbled lines (a crash
/// mid-write) are skipped.
pub(super) fn read(path: &Path, mut each: impl FnMut(Line)) -> std::io::Result<()> {
    let file = match crate::util::private::read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let mut reader = BufReader::new(file);
    let mut buf = Vec::with_capacity(256);
    loop {
        buf.clear();
        let n = (&mut reader).take(MAX_LINE).read_until(b'\n', &mut buf)?;
        if n == 0 {
            return Ok(());
        }
        if buf.last() != Some(&b'\n') && n as u64 == MAX_LINE {
            // Too long to be a key's line: skip the rest of it.
            reader.skip_until(b'\n')?;
            continue;
        }
        if let Ok(line) = serde_json::from_slice::<Line>(&buf) {
            each(line);
        }
    }
}

/// The file, open for appending, and its size.
struct Appender {
    file: File,
    bytes: u64,
    /// No rewrite is tried below this size (raised after one fails).
    next_try: u64,
}

/// `idempotency.jsonl`, shared by every request appending to it.
#[derive(Clone)]
pub(super) struct KeysFile {
    path: PathBuf,
    appender: Arc<Mutex<Appender>>,
}

/// Writes `lines` to `path` through a temporary file, `fsync`ed and
/// renamed over it; the bytes written.
fn rewrite(path: &Path, lines: impl IntoIterator<Item = Line>) -> std::io::Result<u64> {
    let tmp = path.with_extension("jsonl.tmp");
    // Made afresh: whatever a crash (or anyone) left at its name goes.
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    let file = crate::util::private::open(&options, &tmp)?;
    let mut out = BufWriter::new(file);
    let mut bytes = 0u64;
    for line in lines {
        let encoded = line.encode();
        out.write_all(&encoded)?;
        bytes += encoded.len() as u64;
    }
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent()
        && let Ok(d) = File::open(dir)
    {
        let _ = d.sync_all();
    }
    Ok(bytes)
}

/// `path` rewritten with `lines` and opened for appending; the bytes
/// written.
fn remade(path: &Path, lines: impl IntoIterator<Item = Line>) -> std::io::Result<(File, u64)> {
    let bytes = rewrite(path, lines)?;
    let file = crate::util::private::open(OpenOptions::new().append(true), path)?;
    Ok((file, bytes))
}

impl KeysFile {
    /// Rewrites `path` with `lines` and opens it for appending.
    pub(super) fn create(
        path: PathBuf,
        lines: impl IntoIterator<Item = Line>,
    ) -> std::io::Result<Self> {
        let (file, bytes) = remade(&path, lines)?;
        Ok(KeysFile {
            path: crate::util::private::real_path(&path),
            appender: Arc::new(Mutex::new(Appender {
                file,
                bytes,
                next_try: COMPACT_FLOOR,
            })),
        })
    }

    /// The file's path.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `line` and syncs it (blocking). Then, when the file holds
    /// more than twice `live()` bytes of lines (and is over the floor),
    /// rewrites it with `snapshot()`: the accepted keys, read while the
    /// file is held, so no append falls between the two.
    pub(super) fn append(
        &self,
        line: &[u8],
        live: impl FnOnce() -> u64,
        snapshot: impl FnOnce() -> Vec<Line>,
    ) -> std::io::Result<()> {
        let mut a = lock(&self.appender);
        let mut snapshot = Some(snapshot);
        if crate::util::private::gone(&a.file, &self.path) {
            // Its directory was deleted (and made again by the journal),
            // or the file removed: made again with every accepted key, so
            // the window still survives a restart.
            let lines = snapshot.take().map(|all| all()).unwrap_or_default();
            crate::util::private::dir_again(&self.path)?;
            (a.file, a.bytes) = remade(&self.path, lines)?;
            a.next_try = COMPACT_FLOOR;
            tracing::warn!(path = %self.path.display(), "the idempotency keys file was gone: made again with the keys remembered");
        }
        a.file.write_all(line)?;
        a.file.sync_data()?;
        a.bytes += line.len() as u64;
        // Made again just now: no compaction to look at.
        let Some(snapshot) = snapshot else {
            return Ok(());
        };
        if a.bytes <= a.next_try || a.bytes <= 2 * live() {
            return Ok(());
        }
        let before = a.bytes;
        match remade(&self.path, snapshot()) {
            Ok((file, bytes)) => {
                a.file = file;
                a.bytes = bytes;
                a.next_try = COMPACT_FLOOR;
                tracing::debug!(before, after = bytes, "idempotency keys file compacted");
            }
            Err(e) => {
                // Keep appending to the file as it is; try again once it
                // has doubled.
                a.next_try = before.saturating_mul(2);
                tracing::warn!(error = %e, path = %self.path.display(), "idempotency keys file not compacted");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(i: u64) -> Line {
        Line {
            tenant: Some("t".into()),
            key: format!("k{i}"),
            destination: Some("billing".into()),
            id: i,
            hash: 7,
            at_ms: 1000 + i,
        }
    }

    #[test]
    fn reads_back_skipping_long_and_torn_lines_and_compacts() {
        let dir = std::env::temp_dir().join(format!("relay-keys-file-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("idempotency.jsonl");
        let mut text = line(1).encode();
        text.extend(vec![b'x'; 10_000]);
        text.push(b'\n');
        text.extend(b"{\"key\":\"old\",\"id\":2,\"hash\":3,\"at_ms\":4}\n");
        text.extend(&line(3).encode()[..10]);
        std::fs::write(&path, &text).unwrap();
        let mut got = Vec::new();
        read(&path, |l| got.push(l)).unwrap();
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0], line(1));
        assert_eq!((got[1].tenant.as_deref(), got[1].id), (None, 2));

        let file = KeysFile::create(path.clone(), vec![line(1)]).unwrap();
        for i in 0..2000 {
            file.append(&line(i).encode(), || 100, || vec![line(i)])
                .unwrap();
        }
        let size = std::fs::metadata(&path).unwrap().len();
        assert!(size <= COMPACT_FLOOR + 100, "compacted: {size}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_gone_from_its_directory_is_made_again_with_every_key() {
        let dir = std::env::temp_dir().join(format!("relay-keys-gone-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("idempotency.jsonl");
        let file = KeysFile::create(path.clone(), Vec::new()).unwrap();
        file.append(&line(1).encode(), || 1, Vec::new).unwrap();
        // The directory deleted and made again (as the journal does).
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        file.append(&line(2).encode(), || 2, || vec![line(1)])
            .unwrap();
        let mut got = Vec::new();
        read(&path, |l| got.push(l.id)).unwrap();
        assert_eq!(got, [1, 2], "the remembered key and the new one");
        file.append(&line(3).encode(), || 3, Vec::new).unwrap();
        let mut got = Vec::new();
        read(&path, |l| got.push(l.id)).unwrap();
        assert_eq!(got, [1, 2, 3], "appended as usual once made again");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
