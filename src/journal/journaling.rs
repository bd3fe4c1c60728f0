//! A throttle's journal (feature `journal`): how its jobs are encoded into
//! records, the tag its records name when the journal is shared, and the
//! dead-lettered jobs whose ends wait for the sink's flush.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

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
    flushing: AtomicBool,
}

impl DeadEnds {
    fn take(&self) -> Vec<u64> {
        std::mem::take(&mut *self.ids.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

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
        self.dead
            .ids
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(id);
        if self.dead.flushing.swap(true, Ordering::AcqRel) {
            return; // the running flush takes it
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // Outside a runtime: shutdown's close records it.
            self.dead.flushing.store(false, Ordering::Release);
            return;
        };
        let (sink, dead, journal) = (sink.clone(), self.dead.clone(), self.journal.clone());
        runtime.spawn(async move {
            loop {
                let ids = dead.take();
                if ids.is_empty() {
                    dead.flushing.store(false, Ordering::Release);
                    // One pushed between the take and the store would wait
                    // for the next: take it now if no one else does.
                    if dead
                        .ids
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .is_empty()
                        || dead.flushing.swap(true, Ordering::AcqRel)
                    {
                        return;
                    }
                    continue;
                }
                if CatchUnwind(Box::pin(sink.flush())).await.is_err() {
                    tracing::error!("the dead-letter sink's flush panicked");
                }
                for id in ids {
                    journal.end(id);
                }
            }
        });
    }

    /// The ends still waiting (the sink was flushed by shutdown), then a
    /// flush, except for a set's member going idle: the set flushes its
    /// journal once at its own shutdown.
    pub(crate) async fn close(&self) {
        for id in self.dead.take() {
            self.journal.end(id);
        }
        if self.tag.is_none() {
            self.journal.flush().await;
        }
    }
}
