//! What intake answered, by kind: counted as it answers, read by the status line.

use std::sync::atomic::{AtomicU64, Ordering};

/// Answers by kind since start.
#[derive(Default)]
pub struct Answers {
    /// 202, queued.
    pub queued: AtomicU64,
    /// 202, deferred to the dead-letter file (overflow `dead-letter`).
    pub deferred: AtomicU64,
    /// 503: a destination's queue, or the set's bound, is full.
    pub full_503: AtomicU64,
    /// 503: the byte budget is spent.
    pub bytes_503: AtomicU64,
    /// 503: shutting down.
    pub closed_503: AtomicU64,
    /// 429: a tenant over its quota.
    pub quota_429: AtomicU64,
    /// 503: the tenant store is down (failing closed).
    pub store_503: AtomicU64,
    /// 503: the journal is full or failing.
    pub journal_503: AtomicU64,
    /// 413: a body over the limit.
    pub too_large_413: AtomicU64,
    /// 401: no key, or one not known or expired.
    pub unauthorized_401: AtomicU64,
    /// 403: a tenant naming a destination it may not post to.
    pub forbidden_403: AtomicU64,
    /// 503: the dead-letter file takes no lines (failing or full).
    pub dead_letter_503: AtomicU64,
}

impl Answers {
    /// Counts one answer of a kind.
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Reads a count.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}
