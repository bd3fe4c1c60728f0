//! Ended statuses beside the journal, so a restart remembers them:
//! `statuses.jsonl` in the journal directory, one JSON line per webhook
//! that ended (delivered or dead-lettered), appended by a writer thread of
//! its own (the drain never waits for the disk), which lets lines gather
//! for a tenth of a second and writes them together. Not fsynced: a crash can forget the last
//! moments' ends (those webhooks were delivered or dead-lettered all the
//! same; only their status is forgotten).
//!
//! Bounded on disk: once the file holds `max(status_max, 1024)` lines it is
//! renamed `statuses.1.jsonl` (replacing the one before) and a new one
//! begins, so the two files together always hold at least the `status_max`
//! latest ends and never more than twice as many. At start both are read,
//! older first, into the registry's bounded set (retention and count
//! applied as for any end); a line that does not read (torn by a crash) is
//! skipped.

use std::collections::HashMap;
use std::io::{BufRead, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender};

use serde::{Deserialize, Serialize};

use super::{State, Status};

/// The live file's name.
pub(crate) const FILE: &str = "statuses.jsonl";
/// The previous file's name.
pub(crate) const OLD: &str = "statuses.1.jsonl";

/// Lines waiting for the writer at most: past it an end is not written
/// (counted), rather than the drain waiting for the disk.
pub(crate) const BACKLOG: usize = 65_536;

/// How long the writer lets lines gather before it writes them.
const GATHER: std::time::Duration = std::time::Duration::from_millis(100);

/// The writer's buffer: a tenth of a second's lines at tens of thousands
/// of webhooks a second in a few writes.
const BUFFER: usize = 256 * 1024;

/// What the writer is sent.
pub(crate) enum Msg {
    /// A line to append.
    Line(Line),
    /// Flush and end (at shutdown).
    Close,
}

/// The writer's inbox: lines go in without waiting, at most a bound of
/// them waiting. An unbounded channel and a count, not a `sync_channel`:
/// std's bounded channel allocates and writes its whole array when it is
/// made (8 MiB for 65,536 lines), which every relay held from its start;
/// this one holds blocks only while lines wait.
#[derive(Clone)]
pub(crate) struct Inbox {
    tx: Sender<Msg>,
    waiting: Arc<AtomicUsize>,
    bound: usize,
}

impl Inbox {
    /// An inbox taking at most `bound` waiting lines, and its receiving end.
    fn new(bound: usize) -> (Inbox, Receiver<Msg>, Arc<AtomicUsize>) {
        let (tx, rx) = std::sync::mpsc::channel();
        let waiting = Arc::new(AtomicUsize::new(0));
        let inbox = Inbox {
            tx,
            waiting: waiting.clone(),
            bound,
        };
        (inbox, rx, waiting)
    }

    /// Sends `line` without waiting; `false` when the backlog is full
    /// (a writer that has ended takes nothing, and is not a full backlog).
    pub(crate) fn offer(&self, line: Line) -> bool {
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= self.bound {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        if self.tx.send(Msg::Line(line)).is_err() {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
        }
        true
    }

    /// Asks the writer to write what it holds and end.
    pub(crate) fn close(&self) {
        let _ = self.tx.send(Msg::Close);
    }
}

/// One ended webhook, as a line.
#[derive(Serialize, Deserialize)]
pub(crate) struct Line {
    /// Its public id.
    id: u64,
    /// `delivered` or `dead_lettered`.
    state: State,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tenant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    destination: Option<String>,
    #[serde(default)]
    attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    received_unix_ms: Option<u64>,
    /// When it ended, ms since the Unix epoch.
    ended_unix_ms: u64,
}

impl Line {
    /// The line for webhook `id`, ended at `ended` with `status`.
    pub(crate) fn of(id: u64, status: &Status, ended: u64) -> Line {
        Line {
            id,
            state: status.state,
            tenant: status.tenant.as_deref().map(str::to_owned),
            destination: status.destination.as_deref().map(str::to_owned),
            attempts: status.attempts,
            last_status: status.last_status,
            last_error: status.last_error.as_deref().map(str::to_owned),
            received_unix_ms: status.received_unix_ms,
            ended_unix_ms: ended,
        }
    }
}

/// An end read back: public id, status, when it ended.
pub(crate) type Restored = (u64, Status, u64);

/// Reads both files of `dir`, older first, giving each end to `each`;
/// returns how many lines did not read (a line torn by a crash).
pub(crate) fn load(dir: &Path, mut each: impl FnMut(Restored)) -> usize {
    let mut names: HashMap<String, Arc<str>> = HashMap::new();
    let mut shared = |name: String| {
        names
            .entry(name)
            .or_insert_with_key(|n| Arc::from(n.as_str()))
            .clone()
    };
    let mut bad = 0;
    for name in [OLD, FILE] {
        let Ok(file) = crate::util::private::read(&dir.join(name)) else {
            continue;
        };
        // By bytes: a torn or garbled line is skipped, and a read error
        // ends the file rather than repeating.
        for raw in std::io::BufReader::new(file)
            .split(b'\n')
            .map_while(Result::ok)
        {
            let Ok(line) = serde_json::from_slice::<Line>(&raw) else {
                bad += 1;
                continue;
            };
            let status = Status {
                state: line.state,
                tenant: line.tenant.map(&mut shared),
                destination: line.destination.map(&mut shared),
                attempts: line.attempts,
                last_status: line.last_status,
                last_error: line.last_error.map(Arc::from),
                next_attempt_unix_ms: None,
                received_unix_ms: line.received_unix_ms,
            };
            each((line.id, status, line.ended_unix_ms));
        }
    }
    bad
}

/// Starts the writer thread appending to `dir`'s file, rotating at
/// `rotate_at` lines: the inbox its lines go through, and the thread,
/// which ends once every inbox is dropped (or closed) and its lines are
/// written.
pub(crate) fn writer(
    dir: &Path,
    rotate_at: usize,
) -> std::io::Result<(Inbox, std::thread::JoinHandle<()>)> {
    start(dir, rotate_at, BACKLOG)
}

/// [`writer`] with an inbox of `bound` lines.
fn start(
    dir: &Path,
    rotate_at: usize,
    bound: usize,
) -> std::io::Result<(Inbox, std::thread::JoinHandle<()>)> {
    let path = dir.join(FILE);
    let lines = match crate::util::private::read(&path) {
        Ok(f) => std::io::BufReader::new(f).split(b'\n').count(),
        Err(_) => 0,
    };
    let mut file = append(&path)?;
    end_torn_line(&mut file)?;
    let (inbox, rx, waiting) = Inbox::new(bound);
    let w = Writer {
        path: crate::util::private::real_path(&path),
        old: crate::util::private::real_path(&dir.join(OLD)),
        file: std::io::BufWriter::with_capacity(BUFFER, file),
        lines,
        rotate_at: rotate_at.max(1024),
        waiting,
    };
    let thread = std::thread::Builder::new()
        .name("status-writer".into())
        .spawn(move || w.run(rx))?;
    Ok((inbox, thread))
}

fn append(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true).read(true);
    crate::util::private::open(&options, path)
}

/// A file a crash left without its last newline gets one, so the next
/// line is not glued to the torn one.
fn end_torn_line(file: &mut std::fs::File) -> std::io::Result<()> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(());
    }
    let mut last = [0u8; 1];
    file.seek(std::io::SeekFrom::Start(len - 1))?;
    file.read_exact(&mut last)?;
    if last[0] != b'\n' {
        file.write_all(b"\n")?; // append mode: at the end whatever the seek
    }
    Ok(())
}

struct Writer {
    path: PathBuf,
    old: PathBuf,
    file: std::io::BufWriter<std::fs::File>,
    lines: usize,
    rotate_at: usize,
    /// The inbox's count of lines waiting: taken down as they are read.
    waiting: Arc<AtomicUsize>,
}

impl Writer {
    fn run(mut self, rx: Receiver<Msg>) {
        let mut failed = false;
        let mut closing = false;
        while let Ok(first) = rx.recv() {
            // Woken once, then lines gather for a moment: a write and a
            // wake-up a tenth of a second at most, not one per webhook (on a
            // busy 2-core machine those cost the relay a third of its
            // journaled throughput).
            if !matches!(first, Msg::Close) {
                std::thread::sleep(GATHER);
            }
            self.reopen_if_gone();
            let mut wrote = Ok(());
            for msg in std::iter::once(first).chain(rx.try_iter()) {
                match msg {
                    Msg::Line(line) => {
                        self.waiting.fetch_sub(1, Ordering::AcqRel);
                        wrote = wrote.and_then(|()| self.write(&line));
                    }
                    Msg::Close => closing = true,
                }
            }
            let wrote = wrote.and_then(|()| self.file.flush());
            match wrote {
                Err(e) if !failed => {
                    failed = true;
                    tracing::warn!(file = %self.path.display(), error = %e, "webhook statuses cannot be written: a restart will forget some ended ones");
                }
                Err(_) => {}
                Ok(()) => failed = false,
            }
            if closing {
                return;
            }
        }
    }

    /// Its file gone from its path (the journal's directory deleted and
    /// made again, say): a new one there, so the ends from now on are
    /// remembered by the next start (those the old one held are gone).
    fn reopen_if_gone(&mut self) {
        if !crate::util::private::gone(self.file.get_ref(), &self.path) {
            return;
        }
        let made = crate::util::private::dir_again(&self.path).is_ok();
        if made && let Ok(file) = append(&self.path) {
            let _ = self.file.flush();
            self.file = std::io::BufWriter::with_capacity(BUFFER, file);
            self.lines = 0;
            tracing::warn!(file = %self.path.display(), "the webhook statuses' file was gone: a new one is written");
        }
    }

    fn write(&mut self, line: &Line) -> std::io::Result<()> {
        if self.lines >= self.rotate_at {
            self.file.flush()?;
            std::fs::rename(&self.path, &self.old)?;
            self.file = std::io::BufWriter::with_capacity(BUFFER, append(&self.path)?);
            self.lines = 0;
        }
        let mut text = serde_json::to_vec(line).map_err(std::io::Error::other)?;
        text.push(b'\n');
        self.file.write_all(&text)?;
        self.lines += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_are_read_back_across_a_rotation_and_torn_lines_skipped() {
        let dir = std::env::temp_dir().join(format!("dripfeed-statuses-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (tx, thread) = writer(&dir, 0).unwrap(); // rotates at 1024
        let acme: Arc<str> = Arc::from("acme");
        for id in 0..1500u64 {
            let status = Status {
                state: State::Delivered,
                tenant: Some(acme.clone()),
                destination: Some(Arc::from("billing")),
                attempts: 1,
                last_status: Some(204),
                ..Status::default()
            };
            assert!(tx.offer(Line::of(id, &status, 1000 + id)));
        }
        drop(tx);
        thread.join().unwrap();
        let lines = |name: &str| {
            std::fs::read_to_string(dir.join(name))
                .unwrap()
                .lines()
                .count()
        };
        assert_eq!((lines(OLD), lines(FILE)), (1024, 476));
        let mut live = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join(FILE))
            .unwrap();
        live.write_all(b"{\"id\":9,\"sta").unwrap();
        // A run after the crash: its first line is not glued to the torn one.
        let (tx, thread) = writer(&dir, 0).unwrap();
        let dead = Status {
            state: State::DeadLettered,
            ..Status::default()
        };
        assert!(tx.offer(Line::of(7777, &dead, 5000)));
        tx.close();
        thread.join().unwrap();
        let mut back = Vec::new();
        let bad = load(&dir, |r| back.push(r));
        assert_eq!((back.len(), bad), (1501, 1));
        let (id, status, ended) = &back[1499];
        assert_eq!((*id, *ended), (1499, 2499));
        assert_eq!(status.tenant.as_deref(), Some("acme"));
        assert_eq!(
            (status.state, status.last_status),
            (State::Delivered, Some(204))
        );
        assert_eq!(
            (back[1500].0, back[1500].1.state),
            (7777, State::DeadLettered)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_gone_from_its_directory_is_made_again() {
        let dir =
            std::env::temp_dir().join(format!("dripfeed-statuses-gone-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (inbox, thread) = writer(&dir, 0).unwrap();
        let ended = Status::default();
        assert!(inbox.offer(Line::of(1, &ended, 1)));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while inbox.waiting.load(Ordering::Acquire) > 0 || !dir.join(FILE).exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "the writer never wrote"
            );
            std::thread::yield_now();
        }
        // The directory deleted and made again (as the journal does).
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        assert!(inbox.offer(Line::of(2, &ended, 2)));
        inbox.close();
        thread.join().unwrap();
        let mut ids = Vec::new();
        load(&dir, |(id, _, _)| ids.push(id));
        assert_eq!(ids, [2], "written to a new file at its path");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_full_inbox_refuses_and_a_gone_writer_is_not_full() {
        let (inbox, rx, waiting) = Inbox::new(2);
        let ended = Status::default();
        assert!(inbox.offer(Line::of(1, &ended, 1)));
        assert!(inbox.offer(Line::of(2, &ended, 1)));
        assert!(!inbox.offer(Line::of(3, &ended, 1)), "two wait: full");
        assert_eq!(waiting.load(Ordering::Acquire), 2);
        drop(rx);
        waiting.store(0, Ordering::Release);
        // The writer has ended: nothing waits, and the end is not counted
        // as refused for a full backlog.
        assert!(inbox.offer(Line::of(4, &ended, 1)));
        assert_eq!(waiting.load(Ordering::Acquire), 0);
    }

    #[test]
    fn the_writer_makes_room_in_its_inbox_as_it_reads() {
        let dir = std::env::temp_dir().join(format!("dripfeed-inbox-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (inbox, thread) = start(&dir, 0, 2).unwrap();
        let ended = Status::default();
        assert!(inbox.offer(Line::of(1, &ended, 1)));
        assert!(inbox.offer(Line::of(2, &ended, 1)));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while inbox.waiting.load(Ordering::Acquire) > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the writer never read"
            );
            std::thread::yield_now();
        }
        assert!(inbox.offer(Line::of(3, &ended, 1)), "read: room again");
        assert!(inbox.offer(Line::of(4, &ended, 1)));
        inbox.close();
        thread.join().unwrap();
        let mut ids = Vec::new();
        load(&dir, |(id, _, _)| ids.push(id));
        assert_eq!(ids, [1, 2, 3, 4]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
