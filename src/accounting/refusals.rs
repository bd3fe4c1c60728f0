//! Refusal and overflow counts, kept per producer thread.
//!
//! A flood of refusals must not make producers fight over one cache line, so
//! each thread bumps a shard of its own (one per core, cache-line aligned);
//! the shards are summed when the counts are read: when the drain publishes,
//! in `stats()`, and after close. Refusals for a cause that later
//! capabilities add ([`Reason::Unavailable`]) are rare and go to a small
//! list behind a lock, so no fixed array grows with them.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::admission::overflow::Overflow;
use crate::admission::reason::{Cause, Reason};

/// The fixed reasons, in their counting order.
const FIXED: [Reason; 4] = [
    Reason::Overloaded,
    Reason::OverQuota,
    Reason::Closed,
    Reason::Invalid,
];

#[inline]
fn fixed_index(reason: Reason) -> Option<usize> {
    match reason {
        Reason::Overloaded => Some(0),
        Reason::OverQuota => Some(1),
        Reason::Closed => Some(2),
        Reason::Invalid => Some(3),
        _ => None,
    }
}

/// One thread's counts, alone on its cache lines.
#[repr(align(128))]
#[derive(Default)]
struct Shard {
    rejected: [AtomicU64; 4],
    overflow: [AtomicU64; 3],
}

pub(crate) struct Refusals {
    shards: Box<[Shard]>,
    causes: Mutex<Vec<(Cause, u64)>>,
}

fn shard_count() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(4, |n| n.get())
            .clamp(1, 16)
    })
}

thread_local! {
    /// This thread's shard, given round-robin at first use (every table
    /// has [`shard_count`] shards).
    static SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
}

#[inline]
fn my_shard() -> usize {
    SHARD.with(|s| {
        let i = s.get();
        if i != usize::MAX {
            return i;
        }
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let i = NEXT.fetch_add(1, Ordering::Relaxed) % shard_count();
        s.set(i);
        i
    })
}

impl Refusals {
    pub(crate) fn new() -> Self {
        Refusals {
            shards: (0..shard_count()).map(|_| Shard::default()).collect(),
            causes: Mutex::new(Vec::new()),
        }
    }

    #[inline]
    fn shard(&self) -> &Shard {
        // In bounds: every table has `shard_count()` shards.
        &self.shards[my_shard()]
    }

    /// Counts one refusal; returns a number unique to it among this
    /// table's refusals of that reason (a seed for its jitter).
    #[inline]
    pub(crate) fn refused(&self, reason: Reason) -> u64 {
        match fixed_index(reason) {
            Some(i) => {
                let shard = my_shard();
                let nth = self.shards[shard].rejected[i].fetch_add(1, Ordering::Relaxed);
                nth ^ ((shard as u64) << 56)
            }
            None => {
                let Reason::Unavailable { cause } = reason else {
                    return 0;
                };
                let mut causes = self.causes.lock().unwrap_or_else(|p| p.into_inner());
                match causes.iter_mut().find(|(c, _)| *c == cause) {
                    Some((_, n)) => {
                        *n += 1;
                        *n
                    }
                    None => {
                        causes.push((cause, 1));
                        1
                    }
                }
            }
        }
    }

    /// Counts one overflow event.
    #[inline]
    pub(crate) fn overflowed(&self, policy: Overflow) {
        self.shard().overflow[policy.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Refusals by reason, the fixed ones first (zeros included), then each
    /// cause seen.
    pub(crate) fn rejected(&self) -> Vec<(Reason, u64)> {
        let mut out: Vec<(Reason, u64)> = FIXED
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let n = self
                    .shards
                    .iter()
                    .map(|s| s.rejected[i].load(Ordering::Relaxed))
                    .sum();
                (*r, n)
            })
            .collect();
        let causes = self.causes.lock().unwrap_or_else(|p| p.into_inner());
        out.extend(
            causes
                .iter()
                .map(|&(cause, n)| (Reason::Unavailable { cause }, n)),
        );
        out
    }

    /// Overflow events, indexed like [`Overflow::ALL`].
    pub(crate) fn overflow(&self) -> [u64; 3] {
        let mut out = [0; 3];
        for (i, slot) in out.iter_mut().enumerate() {
            *slot = self
                .shards
                .iter()
                .map(|s| s.overflow[i].load(Ordering::Relaxed))
                .sum();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_from_many_threads_add_up() {
        let r = std::sync::Arc::new(Refusals::new());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let r = r.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        r.refused(Reason::Overloaded);
                        r.overflowed(Overflow::HeadDrop);
                    }
                    r.refused(Reason::Unavailable {
                        cause: Cause::StoreDown,
                    });
                })
            })
            .collect();
        for t in threads {
            assert!(t.join().is_ok());
        }
        let rejected = r.rejected();
        assert_eq!(rejected[0], (Reason::Overloaded, 4000));
        assert_eq!(rejected[1], (Reason::OverQuota, 0));
        assert_eq!(
            rejected[4],
            (
                Reason::Unavailable {
                    cause: Cause::StoreDown
                },
                4
            )
        );
        assert_eq!(r.overflow(), [0, 4000, 0]);
    }
}
