//! The journal's writer: one thread that owns the files.
//!
//! Producers hand it framed records through a channel; it takes everything
//! waiting at once, writes it with one `write`, makes it durable with one
//! `fsync` and then answers every producer of the batch (group commit).
//! After each batch it gives space back: the oldest segment goes once none
//! of its jobs is live, and one whose live records are a small share of it
//! has them copied forward first, so a long-lived job cannot pin the
//! segments behind it.
//!
//! It also watches the directory ([`home`](super::home)): between batches,
//! at most every [`CHECK_EVERY`](super::home::CHECK_EVERY), and before each
//! roll.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use tokio::sync::oneshot;

use super::frame::{self, Kind};
use super::home::Home;
use super::key::Key;
use super::live::{LiveSet, Seg};
use super::scan::scan;
use super::segments;
use super::{Durability, JournalOptions};

/// What a producer's wait ends with.
pub(crate) type Ack = oneshot::Sender<Result<(), std::io::Error>>;

/// Work for the writer.
pub(crate) enum Cmd {
    /// A framed admission: an `Admit` record, or a `Retried` one for a job
    /// submitted with attempts made before; `ack` (when the caller waits)
    /// answers once the record is as durable as the journal's setting says.
    Admit {
        id: u64,
        frame: Vec<u8>,
        ack: Option<Ack>,
    },
    /// A framed `Retried` record: written only if job `id` is live (its
    /// admission written, in an earlier batch or earlier in this one), and
    /// `fsync`ed with its batch when admissions are (`Durability::Sync`),
    /// since it moves the job's place and the segment that held it may be
    /// removed next.
    Retried { id: u64, frame: Vec<u8> },
    /// A job ended.
    End { id: u64 },
    /// Write and `fsync` everything before this, then answer.
    Flush { ack: oneshot::Sender<()> },
}

/// What the writer publishes for the handles to read.
#[derive(Debug)]
pub(crate) struct Gauges {
    /// `false` while the directory is gone: admissions are refused.
    pub(crate) healthy: AtomicBool,
    /// `true` from a batch whose write or `fsync` failed (a full disk, an
    /// I/O error) to the next that succeeds: its admissions were refused.
    pub(crate) writes_failing: AtomicBool,
    /// `true` from a failed start of a new segment to the next that
    /// succeeds: admissions go on into the active one, past its size.
    pub(crate) cannot_roll: AtomicBool,
    pub(crate) disk_bytes: AtomicU64,
    /// Framed bytes sent and not yet written.
    pub(crate) pending_bytes: AtomicU64,
    pub(crate) live: AtomicU64,
    pub(crate) segments: AtomicU64,
    pub(crate) fsyncs: AtomicU64,
    pub(crate) batches: AtomicU64,
}

impl Default for Gauges {
    fn default() -> Self {
        Gauges {
            healthy: AtomicBool::new(true),
            writes_failing: AtomicBool::new(false),
            cannot_roll: AtomicBool::new(false),
            disk_bytes: AtomicU64::new(0),
            pending_bytes: AtomicU64::new(0),
            live: AtomicU64::new(0),
            segments: AtomicU64::new(0),
            fsyncs: AtomicU64::new(0),
            batches: AtomicU64::new(0),
        }
    }
}

/// Most commands taken into one batch.
const BATCH: usize = 8192;

/// The least a probe of a failing journal writes (and cuts off again).
const PROBE: usize = 16 * 1024;
/// The most a probe writes.
const PROBE_MAX: usize = 4 << 20;

pub(crate) struct Writer {
    pub(crate) dir: PathBuf,
    /// The directory's key: every record and new segment is written with it.
    pub(crate) key: Key,
    pub(crate) opts: JournalOptions,
    pub(crate) live: LiveSet,
    pub(crate) active: File,
    pub(crate) active_seq: u64,
    /// The other segments, open until reclaimed (at most about
    /// `max_bytes / segment_bytes`): their live records can be read back
    /// even once unlinked, and coming back can tell which files are ours.
    pub(crate) files: BTreeMap<u64, File>,
    /// The directory: its lock, its identity, whether it is gone.
    pub(crate) home: Home,
    pub(crate) gauges: Arc<Gauges>,
    /// `leaky_bucket_journal_bytes`, registered once.
    pub(crate) bytes_gauge: metrics::Gauge,
    /// `leaky_bucket_journal_syncs_total`, registered once.
    pub(crate) syncs: metrics::Counter,
    /// The largest batch whose write failed in the episode under way: a
    /// probe writes as much before it says writes succeed again.
    pub(crate) failed_bytes: usize,
    /// Jobs whose `End` a failed write did not record: still live on disk,
    /// they are written again with the next batch (or within
    /// [`Home`]'s idle check), so a crash after the disk fills and frees
    /// does not deliver them a second time.
    pub(crate) unwritten_ends: Vec<u64>,
}

/// A batch's answers, sent once its effects are published.
struct Answers {
    written: Option<std::io::Error>,
    acks: Vec<Ack>,
    flushes: Vec<oneshot::Sender<()>>,
}

impl Answers {
    fn send(self, dir: &std::path::Path) {
        match self.written {
            None => self.acks.into_iter().for_each(|a| {
                let _ = a.send(Ok(()));
            }),
            Some(e) => {
                // Logged once per episode ([`Writer::note_write`]).
                tracing::debug!(dir = %dir.display(), error = %e, "journal: a write failed; its jobs are refused");
                for a in self.acks {
                    let _ = a.send(Err(std::io::Error::new(e.kind(), e.to_string())));
                }
            }
        }
        for f in self.flushes {
            let _ = f.send(());
        }
    }
}

enum Op {
    Admit { id: u64, len: usize },
    End { id: u64 },
}

impl Writer {
    /// Runs until every sender is gone, then makes the tail durable.
    pub(crate) fn run(mut self, rx: mpsc::Receiver<Cmd>) {
        let mut cmds = Vec::new();
        let mut buf = Vec::new();
        loop {
            let wait = self
                .home
                .next_check
                .saturating_duration_since(Instant::now());
            match rx.recv_timeout(wait) {
                Ok(first) => cmds.push(first),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    self.watch();
                    self.write_pending_ends(&mut buf);
                    self.roll_again();
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            while cmds.len() < BATCH {
                match rx.try_recv() {
                    Ok(cmd) => cmds.push(cmd),
                    Err(_) => break,
                }
            }
            if self.home.is_gone() {
                self.refuse(&mut cmds);
                self.publish();
            } else {
                let admitting = cmds.iter().any(|c| matches!(c, Cmd::Admit { .. }));
                let mut answers = self.commit(&mut cmds, &mut buf);
                // A batch of ends alone may fit where an admission does not
                // (the page a failed write left): only admissions tell.
                if answers.written.is_some() {
                    self.failed_bytes = self.failed_bytes.max(buf.len());
                }
                if answers.written.is_some() || admitting {
                    self.note_write(answers.written.as_ref());
                }
                self.check_before_answering(&mut answers);
                self.reclaim();
                self.publish();
                answers.send(&self.dir);
            }
            if Instant::now() >= self.home.next_check {
                self.watch();
            }
        }
        // A last try before the journal closes.
        self.write_pending_ends(&mut buf);
        let _ = self.active.sync_data();
        self.closing();
    }

    /// A record `fsync`ed into a deleted directory is not durable (nothing
    /// is left to recover after a crash): before a batch's admissions are
    /// answered, the directory is checked (a few `stat`s, next to the
    /// `fsync`). Gone: they are refused, and the writer tries to come back
    /// at once (journaling every unfinished job again), before it answers,
    /// instead of at the next timed check: no caller hears "admitted" for
    /// a record that only an unlinked file holds.
    fn check_before_answering(&mut self, answers: &mut Answers) {
        if answers.acks.is_empty() || answers.written.is_some() {
            return;
        }
        if self.home.intact(&self.dir, self.active_seq) {
            return;
        }
        self.lost();
        answers.written = Some(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "the journal directory is gone",
        ));
        self.watch();
    }

    /// Follows whether writes fail: one line when they start failing (a
    /// full disk, an I/O error) and one when they succeed again, whatever
    /// the number of batches between; [`Journal::health`] reads it.
    ///
    /// [`Journal::health`]: super::Journal::health
    pub(crate) fn note_write(&mut self, failed: Option<&std::io::Error>) {
        let was = self
            .gauges
            .writes_failing
            .swap(failed.is_some(), Ordering::AcqRel);
        match (was, failed) {
            (false, Some(e)) => {
                tracing::error!(dir = %self.dir.display(), error = %e, "journal: writing fails; admissions are refused until a write succeeds");
            }
            (true, None) => {
                self.failed_bytes = 0;
                tracing::warn!(dir = %self.dir.display(), "journal: writes succeed again; admissions resume");
            }
            _ => {}
        }
    }

    /// While writes fail and no batch comes (a readiness check may have
    /// turned the traffic away), a record that changes nothing (the end of
    /// no job, as long as the largest batch that failed and at least
    /// [`PROBE`] bytes) is written, `fsync`ed and cut off again, to learn
    /// when writes work: a disk with room for a small probe and not for
    /// the batches does not flap between the two.
    pub(crate) fn probe(&mut self) {
        if !self.gauges.writes_failing.load(Ordering::Acquire) || self.home.is_gone() {
            return;
        }
        let before = self.active_len();
        let mut buf = Vec::new();
        let len = self.failed_bytes.clamp(PROBE, PROBE_MAX);
        frame::encode(&mut buf, &self.key, Kind::End, 0, &vec![0u8; len]);
        let wrote = self
            .active
            .write_all(&buf)
            .and_then(|()| self.active.sync_data());
        // Cut off whether or not it went: the segment is as it was.
        if self.active.set_len(before).is_err() {
            self.roll();
        }
        if wrote.is_ok() {
            self.note_write(None);
        }
    }

    fn active_len(&self) -> u64 {
        self.live.segs.get(&self.active_seq).map_or(0, |s| s.len)
    }

    fn commit(&mut self, cmds: &mut Vec<Cmd>, buf: &mut Vec<u8>) -> Answers {
        buf.clear();
        let mut ops = Vec::with_capacity(cmds.len());
        let mut acks = Vec::new();
        let mut flushes = Vec::new();
        let mut admitted = 0u64;
        // A `Retried` record moved a job's place.
        let mut moved = false;
        for id in std::mem::take(&mut self.unwritten_ends) {
            frame::encode(buf, &self.key, Kind::End, id, &[]);
            ops.push(Op::End { id });
        }
        for cmd in cmds.drain(..) {
            match cmd {
                Cmd::Admit { id, frame, ack } => {
                    buf.extend_from_slice(&frame);
                    admitted += frame.len() as u64;
                    ops.push(Op::Admit {
                        id,
                        len: frame.len(),
                    });
                    acks.extend(ack);
                }
                Cmd::Retried { id, frame } => {
                    admitted += frame.len() as u64;
                    let admitting = |o: &Op| matches!(o, Op::Admit { id: a, .. } if *a == id);
                    if self.live.jobs.contains_key(&id) || ops.iter().any(admitting) {
                        buf.extend_from_slice(&frame);
                        ops.push(Op::Admit {
                            id,
                            len: frame.len(),
                        });
                        moved = true;
                    }
                }
                Cmd::End { id } => {
                    frame::encode(buf, &self.key, Kind::End, id, &[]);
                    ops.push(Op::End { id });
                }
                Cmd::Flush { ack } => flushes.push(ack),
            }
        }
        let before = self.active_len();
        let write = self.active.write_all(buf);
        let wrote = write.is_ok();
        let written = if let Err(e) = write {
            self.cut_back(before);
            Err(e)
        } else {
            self.gauges.batches.fetch_add(1, Ordering::Relaxed);
            let sync = !flushes.is_empty()
                || ((!acks.is_empty() || moved) && self.opts.durability == Durability::Sync);
            if sync {
                self.synced();
                self.active.sync_data()
            } else {
                Ok(())
            }
        };
        self.gauges
            .pending_bytes
            .fetch_sub(admitted, Ordering::Relaxed);
        let seq = self.active_seq;
        if wrote && let Some(seg) = self.live.segs.get_mut(&seq) {
            seg.len += buf.len() as u64;
        }
        for op in ops {
            match op {
                // Written, even if its fsync failed: a refused caller's job
                // is ended by the throttle right after.
                Op::Admit { id, len } if wrote => self.live.admit(id, seq, len),
                // Not written: nothing to track (its end comes, unknown, ignored).
                Op::Admit { .. } => {}
                Op::End { id } if wrote => {
                    self.live.end(id);
                }
                // Its `Admit` is on disk and its `End` is not: try again.
                Op::End { id } if self.live.jobs.contains_key(&id) => {
                    self.unwritten_ends.push(id);
                }
                Op::End { .. } => {}
            }
        }
        self.roll_if_due();
        Answers {
            written: written.err(),
            acks,
            flushes,
        }
    }

    /// A write that failed may have left part of it (a full disk): the
    /// active segment is cut back to `before`, or, if that fails too, closed
    /// (a torn record must not be followed by later ones).
    fn cut_back(&mut self, before: u64) {
        if self.active.set_len(before).is_err() {
            self.roll();
        }
    }

    /// Ends a failed write left ([`unwritten_ends`](Self::unwritten_ends)),
    /// written in a batch of their own, and the space they free given back.
    fn write_pending_ends(&mut self, buf: &mut Vec<u8>) {
        if !self.unwritten_ends.is_empty() && !self.home.is_gone() {
            self.commit(&mut Vec::new(), buf);
            self.reclaim();
            self.publish();
        }
    }

    /// Starts a new segment if the active one is over its size; else, if
    /// one could not be started before, says nothing waits on one any
    /// more (the active segment was cut back, or a new one came back
    /// after a loss).
    fn roll_if_due(&mut self) {
        if self.active_len() >= self.opts.segment_bytes {
            self.roll();
        } else if self.gauges.cannot_roll.swap(false, Ordering::AcqRel) {
            tracing::info!("journal: the active segment is under its size again");
        }
    }

    /// While a new segment could not be started and no batch comes (a
    /// readiness check may have turned the traffic away): tries again.
    fn roll_again(&mut self) {
        if self.gauges.cannot_roll.load(Ordering::Acquire) && !self.home.is_gone() {
            self.roll_if_due();
        }
    }

    /// Closes the active segment and starts the next, unless the
    /// directory is gone.
    fn roll(&mut self) {
        let _ = self.active.sync_data();
        if !self.home.intact(&self.dir, self.active_seq) {
            self.lost();
            self.home.next_check = Instant::now(); // come back after this batch
            return;
        }
        let next = self.active_seq + 1;
        match segments::create(&self.dir, next, &self.key) {
            Ok(file) => {
                self.home.started(&file);
                let old = std::mem::replace(&mut self.active, file);
                self.files.insert(self.active_seq, old);
                self.active_seq = next;
                self.live.started(next);
                if self.gauges.cannot_roll.swap(false, Ordering::AcqRel) {
                    tracing::info!(segment = next, "journal: a new segment started again");
                }
            }
            Err(e) => {
                // One line an episode: each batch tries again.
                if !self.gauges.cannot_roll.swap(true, Ordering::AcqRel) {
                    tracing::error!(error = %e, "journal: cannot start a new segment; writing on in the active one, past its size, until one can be started");
                }
            }
        }
    }

    /// Gives back the oldest segments that no live job needs; an active
    /// segment alone and with nothing live is cut back to empty.
    fn reclaim(&mut self) {
        while let Some((&seq, &seg)) = self.live.segs.first_key_value() {
            if seq == self.active_seq {
                let empty = Seg::EMPTY.len;
                if seg.live == 0 && seg.len > empty && self.active.set_len(empty).is_ok() {
                    // Everything in it ended: a crash before this reaches the
                    // disk leaves records that all end, so nothing is recovered
                    // either way.
                    if let Some(s) = self.live.segs.get_mut(&seq) {
                        s.len = empty;
                    }
                }
                return;
            }
            if seg.live > 0 && !(seg.live_bytes * 2 <= seg.len && self.copy_forward(seq)) {
                return;
            }
            let path = segments::path(&self.dir, seq);
            if let Err(e) = std::fs::remove_file(&path)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(segment = %path.display(), error = %e, "journal: cannot remove a finished segment");
                return;
            }
            self.live.segs.remove(&seq);
            self.files.remove(&seq);
        }
    }

    /// The open file of segment `seq`.
    pub(crate) fn file(&self, seq: u64) -> Option<&File> {
        if seq == self.active_seq {
            Some(&self.active)
        } else {
            self.files.get(&seq)
        }
    }

    /// Segment `seq`'s live records (each job's `Admit`, or its latest
    /// `Retried`), framed afresh (a segment of the first format is read
    /// too), appended to `out`, each with its id and framed length.
    pub(crate) fn live_records(
        &self,
        seq: u64,
        out: &mut Vec<u8>,
    ) -> std::io::Result<Vec<(u64, usize)>> {
        let (Some(file), Some(seg)) = (self.file(seq), self.live.segs.get(&seq)) else {
            return Err(std::io::ErrorKind::NotFound.into());
        };
        let bytes = segments::read(file, seg.len)?;
        let mut moved = Vec::new();
        let found = scan(&bytes, self.opts.max_record_bytes, &self.key);
        let records: Vec<_> = found.iter().flat_map(|f| &f.records).collect();
        // A job retried within the segment has several records here: the
        // last one is its place.
        let mut last = std::collections::HashMap::new();
        for (i, r) in records.iter().enumerate() {
            let holds_job = frame::job_of(r.kind, r.payload).is_some();
            if holds_job && self.live.jobs.get(&r.id).is_some_and(|l| l.seg == seq) {
                last.insert(r.id, i);
            }
        }
        for (i, r) in records.iter().enumerate() {
            if last.get(&r.id) == Some(&i) {
                let len = frame::encode(out, &self.key, r.kind, r.id, r.payload);
                moved.push((r.id, len));
            }
        }
        Ok(moved)
    }

    /// Copies segment `seq`'s live records into the active segment and makes
    /// them durable; `false` if that failed (the segment stays).
    fn copy_forward(&mut self, seq: u64) -> bool {
        let mut out = Vec::new();
        let Ok(moved) = self.live_records(seq, &mut out) else {
            return false;
        };
        let before = self.active_len();
        if self
            .active
            .write_all(&out)
            .and_then(|()| self.active.sync_data())
            .is_err()
        {
            self.cut_back(before);
            return false;
        }
        self.synced();
        let active = self.active_seq;
        if let Some(seg) = self.live.segs.get_mut(&active) {
            seg.len += out.len() as u64;
        }
        for (id, len) in moved {
            self.live.admit(id, active, len);
        }
        true
    }

    /// Counts an `fsync` of records (a commit's is counted as it is made,
    /// compaction's and coming back's once made): in
    /// [`JournalStats::fsyncs`](super::JournalStats::fsyncs) and
    /// `leaky_bucket_journal_syncs_total`.
    pub(crate) fn synced(&self) {
        self.gauges.fsyncs.fetch_add(1, Ordering::Relaxed);
        self.syncs.increment(1);
    }

    pub(crate) fn publish(&self) {
        let g = &self.gauges;
        let disk_bytes = self.live.disk_bytes();
        g.disk_bytes.store(disk_bytes, Ordering::Relaxed);
        g.live.store(self.live.jobs.len() as u64, Ordering::Relaxed);
        g.segments
            .store(self.live.segs.len() as u64, Ordering::Relaxed);
        self.bytes_gauge.set(disk_bytes as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer on `dir`, opened as [`Journal::open`](super::super::Journal::open) does.
    fn writer(dir: &std::path::Path) -> Writer {
        let opts = JournalOptions::default();
        let lock = segments::lock(dir, opts.file_modes, false).unwrap();
        let found = super::super::recovery::recover(dir, opts.max_record_bytes).unwrap();
        let active = segments::create(dir, found.next_seq, &found.key).unwrap();
        let mut live = found.live;
        live.started(found.next_seq);
        Writer {
            dir: dir.to_path_buf(),
            key: found.key,
            opts,
            live,
            home: Home::new(dir, lock, &active),
            active,
            active_seq: found.next_seq,
            files: found.files,
            gauges: Arc::new(Gauges::default()),
            bytes_gauge: metrics::gauge!("dripfeed_test_journal_bytes"),
            syncs: metrics::counter!("dripfeed_test_journal_syncs_total"),
            failed_bytes: 0,
            unwritten_ends: Vec::new(),
        }
    }

    #[test]
    fn an_end_a_full_disk_refused_is_written_once_it_frees() {
        let dir =
            std::env::temp_dir().join(format!("dripfeed-unit-unwritten-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut w = writer(&dir);
        let mut buf = Vec::new();
        let mut admit = Vec::new();
        frame::encode(&mut admit, &w.key, Kind::Admit, 7, b"job");
        let mut cmds = vec![Cmd::Admit {
            id: 7,
            frame: admit,
            ack: None,
        }];
        assert!(w.commit(&mut cmds, &mut buf).written.is_none());

        // The disk fills as the job is delivered: its end cannot be written.
        let seq = w.active_seq;
        w.active = File::options().write(true).open("/dev/full").unwrap();
        let failed = w.commit(&mut vec![Cmd::End { id: 7 }], &mut buf);
        assert!(failed.written.is_some());
        assert!(
            w.live.jobs.contains_key(&7),
            "live until its end is on disk"
        );
        assert_eq!(w.unwritten_ends, [7]);
        if w.active_seq == seq {
            w.roll(); // the disk is free again: a segment that takes writes
        }

        // The next batch, with nothing of its own, writes it.
        assert!(w.commit(&mut Vec::new(), &mut buf).written.is_none());
        assert!(w.unwritten_ends.is_empty());
        assert!(!w.live.jobs.contains_key(&7));
        drop(w);
        let found =
            super::super::recovery::recover(&dir, JournalOptions::default().max_record_bytes)
                .unwrap();
        assert!(found.jobs.is_empty(), "a restart delivers it again");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
