//! The reservation word: how many places in the ring are taken, and whether
//! the queue is closed, in one atomic word.
//!
//! A producer reserves a place with a compare-and-swap that fails at the
//! admission bound, then pushes into the ring; the place is released when
//! its job leaves the ring. So the ring never holds more live jobs than the
//! bound, however many producers race, and a push into a reserved place
//! finds room.
//!
//! The high bit is `CLOSED`. Closing sets it, so every reservation that
//! starts after (or races with) the close fails, and a final sweep that
//! waits until no place is taken can never miss a job. This protocol is
//! modelled with `loom`: the crate `loom/` builds this file with loom's
//! atomics (`cargo test -p dripfeed-loom`, the `loom_model` tests below).

#[cfg(dripfeed_loom)]
use loom::sync::atomic::{AtomicUsize, Ordering};
#[cfg(not(dripfeed_loom))]
use std::sync::atomic::{AtomicUsize, Ordering};

/// The high bit of the state word: the queue admits nothing more.
const CLOSED: usize = 1 << (usize::BITS - 1);

/// Why a reservation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Full {
    /// The admission bound is reached.
    Bound,
    /// The queue is near its bound and the key asking holds its share of it
    /// (see [`holders`](super::holders)).
    Share,
    /// The queue is closed.
    Closed,
}

pub(crate) struct Reservations {
    /// Places taken in the low bits, `CLOSED` in the high bit.
    state: AtomicUsize,
    bound: AtomicUsize,
}

impl Reservations {
    /// No place taken, admitting up to `bound` (at least 1).
    pub(crate) fn new(bound: usize) -> Self {
        Reservations {
            state: AtomicUsize::new(0),
            bound: AtomicUsize::new(bound.max(1)),
        }
    }

    /// Takes one place; `Ok(true)` when none was taken before (the empty edge).
    /// Sequentially consistent, as is [`release`](Self::release): a waiter
    /// counts itself and tries again, a releaser frees and then reads the
    /// count of waiters, and one of them must see the other.
    #[inline]
    pub(crate) fn try_reserve(&self) -> Result<bool, Full> {
        let bound = self.bound.load(Ordering::Relaxed);
        match self
            .state
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |s| {
                (s < bound).then_some(s + 1)
            }) {
            Ok(prev) => Ok(prev == 0),
            // A closed word is >= CLOSED, which is above any bound.
            Err(s) if s & CLOSED != 0 => Err(Full::Closed),
            Err(_) => Err(Full::Bound),
        }
    }

    /// [`try_reserve`](Self::try_reserve) for a count that one task alone
    /// changes (never closed): a load and a store, no read-modify-write.
    #[inline]
    #[cfg_attr(dripfeed_loom, allow(dead_code))]
    pub(crate) fn try_reserve_alone(&self) -> Result<bool, Full> {
        let s = self.state.load(Ordering::Relaxed);
        if s < self.bound.load(Ordering::Relaxed) {
            self.state.store(s + 1, Ordering::Relaxed);
            Ok(s == 0)
        } else {
            Err(Full::Bound)
        }
    }

    /// [`release`](Self::release) for a count that one task alone changes.
    #[inline]
    #[cfg_attr(dripfeed_loom, allow(dead_code))]
    pub(crate) fn release_alone(&self) -> usize {
        let s = self.state.load(Ordering::Relaxed).saturating_sub(1);
        self.state.store(s, Ordering::Relaxed);
        s
    }

    /// Gives one place back; returns the places still taken.
    #[inline]
    pub(crate) fn release(&self) -> usize {
        (self.state.fetch_sub(1, Ordering::SeqCst) - 1) & !CLOSED
    }

    /// Places taken.
    #[inline]
    pub(crate) fn taken(&self) -> usize {
        self.state.load(Ordering::Acquire) & !CLOSED
    }

    #[inline]
    pub(crate) fn bound(&self) -> usize {
        self.bound.load(Ordering::Relaxed)
    }

    /// Sets the bound (at least 1).
    pub(crate) fn set_bound(&self, bound: usize) {
        self.bound.store(bound.max(1), Ordering::Relaxed);
    }

    /// Every later reservation fails with [`Full::Closed`].
    pub(crate) fn close(&self) {
        self.state.fetch_or(CLOSED, Ordering::AcqRel);
    }

    #[inline]
    pub(crate) fn is_closed(&self) -> bool {
        self.state.load(Ordering::Acquire) & CLOSED != 0
    }
}

#[cfg(all(test, not(dripfeed_loom)))]
mod tests {
    use super::*;

    #[test]
    fn bound_is_enforced_and_released() {
        let r = Reservations::new(2);
        assert_eq!(r.try_reserve(), Ok(true));
        assert_eq!(r.try_reserve(), Ok(false));
        assert_eq!(r.try_reserve(), Err(Full::Bound));
        assert_eq!(r.release(), 1);
        assert_eq!(r.try_reserve(), Ok(false));
        r.set_bound(0);
        assert_eq!(r.bound(), 1, "at least one place");
    }

    #[test]
    fn close_fails_later_reservations_but_keeps_the_count() {
        let r = Reservations::new(4);
        assert_eq!(r.try_reserve(), Ok(true));
        r.close();
        assert!(r.is_closed());
        assert_eq!(r.taken(), 1);
        assert_eq!(r.try_reserve(), Err(Full::Closed));
        assert_eq!(r.release(), 0);
        assert_eq!(r.try_reserve(), Err(Full::Closed));
    }

    #[test]
    fn racing_producers_never_pass_the_bound() {
        let r = std::sync::Arc::new(Reservations::new(10));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let r = r.clone();
                std::thread::spawn(move || (0..1000).filter(|_| r.try_reserve().is_ok()).count())
            })
            .collect();
        let won: usize = threads.into_iter().map(|t| t.join().unwrap_or(0)).sum();
        assert_eq!(won, 10);
        assert_eq!(r.taken(), 10);
    }
}

/// The loom model: producers reserve and push (or give the place back)
/// while another thread closes the queue and sweeps it the way the drain's
/// final sweep does. Whatever the interleaving, every job that was pushed is
/// swept, and nothing is pushed after the sweep ends. The ring itself
/// (crossbeam's `ArrayQueue`) is not modelled: a mutex-guarded `Vec` stands
/// in for it.
#[cfg(all(test, dripfeed_loom))]
mod loom_model {
    use super::*;
    use loom::sync::{Arc, Mutex};
    use loom::thread;

    /// A place guard as `admission::Place` is: pushing consumes it, dropping gives it back.
    struct Place<'a> {
        r: &'a Reservations,
        held: bool,
    }

    impl Place<'_> {
        fn push(mut self, ring: &Mutex<Vec<u32>>, job: u32) {
            ring.lock().unwrap().push(job);
            self.held = false;
        }
    }

    impl Drop for Place<'_> {
        fn drop(&mut self) {
            if self.held {
                self.r.release();
            }
        }
    }

    fn reserve(r: &Reservations) -> Option<Place<'_>> {
        r.try_reserve().ok().map(|_| Place { r, held: true })
    }

    /// Explores every interleaving up to three preemptions: enough for
    /// the races between one reservation, a close and the sweep, and
    /// seconds rather than minutes.
    fn model(f: impl Fn() + Sync + Send + 'static) {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(f);
    }

    #[test]
    fn close_and_sweep_never_miss_a_job() {
        model(|| {
            let r = Arc::new(Reservations::new(2));
            let ring = Arc::new(Mutex::new(Vec::new()));
            // One producer pushes a job, another takes a place and gives it back.
            let pusher = {
                let (r, ring) = (r.clone(), ring.clone());
                thread::spawn(move || match reserve(&r) {
                    Some(place) => {
                        place.push(&ring, 1);
                        1
                    }
                    None => 0,
                })
            };
            let dropper = {
                let r = r.clone();
                thread::spawn(move || drop(reserve(&r)))
            };
            // The closer: close, then sweep until no place is taken.
            r.close();
            let mut swept = 0;
            loop {
                let job = ring.lock().unwrap().pop();
                match job {
                    Some(_) => {
                        r.release();
                        swept += 1;
                    }
                    None if r.taken() == 0 => break,
                    None => {
                        assert!(r.taken() <= 2, "a place was given back twice");
                        thread::yield_now();
                    }
                }
            }
            let pushed = pusher.join().unwrap();
            dropper.join().unwrap();
            assert_eq!(swept, pushed, "every pushed job is swept");
            assert!(
                ring.lock().unwrap().is_empty(),
                "nothing pushed after the sweep"
            );
            assert_eq!(r.try_reserve(), Err(Full::Closed));
        });
    }

    #[test]
    fn the_bound_holds_and_a_dropped_place_frees() {
        model(|| {
            let r = Arc::new(Reservations::new(1));
            let a = {
                let r = r.clone();
                thread::spawn(move || reserve(&r).map(drop).is_some())
            };
            let b = {
                let r = r.clone();
                thread::spawn(move || {
                    let p = reserve(&r);
                    let got = p.is_some();
                    // While held, nobody else can pass the bound of 1.
                    if got {
                        assert!(r.taken() <= 1);
                    }
                    got
                })
            };
            let (a, b) = (a.join().unwrap(), b.join().unwrap());
            assert!(a || b, "one of them got the place");
            assert_eq!(r.taken(), 0, "every place went back");
        });
    }
}
