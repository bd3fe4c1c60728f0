//! Job ids, given at admission.
//!
//! One counter per process, shared by every throttle, that starts at the
//! wall-clock time in nanoseconds when the process first admits a job. So an
//! id is unique across the throttles of a process, and a restarted process
//! never reuses its predecessor's ids unless that one admitted more than one
//! job per nanosecond of its life. Each thread takes ids from the counter in
//! blocks, so admitting a job touches no shared cache line but once per
//! block: ids are unique, and ordered by admission only within a thread.

use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Ids a thread takes from the shared counter at once.
const BLOCK: u64 = 1024;

fn counter() -> &'static AtomicU64 {
    static NEXT: OnceLock<AtomicU64> = OnceLock::new();
    NEXT.get_or_init(|| {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(1 << 62));
        // Below 2^62 (the year 2116 in ns), leaving centuries of ids below
        // 2^63, whose bit `Admitted` keeps for itself.
        AtomicU64::new(now.min(1 << 62))
    })
}

thread_local! {
    /// This thread's block: the next id and the end of the block.
    static BLOCK_IDS: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// A fresh job id.
#[inline]
pub(crate) fn next() -> u64 {
    BLOCK_IDS.with(|cell| {
        let (mut next, mut end) = cell.get();
        if next == end {
            next = counter().fetch_add(BLOCK, Ordering::Relaxed);
            end = next + BLOCK;
        }
        cell.set((next + 1, end));
        next
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_unique_across_threads_and_after_the_wall_clock() {
        let before = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let threads: Vec<_> = (0..4)
            .map(|_| std::thread::spawn(|| (0..5000).map(|_| next()).collect::<Vec<_>>()))
            .collect();
        let mut seen = HashSet::new();
        for t in threads {
            for id in t.join().unwrap_or_default() {
                assert!(seen.insert(id), "id {id} given twice");
            }
        }
        assert_eq!(seen.len(), 20_000);
        // The counter started at (or before) the first use, in wall-clock ns.
        assert!(seen.iter().all(|&id| id + 1_000_000_000_000 > before));
    }
}
