//! The ring and the admission bound.
//!
//! Jobs live in a `crossbeam_queue::ArrayQueue` allocated once for the
//! largest bound the throttle may ever have (the bound at `max_rate`). The
//! *admission bound* follows the current rate and is enforced by an atomic
//! word that counts reserved places: a producer first reserves a place with a
//! compare-and-swap that fails at the bound, then pushes; the drain pops, then
//! releases the place. So the number of jobs in the ring never exceeds the
//! bound, even with many producers racing, and a push never fails.
//!
//! The same word carries a `CLOSED` bit. Closing sets it, so every
//! reservation that starts after (or races with) the close fails: the drain's
//! final sweep, which waits until no place is reserved, can never miss a job.

use std::sync::atomic::{AtomicUsize, Ordering};

use crossbeam_queue::ArrayQueue;

/// The high bit of the state word: the queue admits nothing more.
const CLOSED: usize = 1 << (usize::BITS - 1);

/// The largest ring the builder accepts, in jobs.
pub(crate) const MAX_CAPACITY: usize = 1 << 28;

/// A job in the ring, stamped for the queue-wait histogram and deadlines.
pub(crate) struct Entry<J> {
    pub(crate) job: J,
    /// Admission time, ns since the throttle's epoch (coarse unless a deadline is set).
    pub(crate) admitted_ns: u64,
    /// Deadline, ns since the epoch; `u64::MAX` when the job has none.
    pub(crate) deadline_ns: u64,
}

/// Why a reservation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Full {
    /// The admission bound is reached.
    Bound,
    /// The queue is closed.
    Closed,
}

pub(crate) struct Queue<J> {
    ring: ArrayQueue<Entry<J>>,
    /// Reserved places in the low bits, `CLOSED` in the high bit.
    state: AtomicUsize,
    bound: AtomicUsize,
}

impl<J> Queue<J> {
    /// A queue whose ring holds `ring_capacity` jobs, admitting up to `bound`.
    pub(crate) fn new(ring_capacity: usize, bound: usize) -> Self {
        Queue {
            ring: ArrayQueue::new(ring_capacity.max(1)),
            state: AtomicUsize::new(0),
            bound: AtomicUsize::new(bound.clamp(1, ring_capacity.max(1))),
        }
    }

    /// Reserves one place; `Ok(true)` when the queue was empty before it.
    #[inline]
    pub(crate) fn try_reserve(&self) -> Result<bool, Full> {
        let bound = self.bound.load(Ordering::Relaxed);
        match self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                (s < bound).then_some(s + 1)
            }) {
            Ok(prev) => Ok(prev == 0),
            // A closed word is >= CLOSED, which is above any bound.
            Err(s) if s & CLOSED != 0 => Err(Full::Closed),
            Err(_) => Err(Full::Bound),
        }
    }

    /// Pushes into a place reserved by [`try_reserve`](Self::try_reserve).
    ///
    /// Cannot fail while the bound stays within the ring, which the builder
    /// and `set_drain_rate` guarantee; if it ever did, the place is released
    /// and the entry handed back rather than lost.
    #[inline]
    pub(crate) fn push_reserved(&self, entry: Entry<J>) -> Result<(), Entry<J>> {
        self.ring.push(entry).inspect_err(|_| {
            self.release();
        })
    }

    /// Takes the oldest job without releasing its place: the caller either
    /// releases it or fills it again (head-drop).
    #[inline]
    pub(crate) fn pop(&self) -> Option<Entry<J>> {
        self.ring.pop()
    }

    /// Releases one place; returns the places still reserved.
    #[inline]
    pub(crate) fn release(&self) -> usize {
        (self.state.fetch_sub(1, Ordering::AcqRel) - 1) & !CLOSED
    }

    /// Places reserved: jobs in the ring plus pushes under way.
    #[inline]
    pub(crate) fn depth(&self) -> usize {
        self.state.load(Ordering::Acquire) & !CLOSED
    }

    pub(crate) fn bound(&self) -> usize {
        self.bound.load(Ordering::Relaxed)
    }

    /// Sets the admission bound, clamped to [1, ring capacity].
    pub(crate) fn set_bound(&self, bound: usize) {
        self.bound
            .store(bound.clamp(1, self.ring.capacity()), Ordering::Relaxed);
    }

    pub(crate) fn ring_capacity(&self) -> usize {
        self.ring.capacity()
    }

    /// Closes the queue: every later reservation fails with [`Full::Closed`].
    pub(crate) fn close(&self) {
        self.state.fetch_or(CLOSED, Ordering::AcqRel);
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.state.load(Ordering::Acquire) & CLOSED != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(job: u32) -> Entry<u32> {
        Entry {
            job,
            admitted_ns: 0,
            deadline_ns: u64::MAX,
        }
    }

    #[test]
    fn bound_is_enforced_and_released() {
        let q = Queue::new(8, 2);
        assert_eq!(q.try_reserve(), Ok(true));
        assert!(q.push_reserved(entry(1)).is_ok());
        assert_eq!(q.try_reserve(), Ok(false));
        assert!(q.push_reserved(entry(2)).is_ok());
        assert_eq!(q.try_reserve(), Err(Full::Bound));
        assert_eq!(q.pop().map(|e| e.job), Some(1));
        assert_eq!(q.release(), 1);
        assert_eq!(q.try_reserve(), Ok(false));
        q.set_bound(100);
        assert_eq!(q.bound(), 8, "bound never exceeds the ring");
    }

    #[test]
    fn close_fails_later_reservations_but_keeps_depth() {
        let q: Queue<u32> = Queue::new(4, 4);
        assert_eq!(q.try_reserve(), Ok(true));
        q.close();
        assert!(q.is_closed());
        assert_eq!(q.depth(), 1);
        assert_eq!(q.try_reserve(), Err(Full::Closed));
        assert_eq!(q.release(), 0);
        assert_eq!(q.try_reserve(), Err(Full::Closed));
    }

    #[test]
    fn racing_producers_never_pass_the_bound() {
        let q = std::sync::Arc::new(Queue::new(64, 10));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let q = q.clone();
                std::thread::spawn(move || {
                    let mut won = 0;
                    for i in 0..1000 {
                        if q.try_reserve().is_ok() {
                            assert!(q.push_reserved(entry(i)).is_ok());
                            won += 1;
                        }
                    }
                    won
                })
            })
            .collect();
        let won: u32 = threads.into_iter().map(|t| t.join().unwrap_or(0)).sum();
        assert_eq!(won, 10);
        assert_eq!(q.depth(), 10);
    }
}
