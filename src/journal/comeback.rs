//! The writer when its directory goes: noticing it is gone, refusing while
//! it is, and journaling the unfinished jobs again when it is back.
//!
//! A deleted directory does not stop writes: the files stay open and
//! `write` and `fsync` succeed on them, while nothing is left to recover
//! after a crash and the lock went with the directory. So the writer
//! checks that the directory, its lock file and the active segment are
//! still the files it opened (device and inode), before each roll, before
//! it answers a batch's admissions, and at most every [`CHECK_EVERY`]
//! between batches. While they are not:
//!
//! - every admission is refused (`JournalError::DirectoryGone`, a 503 with
//!   `journal_failed`), and [`Journal::is_healthy`](super::Journal::is_healthy)
//!   says so; ends are still followed in memory;
//! - every [`CHECK_EVERY`] the writer re-creates the directory, takes its
//!   lock, starts a fresh segment and writes into it every unfinished job's
//!   `Admit` record, read back through the segments it kept open, `fsync`ed
//!   before any new admission is taken. Until that works (no permission, a
//!   file in the way, another process's lock), it keeps refusing and tries
//!   again.

use std::fs::{self, File};
use std::io::Write;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::JournalError;
use super::home::{CHECK_EVERY, FileId, Gone, Home};
use super::live::{LiveSet, Seg};
use super::segments;
use super::writer::{Cmd, Writer};

impl Writer {
    /// Checks the directory; when it is gone (now or already), tries to
    /// come back.
    pub(crate) fn watch(&mut self) {
        self.home.next_check = Instant::now() + CHECK_EVERY;
        if !self.home.is_gone() {
            if self.home.intact(&self.dir, self.active_seq) {
                self.probe();
                return;
            }
            self.lost();
        }
        match self.come_back() {
            Ok(jobs) => {
                self.home.gone = None;
                self.publish();
                self.gauges.healthy.store(true, Ordering::Release);
                tracing::warn!(dir = %self.dir.display(), jobs, "journal: the directory is back; unfinished jobs journaled again, admissions resume");
            }
            Err(e) => {
                if let Some(gone) = &mut self.home.gone {
                    if !gone.told {
                        tracing::error!(dir = %self.dir.display(), error = %e, "journal: cannot use the directory again yet; retrying");
                        gone.told = true;
                    } else {
                        tracing::debug!(dir = %self.dir.display(), error = %e, "journal: still cannot use the directory");
                    }
                }
            }
        }
    }

    /// The directory is gone: refuse until it is back.
    pub(crate) fn lost(&mut self) {
        if self.home.is_gone() {
            return;
        }
        self.gauges.healthy.store(false, Ordering::Release);
        self.home.gone = Some(Gone::default());
        // Ends a failed write left have nothing to be written into now: the
        // jobs ended, and coming back journals only what is live.
        for id in std::mem::take(&mut self.unwritten_ends) {
            self.live.end(id);
        }
        tracing::error!(dir = %self.dir.display(), live = self.live.jobs.len(), "journal: the directory, its lock or its active segment is gone; refusing jobs until it is back");
    }

    /// A batch while the directory is gone: admissions refused, ends
    /// followed, flushes answered (nothing can be made durable).
    pub(crate) fn refuse(&mut self, cmds: &mut Vec<Cmd>) {
        let Some(gone) = &mut self.home.gone else {
            return;
        };
        for cmd in cmds.drain(..) {
            match cmd {
                Cmd::Admit { id, frame, ack } => {
                    let len = frame.len() as u64;
                    self.gauges.pending_bytes.fetch_sub(len, Ordering::Relaxed);
                    match ack {
                        Some(ack) => {
                            let e = std::io::Error::new(
                                std::io::ErrorKind::NotFound,
                                "the journal directory is gone",
                            );
                            let _ = ack.send(Err(e));
                        }
                        None => gone.held.push((id, frame)),
                    }
                }
                // Left out while the directory is gone: the job's record
                // is journaled again from where it was (an earlier count).
                Cmd::Retried { frame, .. } => {
                    let len = frame.len() as u64;
                    self.gauges.pending_bytes.fetch_sub(len, Ordering::Relaxed);
                }
                Cmd::End { id } => {
                    self.live.end(id);
                    gone.held.retain(|(held, _)| *held != id);
                }
                Cmd::Flush { ack } => {
                    let _ = ack.send(());
                }
            }
        }
    }

    /// Locks the directory again (re-creating it), starts a fresh segment
    /// and writes every unfinished job's record into it, `fsync`ed; then
    /// the old segments are let go. Returns how many jobs were written.
    fn come_back(&mut self) -> Result<usize, JournalError> {
        let lock = segments::lock(&self.dir, self.opts.file_modes, true)?;
        let newest = segments::list(&self.dir)?.last().map_or(0, |(seq, _)| *seq);
        let seq = self.active_seq.max(newest) + 1;
        // The key stays: records framed before the loss are written as they are.
        let mut active = segments::create(&self.dir, seq, &self.key)?;
        let path = segments::path(&self.dir, seq);
        let (moved, len) = match self.write_live(&mut active) {
            Ok(done) => done,
            Err(e) => {
                drop(active);
                let _ = fs::remove_file(&path);
                return Err(JournalError::io("write", path, e));
            }
        };
        // Old segments still linked here (only the lock was removed, say)
        // now hold nothing the new one does not: let them go.
        for &old in self.live.segs.keys() {
            let at = segments::path(&self.dir, old);
            let ours = self.file(old).and_then(FileId::open);
            if ours.is_some() && FileId::at(&at) == ours {
                let _ = fs::remove_file(&at);
            }
        }
        segments::sync_dir(&self.dir);
        let mut live = LiveSet::default();
        live.started(seq);
        for &(id, framed) in &moved {
            live.admit(id, seq, framed);
        }
        if let Some(s) = live.segs.get_mut(&seq) {
            s.len = len;
        }
        let lost = self
            .live
            .jobs
            .keys()
            .filter(|id| !live.jobs.contains_key(id))
            .count();
        if lost > 0 {
            tracing::error!(dir = %self.dir.display(), jobs = lost, "journal: unfinished jobs whose records could not be read back are no longer journaled");
        }
        self.home = Home::new(&self.dir, lock, &active);
        self.live = live;
        self.files.clear();
        self.active = active;
        self.active_seq = seq;
        self.synced();
        Ok(moved.len())
    }

    /// Writes every live `Admit` record (and those held while gone) into
    /// `active` and `fsync`s it; returns each job's id and framed length,
    /// and the segment's length.
    fn write_live(&self, active: &mut File) -> std::io::Result<(Vec<(u64, usize)>, u64)> {
        let mut moved = Vec::new();
        let mut len = Seg::EMPTY.len;
        let mut buf = Vec::new();
        for (&seq, _) in self.live.segs.iter().filter(|(_, s)| s.live > 0) {
            buf.clear();
            moved.extend(self.live_records(seq, &mut buf)?);
            active.write_all(&buf)?;
            len += buf.len() as u64;
        }
        for (id, framed) in self.home.gone.iter().flat_map(|g| &g.held) {
            active.write_all(framed)?;
            len += framed.len() as u64;
            moved.push((*id, framed.len()));
        }
        active.sync_data()?;
        Ok((moved, len))
    }

    /// The writer is stopping: say so if the directory is gone with jobs in it.
    pub(crate) fn closing(&self) {
        if self.home.is_gone() && !self.live.jobs.is_empty() {
            tracing::error!(dir = %self.dir.display(), jobs = self.live.jobs.len(), "journal: closing while the directory is gone; its unfinished jobs are on no disk");
        }
    }
}
