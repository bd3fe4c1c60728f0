//! Stopping: on SIGINT or SIGTERM the set stops admitting (intake answers
//! 503 `closed` while the listener still serves), every destination drains
//! for `shutdown_grace`, what remains stays in the journal (or, without
//! one, goes to the dead-letter file), the dead-letter file is flushed and
//! synced, and only then does the listener close. A second signal while
//! draining exits at once (code 130); the journal keeps every 202.

use std::time::Duration;

use dripfeed::destinations::Destinations;

use crate::dead_letter::FileSink;
use crate::domain::job::Job;

/// Waits for Ctrl-C or SIGTERM.
pub async fn signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            let _ = ctrl_c.await;
            return;
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

/// What a drain did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Drained {
    /// Webhooks delivered over the relay's life.
    pub delivered: u64,
    /// Left in the journal for the next start.
    pub kept: u64,
    /// Dead-letter lines written in this run.
    pub dead_letter_lines: u64,
    /// Dead-letter lines that could not be written (a full disk, …).
    pub dead_letter_held: usize,
}

/// Closes admission, drains for `grace`, hands what is left to the
/// dead-letter file (without a journal) and flushes it.
pub async fn drain(set: &Destinations<Job>, sink: &FileSink, grace: Duration) -> Drained {
    let (stats, returned) = set.shutdown(grace).await;
    for (name, job) in returned {
        job.trail.tried_by(&name.into());
        if sink.offer(job, "shutdown").is_err() {
            tracing::error!(
                "the dead-letter writer is gone: a webhook left at shutdown was dropped"
            );
        }
    }
    let flushed = sink.flushed().await;
    Drained {
        delivered: stats.iter().map(|s| s.delivered()).sum(),
        kept: stats.iter().map(|s| s.kept()).sum(),
        dead_letter_lines: flushed.written,
        dead_letter_held: flushed.held,
    }
}

/// Drains as [`drain`] does, unless a second signal comes first: then exits
/// with code 130.
pub async fn drain_or_quit(set: &Destinations<Job>, sink: &FileSink, grace: Duration) -> Drained {
    tokio::select! {
        done = drain(set, sink, grace) => done,
        () = signal() => {
            println!("second signal: exiting now; the journal keeps what was accepted");
            std::process::exit(130);
        }
    }
}
