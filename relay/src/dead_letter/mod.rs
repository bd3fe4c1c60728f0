//! The dead-letter file: one JSON line per webhook that could not be
//! delivered (overflow under `--overflow dead-letter`, evicted by
//! head-drop, failed, expired, or left at shutdown), written by a thread of
//! its own. Each line names the webhook's id (absent if it was never
//! tried), its destination, its attempts and the receiver's last status,
//! and `--redrive` reads the lines back.
//!
//! A line counts as written once it is synced to disk; only then does the
//! sink's flush say `Ok`, and only then does the journal end the webhook's
//! record. A line that cannot be written (a full disk, a permission, a
//! file that cannot be made again, every rotated file full) stays held and
//! is written later; meanwhile intake answers 503 ([`Health`]). The parts:
//! `line` (the JSON), `files` (the live file at its path, rotation),
//! `rotated` (the rotated files' names), `writer` (the thread), `health`
//! (what intake reads), `error`, and `redrive`.
//!
//! Offers never block: dead letters go through an unbounded channel, whose
//! memory is bounded by the byte budget (each job holds its bytes until its
//! line is written).

pub(crate) mod error;
mod files;
pub(crate) mod health;
mod line;
pub(crate) mod marks;
pub(crate) mod page;
pub(crate) mod redrive;
mod rotated;
mod writer;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc;

use dripfeed::{DeadLetterReason, DeadLetterSink, FlushError};
use tokio::sync::oneshot;

use crate::domain::job::Job;
pub(crate) use error::WriteError;
use files::Files;
pub(crate) use health::Health;
pub(crate) use writer::Flushed;
use writer::{Msg, Writer};

/// The dead-letter file's writer.
pub struct FileSink {
    tx: mpsc::Sender<Msg>,
    health: Arc<Health>,
    /// Destinations being deleted, with the reason their leftovers get
    /// in place of `shutdown` (what the throttle's end calls them).
    retiring: std::sync::Mutex<std::collections::HashMap<Arc<str>, &'static str>>,
}

/// Where dead letters go, and how much each file holds.
pub struct Options {
    /// The live file.
    pub path: PathBuf,
    /// The destination named for a webhook that never learnt one
    /// (recovered from the journal and never tried).
    pub fallback: String,
    /// The most bytes one file holds.
    pub max_bytes: u64,
    /// Files kept: the live one and the rotated ones.
    pub keep: u32,
}

impl FileSink {
    /// Opens (appends to) the live file and starts the writer.
    pub fn open(options: Options) -> Result<Self, WriteError> {
        let files = Files::open(options.path.clone(), options.max_bytes, options.keep)?;
        let health = Arc::new(Health::default());
        let writer = Writer::new(files, health.clone(), options.fallback.into());
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("dead-letter".into())
            .spawn(move || writer.run(rx))
            .map_err(|e| WriteError::io(&options.path, e))?;
        Ok(FileSink {
            tx,
            health,
            retiring: std::sync::Mutex::default(),
        })
    }

    /// Whether the file takes lines (intake reads it).
    pub fn health(&self) -> Arc<Health> {
        self.health.clone()
    }

    /// From now until [`FileSink::retired`], what destination `name`'s
    /// throttle dead-letters at its end (`shutdown`) is written with
    /// `reason` (`destination-deleted`, `application-deleted`).
    pub fn retiring(&self, name: &Arc<str>, reason: &'static str) {
        if let Ok(mut r) = self.retiring.lock() {
            r.insert(name.clone(), reason);
        }
    }

    /// `name` is gone: its reason is no longer needed.
    pub fn retired(&self, name: &str) {
        if let Ok(mut r) = self.retiring.lock() {
            r.remove(name);
        }
    }

    /// The reason a letter gets: `why`, or its destination's retiring
    /// reason in place of a throttle's `shutdown`.
    fn reason(&self, job: &Job, why: DeadLetterReason) -> &'static str {
        if why == DeadLetterReason::Shutdown
            && let Some(d) = &job.destination
            && let Ok(r) = self.retiring.lock()
            && let Some(reason) = r.get(d)
        {
            return reason;
        }
        why.as_str()
    }

    /// Queues `job` for the file with a free-form reason (e.g. "evicted").
    // The job comes back whole (it is refused only when the writer is gone).
    #[allow(clippy::result_large_err)]
    pub fn offer(&self, job: Job, reason: &'static str) -> Result<(), Job> {
        // An event's copy: the events store learns where it is.
        if let Some(copy) = &job.event {
            copy.dead_lettered(reason);
        }
        match self.tx.send(Msg::Letter(job, reason)) {
            Ok(()) => Ok(()),
            Err(mpsc::SendError(Msg::Letter(job, _))) => Err(job),
            // What was sent comes back: a letter, never a flush.
            Err(mpsc::SendError(Msg::Flush(_))) => Ok(()),
        }
    }

    /// Waits until everything offered is written, or cannot be for now.
    pub async fn flushed(&self) -> Flushed {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Msg::Flush(done)).is_err() {
            return Flushed {
                error: Some("the dead-letter writer is gone".into()),
                ..Flushed::default()
            };
        }
        wait.await.unwrap_or_else(|_| Flushed {
            error: Some("the dead-letter writer is gone".into()),
            ..Flushed::default()
        })
    }

    /// Waits as [`flushed`](Self::flushed) does; the lines written so far.
    pub async fn written(&self) -> u64 {
        self.flushed().await.written
    }
}

#[async_trait::async_trait]
impl DeadLetterSink<Job> for Arc<FileSink> {
    fn try_offer(&self, job: Job, why: DeadLetterReason) -> Result<(), Job> {
        let reason = self.reason(&job, why);
        self.offer(job, reason)
    }

    /// A webhook deferred by `--overflow dead-letter` is named here, as
    /// intake names it just after (the id its 202 gives; a redriven one
    /// keeps its own), so its line carries that id.
    fn try_offer_admitted(&self, id: u64, job: Job, why: DeadLetterReason) -> Result<(), Job> {
        job.trail.name(id);
        let reason = self.reason(&job, why);
        self.offer(job, reason)
    }

    async fn flush(&self) -> Result<(), FlushError> {
        let done = self.flushed().await;
        match (done.held, done.error) {
            (0, None) => Ok(()),
            (held, error) => Err(FlushError::new(format!(
                "{held} dead-letter lines not written: {}",
                error.unwrap_or_else(|| "unknown error".into())
            ))),
        }
    }
}
