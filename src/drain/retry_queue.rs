//! Retries: jobs whose delivery failed but may succeed later wait here,
//! outside the ring, until their backoff has passed; the drain then emits
//! them through the same pacer as new jobs (ahead of them), so a retry storm
//! can never exceed the drain rate. The structure is bounded: a job that
//! finds it full is dead-lettered, never dropped. Its length is the
//! `retry_wait` gauge: nothing else counts it.

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::admission::Entry;
use crate::drain::retry_policy::RetryPolicy;

/// A job waiting for its next attempt.
pub(crate) struct Pending<J> {
    pub(crate) due_ns: u64,
    pub(crate) entry: Entry<J>,
    /// The attempt it will be emitted as.
    pub(crate) attempt: u32,
    seq: u64,
}

impl<J> PartialEq for Pending<J> {
    fn eq(&self, other: &Self) -> bool {
        (self.due_ns, self.seq) == (other.due_ns, other.seq)
    }
}
impl<J> Eq for Pending<J> {}
impl<J> PartialOrd for Pending<J> {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl<J> Ord for Pending<J> {
    /// Reversed: the heap's top is the soonest due.
    fn cmp(&self, other: &Self) -> CmpOrdering {
        (other.due_ns, other.seq).cmp(&(self.due_ns, self.seq))
    }
}

/// The bounded delay structure.
pub(crate) struct Retries<J> {
    pub(crate) policy: RetryPolicy,
    heap: Mutex<BinaryHeap<Pending<J>>>,
    len: AtomicUsize,
    /// The soonest due time, `u64::MAX` when empty: read without the lock.
    next_due: AtomicU64,
    seq: AtomicU64,
    capacity: usize,
}

impl<J> Retries<J> {
    pub(crate) fn new(policy: RetryPolicy, default_capacity: usize) -> Self {
        let capacity = policy.capacity_or(default_capacity).max(1);
        Retries {
            policy,
            heap: Mutex::new(BinaryHeap::new()),
            len: AtomicUsize::new(0),
            next_due: AtomicU64::new(u64::MAX),
            seq: AtomicU64::new(0),
            capacity,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BinaryHeap<Pending<J>>> {
        self.heap.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn publish(&self, heap: &BinaryHeap<Pending<J>>) {
        self.len.store(heap.len(), Ordering::Release);
        self.next_due.store(
            heap.peek().map_or(u64::MAX, |p| p.due_ns),
            Ordering::Release,
        );
    }

    /// Makes room for at least `jobs` (recovered jobs wait here).
    #[cfg(feature = "journal")]
    pub(crate) fn with_room(mut self, jobs: usize) -> Self {
        self.capacity = self.capacity.max(jobs);
        self
    }

    /// Schedules attempt `attempt` of `entry` at `due_ns`, or hands the
    /// entry back when the structure is full.
    pub(crate) fn push(&self, entry: Entry<J>, attempt: u32, due_ns: u64) -> Result<(), Entry<J>> {
        let mut heap = self.lock();
        if heap.len() >= self.capacity {
            return Err(entry);
        }
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        heap.push(Pending {
            due_ns,
            entry,
            attempt,
            seq,
        });
        self.publish(&heap);
        Ok(())
    }

    /// Whether a retry is due at `now` (no lock).
    pub(crate) fn is_due(&self, now: u64) -> bool {
        self.next_due.load(Ordering::Acquire) <= now
    }

    /// The soonest due time, if any retry waits.
    pub(crate) fn next_due(&self) -> Option<u64> {
        let due = self.next_due.load(Ordering::Acquire);
        (due != u64::MAX).then_some(due)
    }

    /// Jobs waiting for a retry.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Takes the soonest retry if it is due.
    pub(crate) fn pop_due(&self, now: u64) -> Option<Pending<J>> {
        let mut heap = self.lock();
        if heap.peek().is_none_or(|p| p.due_ns > now) {
            return None;
        }
        let p = heap.pop();
        self.publish(&heap);
        p
    }

    /// Takes everything (shutdown), oldest admitted first.
    pub(crate) fn take_all(&self) -> Vec<Pending<J>> {
        let mut heap = self.lock();
        let mut all = std::mem::take(&mut *heap).into_vec();
        self.publish(&heap);
        all.sort_by_key(|p| (p.entry.admitted_ns, p.entry.id));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(job: &'static str, admitted_ns: u64) -> Entry<&'static str> {
        Entry {
            job,
            id: admitted_ns,
            admitted_ns,
            deadline_ns: u64::MAX,
            key: crate::admission::holders::NO_KEY,
            attempt: 1,
        }
    }

    #[test]
    fn the_soonest_due_comes_first_and_the_bound_holds() {
        let r = Retries::new(RetryPolicy::new(3).capacity(2), 100);
        assert!(r.push(entry("b", 2), 2, 200).is_ok());
        assert!(r.push(entry("a", 1), 2, 100).is_ok());
        let full = r.push(entry("c", 3), 2, 50).map_err(|e| e.job);
        assert_eq!(full, Err("c"), "full: handed back");
        assert_eq!(r.next_due(), Some(100));
        assert!(r.pop_due(99).is_none());
        assert_eq!(r.pop_due(100).map(|p| p.entry.job), Some("a"));
        assert_eq!(r.len(), 1);
        let rest: Vec<_> = r.take_all().into_iter().map(|p| p.entry.job).collect();
        assert_eq!(rest, vec!["b"]);
        assert_eq!((r.next_due(), r.len()), (None, 0));
    }

    #[test]
    fn shutdown_takes_the_oldest_admitted_first() {
        let r = Retries::new(RetryPolicy::new(3), 10);
        // Due order is the reverse of admission order.
        assert!(r.push(entry("old", 1), 2, 300).is_ok());
        assert!(r.push(entry("mid", 2), 2, 200).is_ok());
        assert!(r.push(entry("new", 3), 2, 100).is_ok());
        let all: Vec<_> = r.take_all().into_iter().map(|p| p.entry.job).collect();
        assert_eq!(all, vec!["old", "mid", "new"]);
    }
}
