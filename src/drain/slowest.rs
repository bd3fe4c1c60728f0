//! How long deliveries take lately, for a closing drain: the slowest of the
//! recent ones, each new delivery weighing in and the older fading by a
//! sixteenth per delivery. A closing drain starts no delivery it expects
//! to outlast its deadline: cut off there, it would be sent again after a
//! restart although its receiver may have taken it.

use std::sync::atomic::{AtomicU64, Ordering};

/// The slowest recent delivery, ns (0 until one has ended).
#[derive(Debug, Default)]
pub(crate) struct Slowest(AtomicU64);

impl Slowest {
    /// A delivery took `took_ns`. Relaxed load and store, not a
    /// read-modify-write: an inline drain is its only writer, and spawned
    /// deliveries that race lose an update to an estimate, nothing more.
    pub(crate) fn note(&self, took_ns: u64) {
        let old = self.0.load(Ordering::Relaxed);
        self.0.store(next(old, took_ns), Ordering::Relaxed);
    }

    /// The estimate now, ns.
    pub(crate) fn ns(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The estimate after a delivery that took `took`: the larger of it and
/// the old one less a sixteenth.
pub(crate) fn next(old: u64, took: u64) -> u64 {
    took.max(old - old / 16)
}

/// Whether a delivery started at `now` is expected to run past `deadline`
/// (all in ns), deliveries lately taking up to `slowest`.
pub(crate) fn outlasts(now: u64, slowest: u64, deadline: u64) -> bool {
    now.saturating_add(slowest) > deadline
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_delivery_counts_at_once_and_fades_with_fast_ones() {
        assert_eq!(next(0, 1_500), 1_500);
        assert_eq!(next(1_600, 10), 1_500, "a sixteenth less");
        assert_eq!(next(1_500, 2_000), 2_000);
        let mut e = 1_600_000_000; // 1.6 s
        for _ in 0..100 {
            e = next(e, 10_000_000); // 10 ms each
        }
        assert!(e < 20_000_000, "faded to the fast ones: {e}");
        let s = Slowest::default();
        s.note(3);
        s.note(1);
        assert_eq!(s.ns(), 3);
    }

    #[test]
    fn a_delivery_outlasts_the_deadline_only_when_it_would_end_after_it() {
        assert!(!outlasts(10, 0, 10), "nothing known: start it");
        assert!(!outlasts(10, 5, 15));
        assert!(outlasts(11, 5, 15));
        assert!(!outlasts(u64::MAX - 1, 0, u64::MAX));
        assert!(outlasts(u64::MAX - 1, 5, u64::MAX - 1));
    }
}
