//! The throttle's clock: nanoseconds since the throttle was built, with a
//! coarse copy that producers read without a system call.
//!
//! Producers stamp each job with its admission time so the drain can record
//! the queue wait. Reading the real clock costs more than the rest of an
//! admission, so producers read `coarse`, which the drain refreshes on every
//! wake (at least every [`COARSE_REFRESH`] while jobs wait). The producer that
//! makes the queue non-empty reads the real clock, since the drain may have
//! slept for a long time before it. Deadlines always use the real clock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// The longest the drain lets the coarse clock go stale while jobs wait.
pub(crate) const COARSE_REFRESH: Duration = Duration::from_millis(10);

pub(crate) struct Clock {
    epoch: Instant,
    coarse: AtomicU64,
}

impl Clock {
    pub(crate) fn new() -> Self {
        Clock {
            epoch: Instant::now(),
            coarse: AtomicU64::new(0),
        }
    }

    /// Nanoseconds from the epoch to `at` (0 before the epoch, saturating far after).
    #[inline]
    pub(crate) fn ns(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    /// The instant `ns` nanoseconds after the epoch.
    pub(crate) fn instant(&self, ns: u64) -> Instant {
        // Far enough to mean "never", near enough not to overflow an Instant.
        const FAR: Duration = Duration::from_secs(100 * 365 * 86_400);
        self.epoch + Duration::from_nanos(ns).min(FAR)
    }

    /// Reads the real clock and refreshes the coarse copy.
    #[inline]
    pub(crate) fn precise(&self) -> u64 {
        let now = self.ns(Instant::now());
        self.coarse.fetch_max(now, Ordering::Relaxed);
        now
    }

    /// The coarse copy: at most one drain wake old while jobs wait.
    #[inline]
    pub(crate) fn coarse(&self) -> u64 {
        self.coarse.load(Ordering::Relaxed)
    }

    /// Called by the drain with the time it just read.
    pub(crate) fn refresh(&self, now_ns: u64) {
        self.coarse.fetch_max(now_ns, Ordering::Relaxed);
    }
}

/// The wall clock now, in ms since the Unix epoch (0 for a clock set
/// before it): for times a record keeps across a restart, which the
/// throttle's own clock (tokio's, from its build) cannot say.
#[cfg(feature = "journal")]
pub(crate) fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn coarse_follows_refresh_and_precise() {
        let clock = Clock::new();
        assert_eq!(clock.coarse(), 0);
        tokio::time::advance(Duration::from_millis(5)).await;
        assert_eq!(clock.coarse(), 0, "coarse does not move by itself");
        assert_eq!(clock.precise(), 5_000_000);
        assert_eq!(clock.coarse(), 5_000_000);
        clock.refresh(1_000);
        assert_eq!(clock.coarse(), 5_000_000, "never goes backwards");
        assert_eq!(clock.ns(clock.instant(42)), 42);
    }
}
