//! The writer: a thread of its own (file writes and syncs block) that takes
//! dead letters from a channel, holds each line until it is written and
//! synced, and answers flushes with what is still held.
//!
//! A line that cannot be written stays held (its job with it, so its bytes
//! stay counted against the byte budget, and with a journal the webhook
//! stays there too): the health says so (intake answers 503), the failure
//! is counted and logged once per episode, and the writer tries again after
//! a backoff (250 ms doubling to 5 s) or at the next flush. Once a write
//! works, the held lines are written in order and intake accepts again.
//! While all is well it looks at the path once a second, so a deleted file
//! comes back (or a directory that cannot hold one turns intake to 503)
//! even when no webhook fails.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::error::WriteError;
use super::files::Files;
use super::health::Health;
use super::line;
use crate::domain::job::Job;
use crate::telemetry::{DEAD_LETTER_LINES, DEAD_LETTER_WRITE_FAILURES};

const RETRY_MIN: Duration = Duration::from_millis(250);
const RETRY_MAX: Duration = Duration::from_secs(5);
/// How often the path is looked at while all is well.
const CHECK_EVERY: Duration = Duration::from_secs(1);
/// Messages taken into one batch.
const BATCH: usize = 4096;

/// What the writer is sent.
pub(super) enum Msg {
    /// A dead letter, with its reason.
    Letter(Job, &'static str),
    /// A flush: answered once what came before is written, or cannot be.
    Flush(oneshot::Sender<Flushed>),
}

/// What a flush found.
#[derive(Debug, Clone, Default)]
pub struct Flushed {
    /// Lines written since the relay started.
    pub written: u64,
    /// Lines held, not written yet (with a journal their webhooks are
    /// still there).
    pub held: usize,
    /// Why they are held.
    pub error: Option<String>,
}

/// A line not written yet, and its job (holding its bytes).
struct Held {
    line: Vec<u8>,
    job: Job,
}

impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        &self.line
    }
}

/// The writer's state.
pub(super) struct Writer {
    files: Files,
    health: Arc<Health>,
    /// The destination named for a webhook that never learnt one.
    fallback: Arc<str>,
    held: VecDeque<Held>,
    written: u64,
    backoff: Duration,
    /// While failing: when to try again.
    retry_at: Option<Instant>,
    last_error: Option<String>,
    failures: u64,
}

impl Writer {
    /// A writer over `files`, reporting to `health`.
    pub(super) fn new(files: Files, health: Arc<Health>, fallback: Arc<str>) -> Writer {
        metrics::describe_gauge!(
            DEAD_LETTER_LINES,
            "Lines in the dead-letter files the relay keeps (the live file and its rotated ones)."
        );
        metrics::describe_counter!(
            DEAD_LETTER_WRITE_FAILURES,
            "Attempts to write dead-letter lines that failed (io: the disk refused; full: every file is full)."
        );
        for reason in ["io", "full"] {
            metrics::counter!(DEAD_LETTER_WRITE_FAILURES, "reason" => reason).increment(0);
        }
        metrics::gauge!(DEAD_LETTER_LINES).set(files.lines() as f64);
        Writer {
            files,
            health,
            fallback,
            held: VecDeque::new(),
            written: 0,
            backoff: RETRY_MIN,
            retry_at: None,
            last_error: None,
            failures: 0,
        }
    }

    /// Runs until every sender is gone.
    pub(super) fn run(mut self, rx: Receiver<Msg>) {
        let mut next_check = Instant::now() + CHECK_EVERY;
        loop {
            let wake = self.retry_at.map_or(next_check, |r| r.min(next_check));
            let mut flushes = Vec::new();
            let mut gone = false;
            match rx.recv_timeout(wake.saturating_duration_since(Instant::now())) {
                Ok(msg) => self.take(msg, &mut flushes),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => gone = true,
            }
            for _ in 0..BATCH {
                match rx.try_recv() {
                    Ok(msg) => self.take(msg, &mut flushes),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        gone = true;
                        break;
                    }
                }
            }
            let now = Instant::now();
            let due = self.retry_at.is_none_or(|at| now >= at);
            let failing = self.retry_at.is_some();
            let look = !failing && now >= next_check;
            if !flushes.is_empty() || gone || look || (due && (failing || !self.held.is_empty())) {
                self.attempt();
            }
            if now >= next_check {
                next_check = now + CHECK_EVERY;
            }
            for done in flushes {
                let _ = done.send(self.flushed());
            }
            if gone {
                if !self.held.is_empty() {
                    tracing::error!(
                        lines = self.held.len(),
                        "dead-letter lines not written before exit (with a journal, their webhooks stay there for the next start)"
                    );
                }
                return;
            }
        }
    }

    fn take(&mut self, msg: Msg, flushes: &mut Vec<oneshot::Sender<Flushed>>) {
        match msg {
            Msg::Flush(done) => flushes.push(done),
            Msg::Letter(job, reason) => match line::encode(&job, reason, &self.fallback) {
                Ok(line) => self.held.push_back(Held { line, job }),
                Err(e) => {
                    tracing::error!(error = %e, id = job.trail.id(), "a dead letter does not encode as JSON: dropped");
                }
            },
        }
    }

    /// Writes what is held (or, with nothing held, looks at the path) and
    /// settles the health.
    fn attempt(&mut self) {
        let result = if self.held.is_empty() {
            self.files.check().and_then(|()| match self.retry_at {
                // Failing: a full set may have room again.
                Some(_) => self.files.scan(),
                None => Ok(()),
            })
        } else {
            // An event's copy is ended in its store before its letter is
            // written (see `EventStore::durable_blocking`).
            if let Some(copy) = self.held.iter().find_map(|h| h.job.event.as_ref())
                && let Err(e) = copy.store.durable()
            {
                // Written all the same: the letter is the copy's only
                // record the store may not have (a restart may send it
                // again as well).
                tracing::error!(error = %e, "an event copy's end may not be in the events store before its dead letter is written");
            }
            let (n, result) = self.files.append(self.held.make_contiguous());
            for written in self.held.drain(..n) {
                // Written (and fsynced): the store no longer awaits it.
                if let Some(copy) = &written.job.event {
                    copy.lettered();
                }
            }
            self.written += n as u64;
            result
        };
        metrics::gauge!(DEAD_LETTER_LINES).set(self.files.lines() as f64);
        match result {
            Ok(()) => self.recovered(),
            Err(e) => self.failed(&e),
        }
    }

    fn recovered(&mut self) {
        if self.retry_at.take().is_some() {
            tracing::info!(
                file = %self.files.path().display(),
                failed_attempts = self.failures,
                "dead-letter file writable again: held lines written, intake accepts webhooks again"
            );
        }
        self.backoff = RETRY_MIN;
        self.failures = 0;
        self.last_error = None;
        self.health.writable();
    }

    fn failed(&mut self, e: &WriteError) {
        metrics::counter!(DEAD_LETTER_WRITE_FAILURES, "reason" => e.reason()).increment(1);
        let at = Instant::now() + self.backoff;
        let message = e.to_string();
        if self.last_error.as_deref() != Some(message.as_str()) {
            tracing::error!(
                error = %message,
                held = self.held.len(),
                retry_in = ?self.backoff,
                "dead-letter lines cannot be written: they stay held (and in the journal); intake answers 503 until they are written"
            );
        }
        self.last_error = Some(message);
        self.failures += 1;
        self.retry_at = Some(at);
        self.health
            .failing(matches!(e, WriteError::Full { .. }), at);
        self.backoff = (self.backoff * 2).min(RETRY_MAX);
    }

    fn flushed(&self) -> Flushed {
        Flushed {
            written: self.written,
            held: self.held.len(),
            error: match self.held.is_empty() {
                true => None,
                false => Some(
                    self.last_error
                        .clone()
                        .unwrap_or_else(|| "not tried yet".into()),
                ),
            },
        }
    }
}
