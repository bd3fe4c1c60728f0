//! Admission: the one path every job takes into the ring, and the place
//! guard it hands out; beside it the [`places`] counter that makes the
//! bound exact under concurrency, the [`overflow`] policies, and what a
//! refusal hands back ([`rejected`], [`reason`], [`rate_limit`]).
//!
//! # The order of admission
//!
//! Every entry point (`try_submit`, `submit`, `submit_timeout`, whatever
//! the [`Submission`](crate::Submission), and [`Slots`](crate::Slots))
//! takes the same steps:
//!
//! 1. the journal, when there is one: the awaited paths record the job
//!    first, so it is durable before anything is charged for it;
//! 2. the key's budget: the key is charged (a 429 ends here; `try_submit`
//!    charges its table here before recording the job, since the table
//!    answers at once);
//! 3. a place in the queue: [`Admission::try_reserve`] hands out a
//!    [`Place`]; at the bound the overflow policy decides. If the queue
//!    refuses, the key's charge is refunded and the record ended.
//!
//! A store that needs a round trip is awaited in step 2, before any place is
//! taken: a ring place is never held across an await.
//!
//! # Places
//!
//! A [`Place`] is `#[must_use]`, like tokio's `mpsc::Permit`:
//! [`push`](Place::push) consumes it and queues the entry; dropping it gives
//! the place back, wakes one `submit` waiting for room, and (on the empty
//! edge, where a producer behind it left waking the drain to it) the drain.
//! The drain's [`pop`](Admission::pop) hands out the popped entry's place
//! with it: head-drop refills it with the newcomer, the drain drops it.
//! Nothing releases a place by hand.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crossbeam_queue::ArrayQueue;
use tokio::sync::Notify;

pub(crate) mod holders;
pub(crate) mod overflow;
pub(crate) mod places;
pub(crate) mod rate_limit;
pub(crate) mod reason;
pub(crate) mod rejected;

use holders::{Holders, NO_KEY};
pub(crate) use places::Full;
use places::Reservations;

use crate::util::waiting;

/// How many times a `submit` finding the queue full yields before it waits
/// to be woken.
const SPIN_YIELDS: u32 = 2;

/// The largest ring the builder accepts, in jobs.
pub(crate) const MAX_CAPACITY: usize = 1 << 28;

/// A job in the ring, with its id and stamps.
pub(crate) struct Entry<J> {
    pub(crate) job: J,
    /// Given at admission; the same on every attempt.
    pub(crate) id: u64,
    /// Admission time, ns since the throttle's epoch (coarse unless a deadline is set).
    pub(crate) admitted_ns: u64,
    /// Deadline, ns since the epoch; `u64::MAX` when the job has none.
    pub(crate) deadline_ns: u64,
    /// The hash of the key it was admitted for ([`NO_KEY`] for none), whose
    /// share of the queue it counts against until it leaves the ring.
    pub(crate) key: u64,
    /// The number of its first attempt here: 1, or one past the attempts
    /// it made before it was submitted (`Submission::attempts_made`) or
    /// before a restart (a job the journal kept), at most the retry
    /// policy's last.
    pub(crate) attempt: u32,
}

/// What a job is stamped with at admission besides its id: its delivery
/// deadline and the attempts it made before it was submitted.
#[derive(Clone, Copy, Default)]
pub(crate) struct Terms {
    /// Deadline, ns since the throttle's epoch.
    pub(crate) until: Option<u64>,
    /// Attempts made before (`Submission::attempts_made`).
    pub(crate) made: u32,
}

/// For queues whose entries can be withdrawn while queued ([`Slots`](crate::Slots)).
pub(crate) struct Withdrawal<J> {
    /// The drain's claim on a popped entry: `false` when it was withdrawn.
    pub(crate) claim: fn(&J) -> bool,
    /// Whether an entry was withdrawn (changes nothing).
    pub(crate) withdrawn: fn(&J) -> bool,
}

impl<J> Clone for Withdrawal<J> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<J> Copy for Withdrawal<J> {}

pub(crate) struct Admission<J> {
    ring: ArrayQueue<Entry<J>>,
    places: Reservations,
    withdrawal: Option<Withdrawal<J>>,
    /// Entries that left the ring: popped, evicted or purged.
    left: AtomicU64,
    drain: Notify,
    room: Notify,
    room_waiters: AtomicUsize,
    /// Serialises purges of withdrawn entries.
    purge: Mutex<()>,
    /// Queued jobs per key, when jobs are admitted for keys.
    holders: Option<Holders>,
}

impl<J> Admission<J> {
    /// A ring of `ring_capacity` entries admitting up to `bound` at once;
    /// `keyed`: jobs are admitted for keys, which share the last places
    /// fairly.
    pub(crate) fn new(
        ring_capacity: usize,
        bound: usize,
        withdrawal: Option<Withdrawal<J>>,
        keyed: bool,
    ) -> Self {
        let ring_capacity = ring_capacity.max(1);
        Admission {
            ring: ArrayQueue::new(ring_capacity),
            places: Reservations::new(bound.clamp(1, ring_capacity)),
            withdrawal,
            left: AtomicU64::new(0),
            drain: Notify::new(),
            room: Notify::new(),
            room_waiters: AtomicUsize::new(0),
            purge: Mutex::new(()),
            holders: keyed.then(Holders::new),
        }
    }

    /// Takes a place now, or says why not.
    #[inline]
    pub(crate) fn try_reserve(&self) -> Result<Place<'_, J>, Full> {
        self.places.try_reserve().map(|first| Place {
            adm: Some(self),
            word: u64::from(first),
        })
    }

    /// Takes a place for a job of `key` (a hash from
    /// [`holders::key_of`]): past three quarters of the bound, only while
    /// the key holds less than its share ([`Full::Share`] otherwise).
    #[inline]
    pub(crate) fn try_reserve_for(&self, key: u64) -> Result<Place<'_, J>, Full> {
        let Some(holders) = self.holders.as_ref().filter(|_| key != NO_KEY) else {
            return self.try_reserve();
        };
        if self.is_closed() {
            return Err(Full::Closed);
        }
        if !holders.try_hold(key, self.depth(), self.bound()) {
            return Err(if self.depth() >= self.bound() {
                Full::Bound
            } else {
                Full::Share
            });
        }
        match self.try_reserve() {
            Ok(mut place) => {
                place.word |= key;
                Ok(place)
            }
            Err(full) => {
                holders.release(key);
                Err(full)
            }
        }
    }

    /// A job of `key` left the ring (or its place went unused).
    #[inline]
    fn release_key(&self, key: u64) {
        if key != NO_KEY
            && let Some(holders) = &self.holders
        {
            holders.release(key);
        }
    }

    /// Takes a place for a job of `key` ([`NO_KEY`] for none), waiting for
    /// room while the queue is at its bound, and while the key is above its
    /// share near the bound. Cancel-safe: a dropped wait holds no place.
    /// Fails only when closed.
    pub(crate) async fn reserve_for(&self, key: u64) -> Result<Place<'_, J>, Full> {
        let try_now = || self.try_reserve_for(key);
        // A busy drain frees a place within microseconds: yielding a few
        // times first keeps this task on its own worker. Woken by the
        // drain instead, it would be run on the drain's, in turn with it.
        for _ in 0..SPIN_YIELDS {
            match try_now() {
                Err(Full::Bound | Full::Share) => tokio::task::yield_now().await,
                done => return done,
            }
        }
        // A task yielding here is not counted as a waiter: it may take a
        // freed place before one that waits to be woken (which then waits
        // again), as a new `submit` may.
        waiting::until(&self.room_waiters, &self.room, || match try_now() {
            Err(Full::Bound | Full::Share) => None,
            done => Some(done),
        })
        .await
    }

    /// Takes the oldest live entry, with its place. Withdrawn entries are
    /// skipped (their places went back when they were withdrawn).
    pub(crate) fn pop(&self) -> Option<(Entry<J>, Place<'_, J>)> {
        let entry = self.pop_held()?;
        self.release_key(entry.key);
        let place = Place {
            adm: Some(self),
            word: NO_KEY,
        };
        Some((entry, place))
    }

    /// Takes the oldest live entry and keeps its place (and its key's
    /// share) taken until [`release_held`](Self::release_held): for a
    /// drain that holds entries in its own queues before it emits them
    /// ([`Fair`](crate::drain::fair::Fair)), so they count against the
    /// bound until then.
    pub(crate) fn pop_held(&self) -> Option<Entry<J>> {
        loop {
            let entry = self.ring.pop()?;
            self.left.fetch_add(1, Ordering::Relaxed);
            if self.withdrawal.is_some_and(|w| !(w.claim)(&entry.job)) {
                self.release_key(entry.key);
                continue;
            }
            return Some(entry);
        }
    }

    /// An entry taken by [`pop_held`](Self::pop_held), emitted (or handed
    /// off): its place and its key's share go back.
    pub(crate) fn release_held(&self, key: u64) {
        self.release_key(key);
        self.give_back(false);
    }

    /// A queued entry was withdrawn by its caller: its place goes back now,
    /// though the entry stays in the ring until it is popped or purged.
    pub(crate) fn withdrawn(&self) {
        self.give_back(false);
    }

    fn give_back(&self, wake_drain: bool) {
        self.places.release();
        if waiting::any(&self.room_waiters) {
            self.room.notify_one();
        }
        if wake_drain {
            self.drain.notify_one();
        }
    }

    /// Pushes into a reserved place; when withdrawn entries crowd the ring,
    /// purges them first.
    #[inline]
    fn push_entry(&self, entry: Entry<J>) -> Result<(), Entry<J>> {
        match self.ring.push(entry) {
            Err(entry) if self.withdrawal.is_some() => {
                self.purge();
                self.ring.push(entry)
            }
            pushed => pushed,
        }
    }

    /// Takes the withdrawn entries out of the ring. Live entries go back in
    /// their order (a push racing the purge may land among them). Live
    /// entries never exceed the bound, which the ring holds, so this always
    /// makes room when only withdrawn entries crowd it.
    fn purge(&self) {
        let Some(w) = self.withdrawal else { return };
        let _one_at_a_time = self.purge.lock().unwrap_or_else(|p| p.into_inner());
        let mut live = std::collections::VecDeque::new();
        for _ in 0..self.ring.len() {
            match self.ring.pop() {
                Some(e) if (w.withdrawn)(&e.job) => {
                    self.left.fetch_add(1, Ordering::Relaxed);
                    self.release_key(e.key);
                }
                Some(e) => live.push_back(e),
                None => break,
            }
        }
        while let Some(e) = live.pop_front() {
            if let Err(e) = self.ring.push(e) {
                // Racing pushes filled the room: take one more from the head.
                live.push_front(e);
                match self.ring.pop() {
                    Some(x) if (w.withdrawn)(&x.job) => {
                        self.left.fetch_add(1, Ordering::Relaxed);
                        self.release_key(x.key);
                    }
                    Some(x) => live.push_back(x),
                    None => std::thread::yield_now(),
                }
            }
        }
    }

    /// Live places taken: jobs queued plus pushes under way.
    #[inline]
    pub(crate) fn depth(&self) -> usize {
        self.places.taken()
    }

    /// Entries admitted into the ring so far (exact when quiet).
    pub(crate) fn admitted(&self) -> u64 {
        self.left.load(Ordering::Relaxed) + self.ring.len() as u64
    }

    pub(crate) fn bound(&self) -> usize {
        self.places.bound()
    }

    /// Sets the admission bound, within [1, ring capacity]; wakes `submit`s
    /// waiting for room when it grows.
    pub(crate) fn set_bound(&self, bound: usize) {
        let old = self.places.bound();
        self.places.set_bound(bound.clamp(1, self.ring.capacity()));
        if self.places.bound() > old {
            self.room.notify_waiters();
        }
    }

    pub(crate) fn ring_capacity(&self) -> usize {
        self.ring.capacity()
    }

    /// Admits nothing more; wakes the drain and every waiting `submit`.
    pub(crate) fn close(&self) {
        self.places.close();
        self.drain.notify_one();
        self.room.notify_waiters();
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.places.is_closed()
    }

    /// Wakes the drain (a rate change, pause, a retry scheduled, …).
    pub(crate) fn wake_drain(&self) {
        self.drain.notify_one();
    }

    /// What the drain sleeps on.
    pub(crate) fn drain_wakeups(&self) -> &Notify {
        &self.drain
    }
}

/// A place in the queue: [`push`](Self::push) an entry into it, or drop it
/// to give it back.
#[must_use = "a place dropped unused is given back"]
pub(crate) struct Place<'a, J> {
    adm: Option<&'a Admission<J>>,
    /// Taken on the empty edge: the drain may be asleep, and it is this
    /// place's duty to wake it.
    /// The key it was taken for (its entry carries it), or [`NO_KEY`],
    /// with bit 0 set when it was taken on the empty edge (its duty to wake
    /// the drain): keys have bit 0 clear ([`holders::key_of`]). One word,
    /// so a place is two words, moved in registers (a third word made
    /// admission twice as slow: the place went through the stack and its
    /// loads stalled on store forwarding).
    word: u64,
}

impl<J> Place<'_, J> {
    /// Whether the queue was empty when this place was taken.
    pub(crate) fn is_first(&self) -> bool {
        self.word & 1 == 1
    }

    /// The key it was taken for, or [`NO_KEY`].
    fn key(&self) -> u64 {
        self.word & !1
    }

    /// Queues `entry` in this place. Hands the entry back (and the place)
    /// only if the ring has no room, which the bound rules out.
    #[inline]
    pub(crate) fn push(mut self, mut entry: Entry<J>) -> Result<(), Entry<J>> {
        let Some(adm) = self.adm else {
            return Err(entry);
        };
        entry.key = self.key();
        adm.push_entry(entry)?;
        self.adm = None;
        if self.is_first() {
            adm.drain.notify_one();
        }
        Ok(())
    }
}

impl<J> Drop for Place<'_, J> {
    #[inline]
    fn drop(&mut self) {
        if let Some(adm) = self.adm.take() {
            adm.release_key(self.key());
            adm.give_back(self.is_first());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(job: u32) -> Entry<u32> {
        Entry {
            job,
            id: u64::from(job),
            admitted_ns: 0,
            deadline_ns: u64::MAX,
            key: NO_KEY,
            attempt: 1,
        }
    }

    #[test]
    fn a_dropped_place_goes_back_and_a_pushed_one_stays() {
        let adm = Admission::new(4, 2, None, false);
        let a = adm.try_reserve();
        assert!(a.as_ref().is_ok_and(|p| p.is_first()));
        drop(a);
        assert_eq!(adm.depth(), 0);
        let pushed = adm.try_reserve().map(|p| p.push(entry(1)).is_ok());
        assert_eq!(pushed, Ok(true));
        assert_eq!((adm.depth(), adm.admitted()), (1, 1));
        let held = adm.try_reserve();
        assert!(held.as_ref().is_ok_and(|p| !p.is_first()));
        assert!(matches!(adm.try_reserve(), Err(Full::Bound)));
        drop(held);
        let (popped, place) = adm.pop().map(|(e, p)| (e.job, p)).unzip();
        assert_eq!(popped, Some(1));
        assert_eq!(
            adm.depth(),
            1,
            "a popped entry keeps its place until it is dropped"
        );
        drop(place);
        assert_eq!(adm.depth(), 0);
        adm.close();
        assert!(matches!(adm.try_reserve(), Err(Full::Closed)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_place_wakes_a_waiting_reserve() {
        let adm = std::sync::Arc::new(Admission::<u32>::new(1, 1, None, false));
        let held = adm.try_reserve().map_err(|_| ()).map(|p| (p.is_first(), p));
        let (first, place) = match held {
            Ok(x) => x,
            Err(()) => panic!("room"),
        };
        assert!(first);
        let waiter = {
            let adm = adm.clone();
            tokio::spawn(async move { adm.reserve_for(NO_KEY).await.is_ok() })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(place);
        assert_eq!(waiter.await.ok(), Some(true));
    }

    fn withdrawable() -> Withdrawal<std::sync::Arc<std::sync::atomic::AtomicBool>> {
        Withdrawal {
            claim: |w| !w.load(Ordering::Acquire),
            withdrawn: |w| w.load(Ordering::Acquire),
        }
    }

    #[test]
    fn withdrawn_entries_are_purged_when_they_crowd_the_ring() {
        use std::sync::Arc;
        use std::sync::atomic::AtomicBool;
        // Bound 2, ring 2: every withdrawn entry crowds the ring.
        let adm = Admission::new(2, 2, Some(withdrawable()), false);
        let mk = |id| Entry {
            job: Arc::new(AtomicBool::new(false)),
            id,
            admitted_ns: 0,
            deadline_ns: u64::MAX,
            key: NO_KEY,
            attempt: 1,
        };
        let mut flags = Vec::new();
        for id in 0..10 {
            let e = mk(id);
            flags.push(e.job.clone());
            let pushed = adm.try_reserve().map(|p| p.push(e).is_ok());
            assert_eq!(pushed, Ok(true), "entry {id} finds room");
            // Withdraw all but the first.
            if id > 0 {
                flags[id as usize].store(true, Ordering::Release);
                adm.withdrawn();
            }
        }
        assert_eq!(adm.depth(), 1);
        assert_eq!(
            adm.pop().map(|(e, _)| e.id),
            Some(0),
            "the live one kept its turn"
        );
        assert!(adm.pop().is_none());
        assert_eq!(adm.admitted(), 10);
    }
}
