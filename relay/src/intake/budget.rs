//! The relay's byte budget: bodies held (queued, in flight or waiting to be
//! written to the dead-letter file) never exceed `max_queue_bytes`.
//!
//! A [`Ticket`] rides with each job and gives its bytes back when the job is
//! dropped, wherever that happens, so the count cannot leak.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bookkeeping charged per job on top of its body.
const OVERHEAD: u64 = 256;

/// Bytes held by queued webhooks, against a maximum.
#[derive(Clone)]
pub struct ByteBudget {
    held: Arc<AtomicU64>,
    max: u64,
}

/// A webhook's bytes, held until it is dropped.
pub struct Ticket {
    held: Arc<AtomicU64>,
    bytes: u64,
}

impl ByteBudget {
    /// A budget of `max` bytes.
    pub fn new(max: u64) -> Self {
        ByteBudget {
            held: Arc::new(AtomicU64::new(0)),
            max,
        }
    }

    /// Reserves `body_len` bytes, or `None` when that would pass the budget.
    pub fn try_take(&self, body_len: usize) -> Option<Ticket> {
        let bytes = body_len as u64 + OVERHEAD;
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| {
                (h + bytes <= self.max).then_some(h + bytes)
            })
            .ok()
            .map(|_| Ticket {
                held: self.held.clone(),
                bytes,
            })
    }

    /// Bytes held now.
    pub fn held(&self) -> u64 {
        self.held.load(Ordering::Relaxed)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.held.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}
