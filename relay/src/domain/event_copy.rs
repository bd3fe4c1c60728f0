//! One endpoint's copy of an event, as it travels as a [`Job`]: its
//! event, and where it reports what happened (the engine's events store:
//! the local one, or the fleet's in Redis). The copy holds its share of
//! the event's bytes in the byte budget (the payload once for every copy,
//! and each copy's bookkeeping).
//!
//! [`Job`]: super::job::Job

use std::sync::Arc;

use super::budget::Ticket;
use crate::events::record::{AttemptRecord, CopyState, Told};

/// Where an engine records what happened to a copy.
pub(crate) trait CopyReports: Send + Sync {
    /// `told` of `copy` (not awaited: a record lost to a crash loses an
    /// attempt's line, never the copy).
    fn tell(&self, copy: &EventCopy, told: Told);

    /// Blocks until everything told before is durable (called by the
    /// dead-letter writer's thread before it writes a copy's letter), or
    /// says why it is not. The fleet's copies never reach the dead-letter
    /// file (their letters are in Redis): nothing to wait for.
    fn durable(&self) -> Result<(), String> {
        Ok(())
    }
}

/// An endpoint's copy of an event (see the [module](self) docs).
pub(crate) struct EventCopy {
    /// The event's sequence number (its id).
    pub seq: u64,
    /// The endpoint.
    pub endpoint: Arc<str>,
    /// The event's application.
    pub app: Arc<str>,
    /// The event's type (sent as `webhook-event-type`).
    pub kind: Arc<str>,
    /// The tenant that posted it.
    pub tenant: Option<String>,
    /// When the event was taken, ms since the Unix epoch.
    pub created_ms: u64,
    /// Where it reports.
    pub store: Arc<dyn CopyReports>,
    /// The event's bytes in the budget: held (never read) while any copy
    /// lives, given back with the last.
    #[allow(dead_code)]
    pub held: Option<Arc<Ticket>>,
}

impl EventCopy {
    /// An attempt ended: its answer (`status` 0: none), how long it took,
    /// its error's kind if it failed, and where the copy is now if that
    /// was its last.
    pub(crate) fn attempted(
        &self,
        attempt: AttemptRecord,
        ended: Option<CopyState>,
        retry_at_ms: Option<u64>,
    ) {
        let told = Told::Attempt {
            attempt,
            ended,
            retry_at_ms,
        };
        self.store.tell(self, told);
    }

    /// Dead-lettered for `reason`, its letter on its way.
    pub(crate) fn dead_lettered(&self, reason: &str) {
        self.store.tell(self, Told::Lettering(reason.to_owned()));
    }

    /// Its letter is written (the dead-letter file's writer tells).
    pub(crate) fn lettered(&self) {
        self.store.tell(self, Told::Lettered);
    }
}

impl CopyReports for crate::events::EventStore {
    fn tell(&self, copy: &EventCopy, told: Told) {
        crate::events::EventStore::tell(self, copy.seq, copy.endpoint.clone(), told);
    }
    fn durable(&self) -> Result<(), String> {
        self.durable_blocking()
    }
}
