//! Who holds the queue's places: for a throttle with per-key budgets, the
//! count of queued jobs of each key, so the last places of the queue go to
//! keys below their share ([`fair_share`]) and one flooding key cannot
//! crowd the others out, whatever their quotas.
//!
//! Counts are kept by the key's 64-bit hash in a few sharded maps, only for
//! keys with jobs in the ring (bounded by the ring), and given back when
//! the job leaves the ring (popped by the drain, evicted, purged) or its
//! place is dropped unused.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::keyed::fair_share;

/// The key of an unkeyed job.
pub(crate) const NO_KEY: u64 = 0;

/// A key's hash as the ring stores it: never [`NO_KEY`], bit 0 clear (a
/// place keeps its empty-edge flag there).
pub(crate) fn key_of(hash: u64) -> u64 {
    (hash & !1).max(2)
}

const SHARDS: usize = 16;

/// Queued jobs per key.
pub(crate) struct Holders {
    shards: [Mutex<HashMap<u64, u32>>; SHARDS],
    /// Keys holding at least one place.
    holders: AtomicUsize,
}

impl Holders {
    pub(crate) fn new() -> Self {
        Holders {
            shards: std::array::from_fn(|_| Mutex::new(HashMap::new())),
            holders: AtomicUsize::new(0),
        }
    }

    fn shard(&self, key: u64) -> std::sync::MutexGuard<'_, HashMap<u64, u32>> {
        let i = ((key ^ (key >> 32)) >> 1) as usize % SHARDS; // bit 0 is always clear
        self.shards[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts one more place for `key` if the fair-share rule lets it have
    /// one with `taken` of `bound` places taken; `false` leaves it unchanged.
    pub(crate) fn try_hold(&self, key: u64, taken: usize, bound: usize) -> bool {
        let mut shard = self.shard(key);
        let own = shard.get(&key).copied().unwrap_or(0);
        let holders = self.holders.load(Ordering::Relaxed) + usize::from(own == 0);
        if !fair_share(taken, own as usize, holders, bound) {
            return false;
        }
        *shard.entry(key).or_insert(0) += 1;
        if own == 0 {
            self.holders.fetch_add(1, Ordering::Relaxed);
        }
        true
    }

    /// A place of `key` was given back.
    pub(crate) fn release(&self, key: u64) {
        let mut shard = self.shard(key);
        if let Some(n) = shard.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                shard.remove(&key);
                self.holders.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// Places `key` holds.
    #[cfg(test)]
    pub(crate) fn held(&self, key: u64) -> u32 {
        self.shard(key).get(&key).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flooding_key_leaves_the_last_quarter_to_the_others() {
        let h = Holders::new();
        let (flood, polite) = (key_of(2), key_of(4));
        let mut taken = 0;
        while h.try_hold(flood, taken, 100) {
            taken += 1;
        }
        assert_eq!(taken, 75, "alone past 3/4, it is at its share");
        for _ in 0..20 {
            assert!(h.try_hold(polite, taken, 100), "a newcomer gets in");
            taken += 1;
        }
        assert!(!h.try_hold(flood, taken, 100));
        assert_eq!((h.held(flood), h.held(polite)), (75, 20));
        for _ in 0..75 {
            h.release(flood);
        }
        assert_eq!(h.held(flood), 0);
        assert_eq!(h.holders.load(Ordering::Relaxed), 1);
        assert_eq!(key_of(0), 2, "no key hashes to the unkeyed mark");
        assert_eq!(key_of(u64::MAX) & 1, 0, "bit 0 is left to the place");
    }
}
