//! How long deliveries take lately, for a closing drain: the slowest of the
//! recent ones, each new delivery weighing in and the older fading, by a
//! sixteenth per delivery and by half for every [`HALF_LIFE_NS`] without
//! one. A closing drain starts no delivery it expects to outlast its
//! deadline: cut off there, it would be sent again after a restart
//! although its receiver may have taken it.

use std::sync::atomic::{AtomicU64, Ordering};

/// The estimate halves for every this long without a delivery ending, ns:
/// a timeout long ago does not hold a shutdown back.
pub(crate) const HALF_LIFE_NS: u64 = 10_000_000_000;

/// The slowest recent delivery, ns (0 until one has ended), and when the
/// last ended.
#[derive(Debug, Default)]
pub(crate) struct Slowest {
    ns: AtomicU64,
    at: AtomicU64,
}

impl Slowest {
    /// A delivery that ended at `now` took `took_ns` (the throttle's clock).
    /// `exclusive`: the caller is the only writer (an inline drain), so a
    /// load and a store do; spawned deliveries update with a
    /// compare-and-swap, so a fast one never overwrites a slow one's.
    pub(crate) fn note(&self, now: u64, took_ns: u64, exclusive: bool) {
        let since = now.saturating_sub(self.at.load(Ordering::Relaxed));
        let weigh = |e: u64| next(faded(e, since), took_ns);
        if exclusive {
            self.ns
                .store(weigh(self.ns.load(Ordering::Relaxed)), Ordering::Relaxed);
            self.at.store(now, Ordering::Relaxed);
        } else {
            let _ = self
                .ns
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |e| Some(weigh(e)));
            self.at.fetch_max(now, Ordering::Relaxed);
        }
    }

    /// An estimate starting at `ns` (at the clock's 0: a new throttle's).
    pub(crate) fn seeded(ns: u64) -> Slowest {
        Slowest {
            ns: AtomicU64::new(ns),
            at: AtomicU64::new(0),
        }
    }

    /// The estimate at `now`, ns.
    pub(crate) fn faded_at(&self, now: u64) -> u64 {
        let since = now.saturating_sub(self.at.load(Ordering::Relaxed));
        faded(self.ns.load(Ordering::Relaxed), since)
    }
}

/// The estimate after a delivery that took `took`: the larger of it and
/// the old one less a sixteenth.
pub(crate) fn next(old: u64, took: u64) -> u64 {
    took.max(old - old / 16)
}

/// `estimate` after `idle` ns without a delivery ending: halved for every
/// [`HALF_LIFE_NS`].
pub(crate) fn faded(estimate: u64, idle: u64) -> u64 {
    match idle / HALF_LIFE_NS {
        h if h >= 64 => 0,
        h => estimate >> h,
    }
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
    }

    #[test]
    fn the_estimate_fades_with_time_without_deliveries() {
        let ten_s = 10_000_000_000;
        assert_eq!(faded(ten_s, 0), ten_s);
        assert_eq!(faded(ten_s, HALF_LIFE_NS - 1), ten_s);
        assert_eq!(faded(ten_s, HALF_LIFE_NS), ten_s / 2);
        assert_eq!(faded(ten_s, 6 * HALF_LIFE_NS), ten_s / 64);
        assert_eq!(faded(ten_s, u64::MAX), 0);
        let s = Slowest::default();
        s.note(ten_s, ten_s, true); // a timeout, ending at 10 s
        assert_eq!(s.faded_at(ten_s), ten_s);
        assert_eq!(
            s.faded_at(ten_s + 3 * HALF_LIFE_NS),
            ten_s / 8,
            "half a minute later"
        );
        // A delivery after it weighs in against what is left of it.
        s.note(ten_s + 3 * HALF_LIFE_NS, 1, false);
        assert_eq!(
            s.faded_at(ten_s + 3 * HALF_LIFE_NS),
            ten_s / 8 - ten_s / 128
        );
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
