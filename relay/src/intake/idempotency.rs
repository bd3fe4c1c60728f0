//! Idempotent intake: a sender that retries its POST after a timeout sends
//! an `Idempotency-Key`; a repeat of a key already accepted (within the
//! window, default 24 h, bounded in count) answers 202 with the first id and
//! enqueues nothing; a repeat with a different body answers 422; a repeat
//! while the first is still being admitted answers 409.
//!
//! With a journal the keys live beside it in `idempotency.jsonl`, one line
//! per accepted key, `fsync`ed before the 202, so the window survives a
//! restart; the file is compacted (expired keys dropped) at each start. The
//! jobs' own records are reclaimed when they finish, so the keys cannot
//! live there.

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How long an `Idempotency-Key` is remembered.
pub const WINDOW: Duration = Duration::from_secs(24 * 3600);
/// The most keys remembered.
pub const MAX_KEYS: usize = 1_000_000;

/// What a request's key says.
#[derive(Debug, PartialEq, Eq)]
pub enum Begin {
    /// Not seen: admit it, then [`Idempotency::accepted`] or [`Idempotency::refused`].
    New,
    /// Accepted before with the same body: answer 202 with this id.
    Repeat(u64),
    /// Accepted before with another body: 422.
    Conflict,
    /// The first request with this key is still being admitted: 409.
    InProgress,
}

#[derive(Clone, Copy)]
enum State {
    Admitting,
    Accepted(u64),
}

/// One accepted key in `idempotency.jsonl`.
#[derive(Serialize, Deserialize)]
struct Line {
    key: String,
    id: u64,
    hash: u64,
    at_ms: u64,
}

/// The keys, oldest first.
struct Keys {
    /// key → state, body hash, accepted at (ms), sequence number.
    map: HashMap<String, (State, u64, u64, u64)>,
    /// Oldest first: key, at (ms), sequence number (stale once its key
    /// was refused or taken again).
    order: VecDeque<(String, u64, u64)>,
    seq: u64,
}

impl Keys {
    fn insert(&mut self, key: String, state: State, hash: u64, at_ms: u64) {
        self.seq += 1;
        self.order.push_back((key.clone(), at_ms, self.seq));
        self.map.insert(key, (state, hash, at_ms, self.seq));
    }
}

/// The accepted keys, in memory and (with a journal) on disk.
pub struct Idempotency {
    keys: Mutex<Keys>,
    file: Option<(PathBuf, Arc<Mutex<std::fs::File>>)>,
    window: Duration,
    max_keys: usize,
}

/// FNV-1a: a stable hash of a body across processes and versions.
pub fn body_hash(body: &[u8]) -> u64 {
    body.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Idempotency {
    /// Keys in memory only.
    pub fn in_memory(window: Duration, max_keys: usize) -> Self {
        Idempotency {
            keys: Mutex::new(Keys {
                map: HashMap::new(),
                order: VecDeque::new(),
                seq: 0,
            }),
            file: None,
            window,
            max_keys,
        }
    }

    /// Keys in `dir/idempotency.jsonl`: the unexpired ones are loaded and
    /// the file rewritten with only them.
    pub fn open(dir: &Path, window: Duration, max_keys: usize) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join("idempotency.jsonl");
        let this = Idempotency::in_memory(window, max_keys);
        let oldest = now_ms().saturating_sub(window.as_millis() as u64);
        let mut kept = Vec::new();
        if let Ok(text) = std::fs::read_to_string(&path) {
            // A torn last line (a crash mid-write) does not parse: skipped.
            kept.extend(
                text.lines()
                    .filter_map(|l| serde_json::from_str::<Line>(l).ok())
                    .filter(|l| l.at_ms >= oldest),
            );
        }
        let skip = kept.len().saturating_sub(max_keys);
        let tmp = dir.join("idempotency.jsonl.tmp");
        let mut out = std::fs::File::create(&tmp)?;
        {
            let mut keys = this.lock();
            for line in kept.into_iter().skip(skip) {
                serde_json::to_writer(&mut out, &line).map_err(std::io::Error::other)?;
                out.write_all(b"\n")?;
                keys.insert(line.key, State::Accepted(line.id), line.hash, line.at_ms);
            }
        }
        out.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        let file = std::fs::OpenOptions::new().append(true).open(&path)?;
        Ok(Idempotency {
            file: Some((path, Arc::new(Mutex::new(file)))),
            ..this
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Keys> {
        self.keys.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Looks `key` up for a body hashing to `hash`; a new key is marked as
    /// being admitted.
    pub fn begin(&self, key: &str, hash: u64) -> Begin {
        let now = now_ms();
        let oldest = now.saturating_sub(self.window.as_millis() as u64);
        let mut keys = self.lock();
        // Expired, or beyond the bound: the oldest go first.
        while let Some((k, at, seq)) = keys.order.front().cloned() {
            let live = keys.map.get(&k).is_some_and(|e| e.3 == seq);
            if live && at >= oldest && keys.map.len() < self.max_keys {
                break;
            }
            keys.order.pop_front();
            if live {
                keys.map.remove(&k);
            }
        }
        match keys.map.get(key) {
            Some((_, h, _, _)) if *h != hash => Begin::Conflict,
            Some((State::Admitting, ..)) => Begin::InProgress,
            Some((State::Accepted(id), ..)) => Begin::Repeat(*id),
            None => {
                keys.insert(key.to_owned(), State::Admitting, hash, now);
                Begin::New
            }
        }
    }

    /// The key's webhook was accepted as `id`: durable before the 202.
    pub async fn accepted(&self, key: &str, id: u64) -> std::io::Result<()> {
        let line = {
            let mut keys = self.lock();
            let Some(entry) = keys.map.get_mut(key) else {
                return Ok(());
            };
            entry.0 = State::Accepted(id);
            Line {
                key: key.to_owned(),
                id,
                hash: entry.1,
                at_ms: entry.2,
            }
        };
        let Some((path, file)) = &self.file else {
            return Ok(());
        };
        let (path, file) = (path.clone(), file.clone());
        let mut bytes = serde_json::to_vec(&line).map_err(std::io::Error::other)?;
        bytes.push(b'\n');
        tokio::task::spawn_blocking(move || {
            let mut f = file.lock().unwrap_or_else(|p| p.into_inner());
            f.write_all(&bytes).and_then(|()| f.sync_data())
        })
        .await
        .map_err(std::io::Error::other)?
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))
    }

    /// The key's webhook was refused: a retry may try again.
    pub fn refused(&self, key: &str) {
        let mut keys = self.lock();
        if matches!(keys.map.get(key), Some((State::Admitting, ..))) {
            keys.map.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_conflicts_and_the_bound() {
        let idem = Idempotency::in_memory(Duration::from_secs(60), 2);
        assert_eq!(idem.begin("a", 1), Begin::New);
        assert_eq!(idem.begin("a", 1), Begin::InProgress);
        idem.refused("a");
        assert_eq!(idem.begin("a", 1), Begin::New);
        assert_eq!(idem.begin("a", 2), Begin::Conflict);
        assert_eq!(idem.begin("b", 1), Begin::New);
        assert_eq!(idem.begin("c", 1), Begin::New); // "a" goes: at most 2 keys
        assert_eq!(idem.begin("a", 9), Begin::New);
    }
}
