//! A throttle's journal (feature `journal`): how its jobs are encoded into
//! records, the tag its records name when the journal is shared, and the
//! dead-lettered jobs whose ends wait for the sink's flush: a job's record
//! ends only once the sink says it stored the job, so a sink that cannot
//! write leaves it in the journal, recovered at the next start.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use super::{JobCodec, Journal};
use crate::accounting::dead_letter::DeadLetterSink;
use crate::util::catch::CatchUnwind;

/// A recovered job decoded, or, when it no longer decodes, logged and
/// ended in the journal (dropped).
pub(crate) fn decode_or_end<J: JobCodec>(journal: &Journal, id: u64, bytes: &[u8]) -> Option<J> {
    match J::decode(bytes) {
        Ok(job) => Some(job),
        Err(e) => {
            tracing::error!(id, len = bytes.len(), error = %e, "journal: a recovered job does not decode; dropped");
            journal.end(id);
            None
        }
    }
}

/// A throttle's journal and how its jobs are encoded.
pub(crate) struct Journaling<J> {
    pub(crate) journal: Journal,
    encode: fn(&J, &mut Vec<u8>),
    /// The tag each record names when the journal is shared (its owner
    /// flushes it: this throttle's shutdown does not).
    tag: Option<Arc<str>>,
    dead: Arc<DeadEnds>,
}

/// Dead-lettered jobs whose ends wait for the sink's flush.
#[derive(Default)]
struct DeadEnds {
    ids: Mutex<Vec<u64>>,
    /// A task is flushing (or waiting to flush again).
    flushing: AtomicBool,
    /// Shutdown took over: a failed flush is not tried again.
    closed: AtomicBool,
    /// A new dead letter (or shutdown): a task waiting to try again wakes.
    more: Notify,
    /// Flushing tasks alive (each holds the journal), and their ends.
    tasks: AtomicUsize,
    done: Notify,
}

impl DeadEnds {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<u64>> {
        self.ids.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn take(&self) -> Vec<u64> {
        std::mem::take(&mut *self.lock())
    }

    /// Ids whose flush failed go back ahead of newer ones.
    fn put_back(&self, mut ids: Vec<u64>) {
        let mut pending = self.lock();
        ids.append(&mut pending);
        *pending = ids;
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Waits until no flushing task is alive.
    async fn tasks_gone(&self) {
        loop {
            let done = self.done.notified();
            tokio::pin!(done);
            done.as_mut().enable();
            if self.tasks.load(Ordering::Acquire) == 0 {
                return;
            }
            done.await;
        }
    }
}

/// Counts a flushing task while it lives (also if its runtime drops it).
struct Task(Arc<DeadEnds>);

impl Drop for Task {
    fn drop(&mut self) {
        self.0.tasks.fetch_sub(1, Ordering::AcqRel);
        self.0.done.notify_waiters();
    }
}

/// The first wait after a failed flush (and the least time between two
/// tries, however many jobs are dead-lettered), and the longest.
const RETRY_MIN: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_secs(5);

impl<J: JobCodec> Journaling<J> {
    /// Records in `journal`, each naming `tag` when it is shared.
    pub(crate) fn new(journal: Journal, tag: Option<Arc<str>>) -> Self {
        Journaling {
            journal,
            encode: |job, out| job.encode(out),
            tag,
            dead: Arc::default(),
        }
    }
}

impl<J: 'static> Journaling<J> {
    /// A job's record: the tag (if any), then the job.
    pub(crate) fn encode_record(&self, job: &J, out: &mut Vec<u8>) {
        if let Some(tag) = &self.tag {
            crate::journal::tag::write(tag, out);
        }
        (self.encode)(job, out);
    }

    pub(crate) fn dead_lettered(&self, id: u64, sink: Option<&Arc<dyn DeadLetterSink<J>>>) {
        let Some(sink) = sink else {
            self.journal.end(id);
            return;
        };
        self.dead.lock().push(id);
        if self.dead.flushing.swap(true, Ordering::AcqRel) {
            self.dead.more.notify_one(); // the running task takes it
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // Outside a runtime: shutdown's close records it.
            self.dead.flushing.store(false, Ordering::Release);
            return;
        };
        let (sink, dead, journal) = (sink.clone(), self.dead.clone(), self.journal.clone());
        self.dead.tasks.fetch_add(1, Ordering::AcqRel);
        let task = Task(self.dead.clone());
        runtime.spawn(async move {
            flush_then_end(sink, dead, journal).await;
            drop(task); // after the journal: shutdown waits for it
        });
    }

    /// Whether dead-lettered jobs wait for the sink's flush (their ends
    /// not yet recorded) in a flushing task, which holds them or is trying
    /// again. Ends left outside a runtime (no task) are shutdown's.
    pub(crate) fn dead_ends_pending(&self) -> bool {
        self.dead.flushing.load(Ordering::Acquire)
    }

    /// Shutdown's part: the ends still waiting are recorded if the sink's
    /// shutdown flush stored them (`flushed`), else they stay in the
    /// journal for the next start; then a flush, except for a set's member
    /// going idle: the set flushes its journal once at its own shutdown.
    pub(crate) async fn close(&self, flushed: bool) {
        self.dead.closed.store(true, Ordering::Release);
        self.dead.more.notify_one();
        // A task waiting to try again stops; one flushing finishes first.
        self.dead.tasks_gone().await;
        let ids = self.dead.take();
        if flushed {
            for id in ids {
                self.journal.end(id);
            }
        } else if !ids.is_empty() {
            tracing::error!(
                jobs = ids.len(),
                "journal: dead-lettered jobs the sink did not store stay in the journal for the next start"
            );
        }
        if self.tag.is_none() {
            self.journal.flush().await;
        }
    }
}

/// The flushing task: flushes the sink and ends the ids it covered; on a
/// failure puts them back and tries again after a backoff (sooner when
/// another job is dead-lettered), until a flush works or shutdown takes
/// over.
async fn flush_then_end<J: 'static>(
    sink: Arc<dyn DeadLetterSink<J>>,
    dead: Arc<DeadEnds>,
    journal: Journal,
) {
    let mut backoff = RETRY_MIN;
    // One ERROR line an episode, one INFO at its end, not one a try.
    let mut failing = false;
    loop {
        let ids = dead.take();
        if ids.is_empty() {
            dead.flushing.store(false, Ordering::Release);
            // One pushed between the take and the store would wait for
            // the next: take it now if no one else does.
            if dead.lock().is_empty() || dead.flushing.swap(true, Ordering::AcqRel) {
                return;
            }
            continue;
        }
        let error = match CatchUnwind(Box::pin(sink.flush())).await {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some("the dead-letter sink's flush panicked".to_owned()),
        };
        let Some(error) = error else {
            if std::mem::take(&mut failing) {
                tracing::info!(
                    jobs = ids.len(),
                    "the dead-letter sink stored the jobs it could not; their journal records end"
                );
            }
            for id in ids {
                journal.end(id);
            }
            backoff = RETRY_MIN;
            continue;
        };
        let jobs = ids.len();
        dead.put_back(ids);
        if dead.is_closed() {
            dead.flushing.store(false, Ordering::Release);
            return; // shutdown decides
        }
        if std::mem::replace(&mut failing, true) {
            tracing::debug!(%error, jobs, retry_in = ?backoff, "the dead-letter sink still cannot store jobs");
        } else {
            tracing::error!(%error, jobs, retry_in = ?backoff, "the dead-letter sink could not store jobs; they stay in the journal until it can (tried again meanwhile)");
        }
        let started = tokio::time::Instant::now();
        let _ = tokio::time::timeout(backoff, dead.more.notified()).await;
        let since = started.elapsed();
        if since < RETRY_MIN && !dead.is_closed() {
            tokio::time::sleep(RETRY_MIN - since).await;
        }
        if dead.is_closed() {
            dead.flushing.store(false, Ordering::Release);
            return;
        }
        backoff = (backoff * 2).min(RETRY_MAX);
    }
}
