//! The relay's byte budget: every byte a client can make the relay hold —
//! bodies (queued, in flight or waiting to be written to the dead-letter
//! file), `Idempotency-Key`s and tenant names — counts against one bound,
//! `max_queue_bytes`.
//!
//! A [`Ticket`] rides with what it pays for (a job, a remembered key) and
//! gives its bytes back when dropped, wherever that happens, so the count
//! cannot leak. `dripfeed_relay_held_bytes` shows the count.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bookkeeping charged per job on top of its body and tenant name: what
/// a queued webhook holds besides them (its fields, boxed, 192 bytes; its
/// trail; its status), measured at 356 bytes by `relay/tests/it/memory.rs`.
pub(crate) const JOB_OVERHEAD: u64 = 384;

/// Bytes held for clients, against a maximum.
#[derive(Clone)]
pub(crate) struct ByteBudget {
    held: Arc<AtomicU64>,
    max: u64,
}

/// Bytes held until dropped.
#[derive(Debug)]
pub struct Ticket {
    held: Arc<AtomicU64>,
    bytes: u64,
}

impl ByteBudget {
    /// A budget of `max` bytes.
    pub(crate) fn new(max: u64) -> Self {
        ByteBudget {
            held: Arc::new(AtomicU64::new(0)),
            max,
        }
    }

    /// Reserves a job's bytes (`body_len` and [`JOB_OVERHEAD`]), or `None`
    /// when that would pass the budget.
    pub(crate) fn try_take(&self, body_len: usize) -> Option<Ticket> {
        self.try_hold(body_len as u64 + JOB_OVERHEAD)
    }

    /// Reserves `bytes`, or `None` when that would pass the budget.
    pub(crate) fn try_hold(&self, bytes: u64) -> Option<Ticket> {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| {
                h.checked_add(bytes).filter(|&n| n <= self.max)
            })
            .ok()
            .map(|_| Ticket {
                held: self.held.clone(),
                bytes,
            })
    }

    /// Bytes held now.
    pub(crate) fn held(&self) -> u64 {
        self.held.load(Ordering::Relaxed)
    }

    /// The bound.
    pub(crate) fn max(&self) -> u64 {
        self.max
    }
}

impl Ticket {
    /// The bytes it holds.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Gives back all but `bytes` (a body read was shorter than reserved).
    pub fn shrink_to(&mut self, bytes: u64) {
        if bytes < self.bytes {
            self.held.fetch_sub(self.bytes - bytes, Ordering::AcqRel);
            self.bytes = bytes;
        }
    }
}

impl Ticket {
    /// One ticket holding both `a`'s and `b`'s bytes (of one budget).
    pub(crate) fn merged(mut a: Ticket, mut b: Ticket) -> Ticket {
        a.bytes = a.bytes.saturating_add(std::mem::take(&mut b.bytes));
        a
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.held.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickets_give_their_bytes_back() {
        let budget = ByteBudget::new(1200);
        let a = budget.try_hold(600).expect("fits");
        assert!(budget.try_hold(601).is_none());
        let mut b = budget.try_take(100).expect("fits with its overhead");
        assert_eq!(budget.held(), 600 + 100 + JOB_OVERHEAD);
        b.shrink_to(50);
        assert_eq!(budget.held(), 650);
        drop((a, b));
        assert_eq!(budget.held(), 0);
        assert!(budget.try_hold(u64::MAX).is_none(), "no overflow");
    }
}
