//! The set's bound on jobs held: every destination counts its jobs from
//! admission to their end (queued, waiting for a retry or in flight), and
//! the set counts them all.
//!
//! The rule at the bound is [`fair_share`]: a set holding `max` jobs
//! refuses every new one; from three quarters of `max` on, a destination is
//! refused unless it holds less than an equal share counting one
//! destination more than hold jobs, `max / (busy + 1)`, so one flooded
//! destination cannot take the room the quiet ones need.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::keyed::fair_share;

/// The set-wide counts.
#[derive(Debug, Default)]
pub(crate) struct SetTally {
    held: AtomicUsize,
    /// Destinations holding at least one job.
    busy: AtomicUsize,
}

impl SetTally {
    pub(crate) fn held(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }
}

/// One destination's count.
#[derive(Debug)]
pub(crate) struct Tally {
    held: AtomicUsize,
    set: Arc<SetTally>,
}

impl Tally {
    pub(crate) fn new(set: Arc<SetTally>) -> Self {
        Tally {
            held: AtomicUsize::new(0),
            set,
        }
    }

    /// Jobs this destination holds.
    pub(crate) fn held(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }

    /// Counts one more job if the rule lets it in; undo with
    /// [`finished`](Self::finished) if it is then not admitted.
    pub(crate) fn try_hold(&self, max: usize) -> bool {
        let own = self.held.fetch_add(1, Ordering::SeqCst);
        if own == 0 {
            self.set.busy.fetch_add(1, Ordering::SeqCst);
        }
        let total = self.set.held.fetch_add(1, Ordering::SeqCst);
        let busy = self.set.busy.load(Ordering::SeqCst);
        if fair_share(total, own, busy, max) {
            true
        } else {
            self.finished();
            false
        }
    }

    /// Counts `n` jobs recovered from the journal, whatever the bound says:
    /// they were admitted before the restart.
    #[cfg(feature = "journal")]
    pub(crate) fn hold_recovered(&self, n: usize) {
        if n == 0 {
            return;
        }
        if self.held.fetch_add(n, Ordering::SeqCst) == 0 {
            self.set.busy.fetch_add(1, Ordering::SeqCst);
        }
        self.set.held.fetch_add(n, Ordering::SeqCst);
    }

    /// A held job ended (or was not admitted after all).
    pub(crate) fn finished(&self) {
        if self.held.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.set.busy.fetch_sub(1, Ordering::SeqCst);
        }
        self.set.held.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_holds_and_ends() {
        let set = Arc::new(SetTally::default());
        let flood = Tally::new(set.clone());
        let quiet = Tally::new(set.clone());
        let mut admitted = 0;
        while flood.try_hold(8) {
            admitted += 1;
        }
        assert_eq!(admitted, 6, "past 3/4 the flooded one is above its share");
        assert!(quiet.try_hold(8), "the quiet one still gets in");
        assert!(quiet.try_hold(8));
        assert!(!quiet.try_hold(8), "the set is full");
        assert_eq!((set.held(), set.busy.load(Ordering::SeqCst)), (8, 2));
        for _ in 0..6 {
            flood.finished();
        }
        assert_eq!((flood.held(), set.held()), (0, 2));
        assert_eq!(set.busy.load(Ordering::SeqCst), 1);
    }
}
