//! The dead-letter file: one JSON line per job that could not be delivered
//! (overflow under `--overflow dead-letter`, evicted by head-drop, failed,
//! expired, or left at shutdown), written by a background task. Each line
//! names the webhook's id (absent if it was never tried), its destination,
//! its attempts and the receiver's last status, and `--redrive` reads the
//! lines back.
//!
//! Offers never block: jobs go through an unbounded channel, whose memory is
//! bounded by the byte budget (each job still holds its ticket until written).

pub mod redrive;

use std::path::PathBuf;
use std::sync::Arc;

use base64::Engine;
use dripfeed::{DeadLetterReason, DeadLetterSink};
use serde::Serialize;
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot};

use crate::intake::job::Job;

/// The dead-letter file's writer.
pub struct FileSink {
    letters: mpsc::UnboundedSender<(Job, &'static str)>,
    flushes: mpsc::UnboundedSender<oneshot::Sender<u64>>,
}

/// One dead-letter line.
#[derive(Serialize)]
struct Line<'a> {
    reason: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    destination: &'a str,
    attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_status: Option<u32>,
    tenant: Option<&'a str>,
    content_type: Option<&'a str>,
    received_unix_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    body_base64: Option<String>,
}

impl FileSink {
    /// Opens (appends to) `path` and starts the writer task; `destination`
    /// names the destination of a webhook that never learnt one (recovered
    /// from the journal and never tried).
    pub async fn open(path: PathBuf, destination: String) -> std::io::Result<Self> {
        let destination: Arc<str> = destination.into();
        let mut file = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .await?;
        let (letters, mut letters_rx) = mpsc::unbounded_channel::<(Job, &'static str)>();
        let (flushes, mut flushes_rx) = mpsc::unbounded_channel::<oneshot::Sender<u64>>();
        tokio::spawn(async move {
            let mut written = 0u64;
            let mut buf = Vec::with_capacity(64 * 1024);
            loop {
                let letter = tokio::select! {
                    biased;
                    letter = letters_rx.recv() => letter,
                    flush = flushes_rx.recv() => {
                        let Some(done) = flush else { break };
                        // Everything offered before the flush is already in the channel.
                        while let Ok((job, reason)) = letters_rx.try_recv() {
                            written += encode(&mut buf, &job, reason, &destination);
                        }
                        write_out(&mut file, &mut buf, &path).await;
                        let _ = file.sync_data().await;
                        let _ = done.send(written);
                        continue;
                    }
                };
                let Some((job, reason)) = letter else { break };
                written += encode(&mut buf, &job, reason, &destination);
                if buf.len() > 48 * 1024 || letters_rx.is_empty() {
                    write_out(&mut file, &mut buf, &path).await;
                }
            }
            write_out(&mut file, &mut buf, &path).await;
        });
        Ok(FileSink { letters, flushes })
    }

    /// Queues `job` for the file with a free-form reason (e.g. "evicted").
    // The job comes back whole (it is refused only when the writer is gone).
    #[allow(clippy::result_large_err)]
    pub fn offer(&self, job: Job, reason: &'static str) -> Result<(), Job> {
        self.letters.send((job, reason)).map_err(|e| e.0.0)
    }

    /// Waits until everything offered is written; returns the lines written so far.
    pub async fn written(&self) -> u64 {
        let (done, wait) = oneshot::channel();
        if self.flushes.send(done).is_err() {
            return 0;
        }
        wait.await.unwrap_or(0)
    }
}

/// Appends one JSON line for `job` to `buf`; 1 if it was encoded.
fn encode(buf: &mut Vec<u8>, job: &Job, reason: &str, destination: &str) -> u64 {
    let text = std::str::from_utf8(&job.body).ok();
    let attempts = job.trail.attempts();
    let line = Line {
        reason,
        id: match job.trail.id() {
            0 => None,
            id => Some(id.to_string()),
        },
        destination: job.destination_name().unwrap_or(destination),
        attempts,
        last_status: (attempts > 0).then(|| job.trail.last_status()),
        tenant: job.tenant.as_deref(),
        content_type: job.content_type.as_deref(),
        received_unix_ms: job.received_unix_ms,
        body: text,
        body_base64: text
            .is_none()
            .then(|| base64::engine::general_purpose::STANDARD.encode(&job.body)),
    };
    match serde_json::to_writer(&mut *buf, &line) {
        Ok(()) => {
            buf.push(b'\n');
            1
        }
        Err(_) => 0,
    }
}

async fn write_out(file: &mut tokio::fs::File, buf: &mut Vec<u8>, path: &std::path::Path) {
    if buf.is_empty() {
        return;
    }
    if let Err(e) = file.write_all(buf).await {
        tracing::error!(file = %path.display(), error = %e, "dead-letter file: lines lost");
    }
    buf.clear();
}

#[async_trait::async_trait]
impl DeadLetterSink<Job> for std::sync::Arc<FileSink> {
    fn try_offer(&self, job: Job, why: DeadLetterReason) -> Result<(), Job> {
        self.offer(job, why.as_str())
    }

    async fn flush(&self) -> Result<(), dripfeed::FlushError> {
        self.written().await;
        Ok(())
    }
}
