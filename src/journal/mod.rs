//! A durable journal on local disk: admitted jobs survive a crash.
//!
//! With a journal ([`ThrottleBuilder::journal`](crate::ThrottleBuilder::journal)),
//! a throttle records each job before its caller hears "admitted" and
//! records its end (delivered, failed for good, dead-lettered, expired,
//! evicted, refused). When the process starts again on the same directory,
//! the jobs admitted and not ended (queued, in flight, waiting for a retry)
//! are delivered first, each with its original id, so a receiver can
//! deduplicate. A job waiting for a retry goes on from the attempt it had
//! reached ([`Recovered::attempts`]): each scheduled retry is recorded
//! with its count, in a record that takes the place of the admission's.
//!
//! What it promises: a job whose admission was answered survives the
//! process being killed (and, with [`Durability::Sync`], a power cut), and
//! is delivered at least once. What it does not: exactly once (a delivery
//! running at the crash is made again, and so is one that ended while the
//! disk was full: its end is written once the disk takes writes again,
//! within half a second), or surviving the loss of the disk.
//!
//! Durability costs a batch, not a flush per job: one writer thread takes
//! every record waiting, writes them at once and `fsync`s once (group
//! commit). The directory is locked while open: a second process on it is
//! refused.
//!
//! What a damaged disk or a careless operator can do, and what the journal
//! does about it:
//!
//! - **a torn tail** (a crash mid-write): cut at open, logged, everything
//!   before it recovered ([`JournalStats::cut`]);
//! - **a garbled byte** in the middle of a segment: each record starts with
//!   a sync word and carries a checksum over its length and body, so
//!   recovery skips the bad record and keeps every good one after it (a
//!   garbled byte in a segment's header costs nothing: it holds its key
//!   twice). The damaged file is set aside as `NNN.seg.damaged` (never
//!   deleted) and replaced by one holding its good records; what was
//!   skipped is logged and counted ([`JournalStats::skipped`],
//!   `leaky_bucket_journal_skipped_records_total`);
//! - **a record forged inside a job**: a client that sends bytes shaped
//!   like a record (an `End` for someone else's job, say) cannot have it
//!   taken for one when recovery searches past damage, because every
//!   checksum mixes in a 16-byte key the journal draws from the OS for its
//!   directory and keeps in each segment's header. Keep the directory
//!   readable by the service only: whoever reads the files has the key;
//! - **the directory deleted** (or its lock or active segment): noticed
//!   at the next admission (checked before it is answered: none is
//!   answered for a record only an unlinked file holds), within half a
//!   second when idle, or at the next segment roll. Until it is back
//!   every admission is refused (503, `journal_failed`) and
//!   [`Journal::is_healthy`] is `false`; the journal re-creates it, takes
//!   its lock and journals every unfinished job again, `fsync`ed, before it
//!   takes a new one. It keeps the segments that hold unfinished jobs open
//!   for that (at most `max_bytes / segment_bytes` files).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use dripfeed::journal::Journal;
//! use dripfeed::{Delivery, Outcome, Throttle};
//! use std::time::Duration;
//! let dir = std::env::temp_dir().join(format!("dripfeed-doc-journal-{}", std::process::id()));
//! # let _ = std::fs::remove_dir_all(&dir);
//! let (throttle, drain) = Throttle::builder()
//!     .drain_rate(10.0)
//!     .journal(Journal::open(&dir)?)
//!     .build(|_: &String, _| async { Delivery::Done })?;
//! throttle.pause();
//! throttle.submit("hello".to_string()).await?; // answered once fsynced
//! let report = throttle.shutdown(Duration::ZERO).await;
//! assert_eq!(report.stats.outcome(Outcome::Kept), 1);
//! drop(throttle);
//! drain.join().await; // the journal closes with the last user
//!
//! let journal = Journal::open(&dir)?;
//! assert_eq!(journal.recovered(), 1); // the next start finds it
//! # drop(journal);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(())
//! # }
//! ```

mod codec;
mod comeback;
mod error;
pub mod files;
pub(crate) mod frame;
mod home;
pub(crate) mod journaling;
mod key;
mod live;
mod options;
mod recovery;
mod repair;
mod scan;
mod segments;
mod tag;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, mpsc};

use tokio::sync::oneshot;

pub use codec::{DecodeError, JobCodec};
pub use error::JournalError;
pub use options::{Durability, JournalOptions};

use writer::{Cmd, Gauges, Writer};

/// What an admission awaits: its record written as durably as promised.
pub(crate) type Written = oneshot::Receiver<Result<(), std::io::Error>>;

/// A journal directory, open and locked. Cheap to clone: clones share the
/// writer. The writer stops (and the lock is released) when the last clone
/// and every throttle using it are gone.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use dripfeed::journal::Journal;
/// use dripfeed::{Delivery, Throttle};
/// use std::time::Duration;
/// let dir = std::env::temp_dir().join(format!("dripfeed-doc-journal-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// let (throttle, drain) = Throttle::builder()
///     .drain_rate(10.0)
///     .journal(Journal::open(&dir)?)
///     .build(|_: &String, _| async { Delivery::Done })?;
/// throttle.pause();
/// throttle.submit("kept".to_string()).await?; // Ok once it is on disk
/// throttle.shutdown(Duration::ZERO).await; // unfinished: stays in the journal
/// drop((throttle, drain));
///
/// let journal = Journal::open(&dir)?; // the next start finds it
/// assert_eq!(journal.recovered(), 1);
/// # drop(journal);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Journal {
    inner: Arc<Inner>,
}

struct Inner {
    dir: PathBuf,
    /// The directory's key, to frame admissions with (see [`frame`]).
    key: key::Key,
    opts: JournalOptions,
    tx: Option<mpsc::Sender<Cmd>>,
    thread: Option<std::thread::JoinHandle<()>>,
    gauges: Arc<Gauges>,
    recovered: usize,
    cut: u64,
    skipped: u64,
    skipped_bytes: u64,
    jobs: Mutex<Vec<recovery::Found>>,
    /// What each recovered job that had failed before tried, by id, until
    /// the throttle that queues it takes it ([`Journal::tried`]).
    tried: Mutex<std::collections::HashMap<u64, frame::Tried>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A journal's counts, from [`Journal::stats`].
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use dripfeed::journal::{Journal, JournalStats};
/// let dir = std::env::temp_dir().join(format!("dripfeed-doc-stats-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// let journal = Journal::open(&dir)?;
/// let stats: JournalStats = journal.stats();
/// assert_eq!((stats.live, stats.recovered, stats.skipped), (0, 0, 0));
/// assert!(stats.healthy && stats.bytes <= stats.max_bytes);
/// # drop(journal);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct JournalStats {
    /// Bytes in the segment files.
    pub bytes: u64,
    /// The bound on them.
    pub max_bytes: u64,
    /// Segment files.
    pub segments: u64,
    /// Jobs admitted and not ended.
    pub live: u64,
    /// `fsync` calls made.
    pub fsyncs: u64,
    /// Batches written (each one `write`).
    pub batches: u64,
    /// Jobs found unfinished at open.
    pub recovered: usize,
    /// Bytes cut from torn tails at open.
    pub cut: u64,
    /// Records lost in damaged regions of segments at open (at least: a
    /// region whose records cannot be told apart counts as one). Each
    /// damaged segment was set aside as `NNN.seg.damaged`.
    pub skipped: u64,
    /// The bytes of those damaged regions.
    pub skipped_bytes: u64,
    /// Whether the journal is healthy now: `false` while its directory is
    /// gone, its writes fail, or it cannot start a new segment (see
    /// [`Journal::health`]).
    pub healthy: bool,
}

/// Whether a journal can keep its promise now ([`Journal::health`]).
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use dripfeed::journal::{Health, Journal};
/// let dir = std::env::temp_dir().join(format!("dripfeed-doc-health-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// let journal = Journal::open(&dir)?;
/// assert_eq!(journal.health(), Health::Healthy);
/// # drop(journal);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Health {
    /// Admissions are written and made durable.
    Healthy,
    /// Its directory, lock file or active segment is gone: every admission
    /// is refused until it is back.
    Gone,
    /// Its last write or `fsync` failed (a full disk, an I/O error): the
    /// admissions it carried were refused, until a write succeeds.
    WritesFailing,
    /// It cannot start a new segment (its directory takes no new file):
    /// admissions are still written and made durable, in the active
    /// segment, which grows past its size (`max_bytes` still bounds the
    /// journal) until one can be started.
    CannotRoll,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("dir", &self.inner.dir)
            .field("stats", &self.stats())
            .finish()
    }
}

impl Journal {
    /// Opens (or creates) the journal in `dir` with the default options:
    /// fsynced admissions, 16 MiB segments, at most 1 GiB on disk.
    pub fn open(dir: impl AsRef<Path>) -> Result<Journal, JournalError> {
        Journal::open_with(dir.as_ref(), JournalOptions::default())
    }

    /// Options to open a journal with.
    pub fn options() -> JournalOptions {
        JournalOptions::default()
    }

    pub(crate) fn open_with(dir: &Path, mut opts: JournalOptions) -> Result<Journal, JournalError> {
        // Space comes back a segment at a time: keep several under the bound.
        opts.segment_bytes = opts.segment_bytes.min(opts.max_bytes / 4).max(4096);
        let lock = segments::lock(dir, opts.file_modes, false)?;
        // A directory given as a link is followed once, here: made again
        // later (deleted while running), it is its real path, and a link
        // planted there is refused.
        let real = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let dir = real.as_path();
        let found = recovery::recover(dir, opts.max_record_bytes)?;
        let active_seq = found.next_seq;
        let key = found.key;
        let active = segments::create(dir, active_seq, &key)?;
        let mut live = found.live;
        live.started(active_seq);
        let gauges = Arc::new(Gauges::default());
        let recovered = found.jobs.len();
        if recovered > 0 || found.cut > 0 || found.skipped > 0 {
            tracing::info!(dir = %dir.display(), recovered, cut = found.cut, skipped = found.skipped, "journal: recovered unfinished jobs");
        }
        metrics::counter!(crate::accounting::metrics::JOURNAL_SKIPPED).increment(found.skipped);
        let writer = Writer {
            dir: dir.to_path_buf(),
            key: key.clone(),
            opts,
            live,
            home: home::Home::new(dir, lock, &active),
            active,
            active_seq,
            files: found.files,
            gauges: gauges.clone(),
            bytes_gauge: metrics::gauge!(crate::accounting::metrics::JOURNAL_BYTES),
            syncs: metrics::counter!(crate::accounting::metrics::JOURNAL_SYNCS),
            failed_bytes: 0,
            unwritten_ends: Vec::new(),
        };
        let (tx, rx) = mpsc::channel();
        // The first batch publishes the gauges and reclaims what recovery freed.
        let _ = tx.send(Cmd::Flush {
            ack: oneshot::channel().0,
        });
        let thread = std::thread::Builder::new()
            .name("dripfeed-journal".into())
            .spawn(move || writer.run(rx))
            .map_err(|e| JournalError::io("start the writer for", dir, e))?;
        Ok(Journal {
            inner: Arc::new(Inner {
                dir: dir.to_path_buf(),
                key,
                opts,
                tx: Some(tx),
                thread: Some(thread),
                gauges,
                recovered,
                cut: found.cut,
                skipped: found.skipped,
                skipped_bytes: found.skipped_bytes,
                tried: Mutex::new(
                    found
                        .jobs
                        .iter()
                        .filter(|f| f.tried.made > 0)
                        .map(|f| (f.id, f.tried))
                        .collect(),
                ),
                jobs: Mutex::new(found.jobs),
            }),
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// How many unfinished jobs the journal found when it opened.
    pub fn recovered(&self) -> usize {
        self.inner.recovered
    }

    /// The journal's counts now.
    pub fn stats(&self) -> JournalStats {
        let g = &self.inner.gauges;
        JournalStats {
            bytes: g.disk_bytes.load(Ordering::Relaxed),
            max_bytes: self.inner.opts.max_bytes,
            segments: g.segments.load(Ordering::Relaxed),
            live: g.live.load(Ordering::Relaxed),
            fsyncs: g.fsyncs.load(Ordering::Relaxed),
            batches: g.batches.load(Ordering::Relaxed),
            recovered: self.inner.recovered,
            cut: self.inner.cut,
            skipped: self.inner.skipped,
            skipped_bytes: self.inner.skipped_bytes,
            healthy: self.is_healthy(),
        }
    }

    /// Whether the journal can keep its promise now: [`Health::Healthy`]
    /// (see [`health`](Self::health) for the other answers). Report it in
    /// a readiness check.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::journal::Journal;
    /// let dir = std::env::temp_dir().join(format!("dripfeed-doc-healthy-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let journal = Journal::open(&dir)?;
    /// assert!(journal.is_healthy());
    /// assert!(journal.stats().healthy);
    /// # drop(journal);
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_healthy(&self) -> bool {
        self.health() == Health::Healthy
    }

    /// Whether the journal can keep its promise now, and if not why:
    ///
    /// - [`Health::Gone`]: its directory (or its lock file, or its active
    ///   segment) is gone; every admission is refused with
    ///   [`Cause::JournalFailed`](crate::Cause::JournalFailed) until the
    ///   directory is back and every unfinished job is journaled in it
    ///   again;
    /// - [`Health::WritesFailing`]: the last write or `fsync` failed (a
    ///   full disk, an I/O error), and the admissions it carried were
    ///   refused; it turns healthy at the next write that succeeds (an
    ///   admission's, or the writer's own probe every half second, as
    ///   large as the largest batch that failed);
    /// - [`Health::CannotRoll`]: a new segment cannot be started (its
    ///   directory takes no new file); admissions are still kept, in the
    ///   active segment, past its size, until one can.
    ///
    /// One log line marks each episode's start and one its end.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::journal::{Health, Journal};
    /// let dir = std::env::temp_dir().join(format!("dripfeed-doc-health-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let journal = Journal::open(&dir)?;
    /// assert_eq!(journal.health(), Health::Healthy);
    /// # drop(journal);
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn health(&self) -> Health {
        let g = &self.inner.gauges;
        if !g.healthy.load(Ordering::Acquire) {
            Health::Gone
        } else if g.writes_failing.load(Ordering::Acquire) {
            Health::WritesFailing
        } else if g.cannot_roll.load(Ordering::Acquire) {
            Health::CannotRoll
        } else {
            Health::Healthy
        }
    }

    /// Whether the directory is in place (admissions are refused before
    /// they are written while it is not).
    fn in_place(&self) -> bool {
        self.inner.gauges.healthy.load(Ordering::Acquire)
    }

    /// Waits until everything recorded so far is written and `fsync`ed
    /// (at once while the directory is gone: nothing can be).
    pub async fn flush(&self) {
        let (ack, done) = oneshot::channel();
        if self.send(Cmd::Flush { ack }).is_ok() {
            let _ = done.await;
        }
    }

    fn send(&self, cmd: Cmd) -> Result<(), JournalError> {
        match &self.inner.tx {
            Some(tx) => tx.send(cmd).map_err(|_| JournalError::Closed),
            None => Err(JournalError::Closed),
        }
    }

    /// Records that job `id` was admitted with the encoding `encode` writes
    /// (straight into its frame), having made `made` attempts before (a
    /// `Retried` record then, so a restart goes on from them). With a
    /// durability that waits, returns what to await.
    pub(crate) fn admit(
        &self,
        id: u64,
        made: u32,
        encode: impl FnOnce(&mut Vec<u8>),
    ) -> Result<Option<Written>, JournalError> {
        if made == 0 {
            return self.record(frame::Kind::Admit, id, encode, true);
        }
        self.record_tried(id, frame::Tried { made, due_ms: 0 }, encode, true)
    }

    /// Frames and sends a `Retried` record of job `id`: what it `tried`,
    /// then its encoding ([`record`](Self::record)).
    fn record_tried(
        &self,
        id: u64,
        tried: frame::Tried,
        encode: impl FnOnce(&mut Vec<u8>),
        wait: bool,
    ) -> Result<Option<Written>, JournalError> {
        let encode = |out: &mut Vec<u8>| {
            frame::retried(tried, out);
            encode(out);
        };
        self.record(frame::Kind::Retried, id, encode, wait)
    }

    /// Records that job `id` failed attempt `made` and waits for another,
    /// due `after` from now (its encoding written by `encode`), so that a restart
    /// goes on from attempt `made + 1`, at its time: the record takes the
    /// place of its admission's,
    /// made as durable as an admission is before that place moves. Nothing
    /// waits for it; one the journal has no room for is left out (a
    /// restart then counts from the last one written), and so is one for
    /// a job the journal does not hold (submitted unjournaled, or already
    /// ended): the writer writes it only for a live job.
    pub(crate) fn retried(
        &self,
        id: u64,
        made: u32,
        after: std::time::Duration,
        encode: impl FnOnce(&mut Vec<u8>),
    ) {
        let after_ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
        let due_ms = crate::util::clock::unix_ms()
            .saturating_add(after_ms)
            .max(1);
        let tried = frame::Tried { made, due_ms };
        if let Err(e) = self.record_tried(id, tried, encode, false) {
            tracing::debug!(id, made, error = %e, "journal: a retry's attempt count was not recorded");
        }
    }

    /// What recovered job `id` had tried before this start: the attempts
    /// it made and when its next was due (none when nothing was
    /// recorded), taken once.
    pub(crate) fn tried(&self, id: u64) -> frame::Tried {
        let mut tried = self.inner.tried.lock().unwrap_or_else(|p| p.into_inner());
        if tried.is_empty() {
            return frame::Tried::default();
        }
        tried.remove(&id).unwrap_or_default()
    }

    /// Frames and sends one job-holding record (`wait`: the caller may
    /// wait for it, as the journal's durability says).
    fn record(
        &self,
        kind: frame::Kind,
        id: u64,
        encode: impl FnOnce(&mut Vec<u8>),
        wait: bool,
    ) -> Result<Option<Written>, JournalError> {
        let mut framed = Vec::new();
        let len = frame::encode_with(&mut framed, &self.inner.key, kind, id, encode);
        let max = self.inner.opts.max_record_bytes;
        let payload = len - frame::OVERHEAD;
        // A retry's count is not the job's: the job fits as it did.
        let counted = match kind {
            frame::Kind::Retried => payload.saturating_sub(frame::RETRY_HEAD),
            _ => payload,
        };
        if counted > max {
            return Err(JournalError::TooLarge { len: payload, max });
        }
        if !self.in_place() {
            return Err(self.gone());
        }
        let len = len as u64;
        let g = &self.inner.gauges;
        let bytes = g.disk_bytes.load(Ordering::Relaxed)
            + g.pending_bytes.fetch_add(len, Ordering::Relaxed)
            + len;
        if bytes > self.inner.opts.max_bytes {
            g.pending_bytes.fetch_sub(len, Ordering::Relaxed);
            return Err(JournalError::Full {
                bytes,
                max_bytes: self.inner.opts.max_bytes,
            });
        }
        let (ack, done) = match self.inner.opts.durability {
            _ if !wait => (None, None),
            Durability::Queued => (None, None),
            _ => {
                let (ack, done) = oneshot::channel();
                (Some(ack), Some(done))
            }
        };
        let cmd = match kind {
            // A retry's count moves a live job's place; an admission's
            // (`wait`) makes the job live.
            frame::Kind::Retried if !wait => Cmd::Retried { id, frame: framed },
            _ => Cmd::Admit {
                id,
                frame: framed,
                ack,
            },
        };
        if let Err(e) = self.send(cmd) {
            g.pending_bytes.fetch_sub(len, Ordering::Relaxed);
            return Err(e);
        }
        Ok(done)
    }

    /// Waits for an admission's record.
    pub(crate) async fn admitted(&self, wait: Option<Written>) -> Result<(), JournalError> {
        match wait {
            None => Ok(()),
            Some(done) => match done.await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(_)) if !self.in_place() => Err(self.gone()),
                Ok(Err(e)) => Err(JournalError::io("write", &self.inner.dir, e)),
                Err(_) => Err(JournalError::Closed),
            },
        }
    }

    fn gone(&self) -> JournalError {
        JournalError::DirectoryGone {
            dir: self.inner.dir.clone(),
        }
    }

    /// Records that job `id` ended.
    pub(crate) fn end(&self, id: u64) {
        let _ = self.send(Cmd::End { id });
    }

    /// Takes the unfinished jobs found at open (once), each with its id and
    /// the tag its record names, if any. A throttle given the journal with
    /// [`ThrottleBuilder::journal`](crate::ThrottleBuilder::journal) takes
    /// them itself; code that shares one journal between throttles
    /// ([`ThrottleBuilder::shared_journal`](crate::ThrottleBuilder::shared_journal))
    /// takes them here, decodes each ([`JobCodec::decode`]) and hands every
    /// throttle the jobs of its tag.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::journal::Journal;
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let dir = std::env::temp_dir().join(format!("dripfeed-doc-tagged-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let journal = Journal::open(&dir)?;
    /// let (a, da) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .shared_journal(journal.clone(), "a", Vec::new())
    ///     .build(|_: &String, _| async { Delivery::Done })?;
    /// a.pause();
    /// let first = a.submit("for a".to_string()).await?;
    /// a.shutdown(Duration::ZERO).await; // kept in the journal
    /// journal.flush().await; // a shared journal is flushed by its owner
    /// drop((a, da, journal));
    ///
    /// let journal = Journal::open(&dir)?;
    /// let found = journal.take_recovered();
    /// assert_eq!(found.len(), 1);
    /// assert_eq!((found[0].id, found[0].tag.as_deref()), (first.id(), Some("a")));
    /// assert_eq!(found[0].job, b"for a");
    /// # drop(journal);
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn take_recovered(&self) -> Vec<Recovered> {
        let records =
            std::mem::take(&mut *self.inner.jobs.lock().unwrap_or_else(|p| p.into_inner()));
        records
            .into_iter()
            .map(|f| {
                let retry_at = (f.tried.due_ms > 0)
                    .then(|| {
                        let ms = std::time::Duration::from_millis(f.tried.due_ms);
                        std::time::UNIX_EPOCH.checked_add(ms)
                    })
                    .flatten();
                let (tag, job) = match tag::split(&f.record) {
                    Some((tag, job)) => (Some(tag.to_owned()), job.to_vec()),
                    None => (None, f.record),
                };
                Recovered {
                    id: f.id,
                    tag,
                    job,
                    attempts: f.tried.made,
                    retry_at,
                }
            })
            .collect()
    }

    /// Ends a recovered job that will not be delivered (it no longer
    /// decodes, say): its record is dropped at the next compaction. Only
    /// for ids from [`take_recovered`](Self::take_recovered); a throttle
    /// ends its own jobs.
    pub fn discard(&self, id: u64) {
        self.end(id);
    }
}

/// A job an earlier run left unfinished, from [`Journal::take_recovered`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use dripfeed::journal::{Journal, Recovered};
/// use dripfeed::{Delivery, Throttle};
/// use std::time::Duration;
/// let dir = std::env::temp_dir().join(format!("dripfeed-doc-recovered-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// let journal = Journal::open(&dir)?;
/// let (throttle, drain) = Throttle::builder()
///     .drain_rate(10.0)
///     .shared_journal(journal.clone(), "billing", Vec::new())
///     .build(|_: &String, _| async { Delivery::Done })?;
/// throttle.pause();
/// let admitted = throttle.submit("invoice 7".to_string()).await?;
/// throttle.shutdown(Duration::ZERO).await;
/// journal.flush().await;
/// drop((throttle, drain, journal));
///
/// let found: Vec<Recovered> = Journal::open(&dir)?.take_recovered();
/// assert_eq!((found[0].id, found[0].tag.as_deref()), (admitted.id(), Some("billing")));
/// assert_eq!((found[0].attempts, found[0].retry_at), (0, None), "never tried");
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Recovered {
    /// The id it was admitted under (its [`Attempt::id`](crate::Attempt::id)).
    pub id: u64,
    /// The tag its record names, when the journal is shared
    /// ([`ThrottleBuilder::shared_journal`](crate::ThrottleBuilder::shared_journal)).
    pub tag: Option<String>,
    /// The job's encoding ([`JobCodec::encode`]).
    pub job: Vec<u8>,
    /// The delivery attempts it had made (0 if none failed before the
    /// restart): a throttle given it goes on from the next
    /// ([`Attempt::number`](crate::Attempt::number)), or, when its
    /// [`RetryPolicy`](crate::RetryPolicy) allows fewer attempts than
    /// that, makes one last attempt numbered as the policy's last.
    pub attempts: u32,
    /// When its next attempt was due (`None`: at once, none was
    /// scheduled): a throttle given it waits until then (at most its
    /// policy's longest backoff from its start; 30 s for a throttle
    /// without a retry policy), so a receiver's `Retry-After` holds across
    /// a restart.
    pub retry_at: Option<std::time::SystemTime>,
}
