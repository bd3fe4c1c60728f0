//! The fair-share rule at a shared bound: how the last places of a queue
//! (or of any bound several holders share) are kept for those holding
//! less than their share, so one flooding holder cannot crowd the others
//! out.
//!
//! A bound of `max` places refuses everyone once full. Below three quarters
//! of it, everyone gets in. From three quarters on, a holder gets in only
//! while it holds less than an equal share counting one holder more than
//! hold places now: `max / (holders + 1)`. So the holders with the most
//! places get the refusals first, and the last quarter stays for those
//! below their share and for newcomers.
//!
//! A throttle applies it to the keys (a [`Submission`](crate::Submission)
//! with a key) queued in its ring, the
//! destinations set to the destinations holding jobs.

/// Whether a holder holding `own` places may take one more when `total`
/// are taken (the new one not included) of `max`, with `holders` holding at
/// least one (itself included if it holds any).
///
/// ```
/// use dripfeed::keyed::fair_share;
/// assert!(fair_share(74, 74, 1, 100), "below 3/4: everyone");
/// assert!(!fair_share(75, 70, 2, 100), "70 of 100 is above a third");
/// assert!(fair_share(75, 5, 2, 100), "5 is below it");
/// assert!(fair_share(99, 0, 1, 100), "a newcomer gets the last places");
/// assert!(!fair_share(100, 0, 2, 100), "the bound is hard");
/// ```
pub fn fair_share(total: usize, own: usize, holders: usize, max: usize) -> bool {
    if total >= max {
        return false;
    }
    if total < max - max / 4 {
        return true;
    }
    own < max / (holders + 1)
}

#[cfg(test)]
mod tests {
    use super::fair_share;

    #[test]
    fn the_last_quarter_is_kept_for_holders_below_their_share() {
        assert!(fair_share(0, 0, 0, 100));
        assert!(fair_share(74, 74, 1, 100));
        assert!(
            !fair_share(75, 74, 1, 100),
            "alone, it leaves room for one more"
        );
        assert!(fair_share(75, 49, 1, 100));
        assert!(
            !fair_share(75, 70, 2, 100),
            "70 of 100 is above a half share"
        );
        assert!(fair_share(75, 5, 2, 100), "5 is below it");
        assert!(!fair_share(100, 0, 2, 100), "the bound is hard");
    }
}
