//! Retries: jobs whose delivery failed but may succeed later wait here,
//! outside the ring, until their backoff has passed; the drain then emits
//! them through the same pacer as new jobs (ahead of them), so a retry storm
//! can never exceed the drain rate. The structure is bounded: a job that
//! finds it full is dead-lettered, never dropped.

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// How failed deliveries are retried.
///
/// ```
/// use dripfeed::RetryPolicy;
/// use std::time::Duration;
/// let policy = RetryPolicy::new(5)
///     .backoff(Duration::from_millis(100), Duration::from_secs(30))
///     .capacity(10_000);
/// assert_eq!(policy.max_attempts(), 5);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    max_attempts: u32,
    base: Duration,
    cap: Duration,
    capacity: Option<usize>,
}

impl RetryPolicy {
    /// Up to `max_attempts` deliveries per job (1 = no retry), with
    /// exponential backoff and full jitter from 100 ms, capped at 30 s.
    pub fn new(max_attempts: u32) -> Self {
        RetryPolicy {
            max_attempts,
            base: Duration::from_millis(100),
            cap: Duration::from_secs(30),
            capacity: None,
        }
    }

    /// The backoff: attempt `n` waits a random time in
    /// `[0, min(cap, base × 2^(n-1))]`, or the downstream's `Retry-After`
    /// hint (capped at `cap`) when it gave one.
    pub fn backoff(mut self, base: Duration, cap: Duration) -> Self {
        self.base = base;
        self.cap = cap;
        self
    }

    /// How many jobs may wait for a retry at once (default: the ring's
    /// size). Beyond it a failed job is dead-lettered at once.
    pub fn capacity(mut self, jobs: usize) -> Self {
        self.capacity = Some(jobs);
        self
    }

    /// The most deliveries per job.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    pub(crate) fn capacity_or(&self, default: usize) -> usize {
        self.capacity.unwrap_or(default)
    }

    pub(crate) fn is_valid(&self) -> Result<(), &'static str> {
        if self.max_attempts == 0 {
            Err("max attempts must be at least 1")
        } else if self.base.is_zero() || self.cap < self.base {
            Err("backoff needs 0 < base <= cap")
        } else if self.capacity == Some(0) {
            Err("retry capacity must be at least 1")
        } else {
            Ok(())
        }
    }

    /// The wait before attempt `next` (2 for the first retry), given the
    /// downstream's hint and a uniform random number `u` in [0, 1).
    pub(crate) fn delay(&self, next: u32, hint: Option<Duration>, u: f64) -> Duration {
        if let Some(hint) = hint {
            return hint.min(self.cap);
        }
        let exp = next.saturating_sub(2).min(40);
        let ceiling = self.base.saturating_mul(1u32 << exp.min(31)).min(self.cap);
        ceiling.mul_f64(u.clamp(0.0, 1.0))
    }
}

/// A job waiting for its next attempt.
pub(crate) struct Pending<J> {
    pub(crate) due_ns: u64,
    pub(crate) job: J,
    pub(crate) id: u64,
    /// The attempt it will be emitted as.
    pub(crate) attempt: u32,
    pub(crate) deadline_ns: u64,
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

    /// Schedules a retry, or hands the job back when the structure is full.
    pub(crate) fn push(
        &self,
        job: J,
        id: u64,
        attempt: u32,
        due_ns: u64,
        deadline_ns: u64,
    ) -> Result<(), J> {
        let mut heap = self.lock();
        if heap.len() >= self.capacity {
            return Err(job);
        }
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        heap.push(Pending {
            due_ns,
            job,
            id,
            attempt,
            deadline_ns,
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

    /// Takes everything (shutdown).
    pub(crate) fn take_all(&self) -> Vec<Pending<J>> {
        let mut heap = self.lock();
        let all = std::mem::take(&mut *heap).into_sorted_vec();
        self.publish(&heap);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_exponential_with_full_jitter_and_honours_hints() {
        let p = RetryPolicy::new(10).backoff(Duration::from_millis(100), Duration::from_secs(2));
        assert_eq!(
            p.delay(2, None, 0.999_999),
            Duration::from_millis(100).mul_f64(0.999_999)
        );
        assert_eq!(p.delay(3, None, 0.5), Duration::from_millis(100));
        assert_eq!(p.delay(4, None, 1.0), Duration::from_millis(400));
        assert_eq!(
            p.delay(60, None, 1.0),
            Duration::from_secs(2),
            "capped, no overflow"
        );
        assert_eq!(p.delay(2, None, 0.0), Duration::ZERO);
        assert_eq!(
            p.delay(2, Some(Duration::from_secs(1)), 0.3),
            Duration::from_secs(1)
        );
        assert_eq!(
            p.delay(2, Some(Duration::from_secs(60)), 0.3),
            Duration::from_secs(2)
        );
    }

    #[test]
    fn the_soonest_due_comes_first_and_the_bound_holds() {
        let r = Retries::new(RetryPolicy::new(3).capacity(2), 100);
        assert!(r.push("b", 2, 2, 200, u64::MAX).is_ok());
        assert!(r.push("a", 1, 2, 100, u64::MAX).is_ok());
        assert_eq!(
            r.push("c", 3, 2, 50, u64::MAX),
            Err("c"),
            "full: handed back"
        );
        assert_eq!(r.next_due(), Some(100));
        assert!(r.pop_due(99).is_none());
        assert_eq!(r.pop_due(100).map(|p| p.job), Some("a"));
        assert_eq!(r.len(), 1);
        assert_eq!(
            r.take_all().into_iter().map(|p| p.job).collect::<Vec<_>>(),
            vec!["b"]
        );
        assert_eq!(r.next_due(), None);
    }

    #[test]
    fn invalid_policies_are_named() {
        assert!(RetryPolicy::new(0).is_valid().is_err());
        assert!(
            RetryPolicy::new(2)
                .backoff(Duration::ZERO, Duration::from_secs(1))
                .is_valid()
                .is_err()
        );
        assert!(
            RetryPolicy::new(2)
                .backoff(Duration::from_secs(2), Duration::from_secs(1))
                .is_valid()
                .is_err()
        );
        assert!(RetryPolicy::new(2).capacity(0).is_valid().is_err());
        assert!(RetryPolicy::new(2).is_valid().is_ok());
    }
}
