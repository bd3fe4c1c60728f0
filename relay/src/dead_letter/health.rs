//! Whether the dead-letter file takes lines: set by the writer, read by
//! intake, which answers 503 while it does not (a 202 it could not keep if
//! the webhook failed). The wait it gives is the time until the writer
//! tries again.

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const WRITABLE: u8 = 0;
const FAILING: u8 = 1;
const FULL: u8 = 2;

/// The dead-letter file's state, shared by the writer and intake.
pub struct Health {
    state: AtomicU8,
    /// When the writer tries again, in ms since `epoch`.
    retry_at_ms: AtomicU64,
    epoch: Instant,
}

/// Why intake refuses while the dead-letter file takes no lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unavailable {
    /// The problem's kind: `dead-letter-unavailable` or `dead-letter-full`.
    pub kind: &'static str,
    /// The problem's detail (naming no path: the caller owns none).
    pub detail: &'static str,
    /// The time until the writer tries again.
    pub wait: Duration,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            state: AtomicU8::new(WRITABLE),
            retry_at_ms: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }
}

impl Health {
    /// `None` while lines can be written; else why not, and for how long.
    pub fn unavailable(&self) -> Option<Unavailable> {
        let (kind, detail) = match self.state.load(Ordering::Acquire) {
            WRITABLE => return None,
            FULL => (
                "dead-letter-full",
                "the relay's dead-letter files are full, so it cannot promise to keep a webhook \
                 that fails; retry later",
            ),
            _ => (
                "dead-letter-unavailable",
                "the relay cannot write its dead-letter file, so it cannot promise to keep a \
                 webhook that fails; retry later",
            ),
        };
        let now = self.ms(Instant::now());
        let at = self.retry_at_ms.load(Ordering::Relaxed);
        let wait = Duration::from_millis(at.saturating_sub(now)).max(Duration::from_millis(1));
        Some(Unavailable { kind, detail, wait })
    }

    /// Lines can be written (again).
    pub(super) fn writable(&self) {
        self.state.store(WRITABLE, Ordering::Release);
    }

    /// Lines cannot be written (`full`: every file is full); the writer
    /// tries again at `retry_at`.
    pub(super) fn failing(&self, full: bool, retry_at: Instant) {
        self.retry_at_ms.store(self.ms(retry_at), Ordering::Relaxed);
        self.state
            .store(if full { FULL } else { FAILING }, Ordering::Release);
    }

    fn ms(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_millis()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unavailable_until_writable_again_with_the_wait_until_the_next_try() {
        let h = Health::default();
        assert_eq!(h.unavailable(), None);
        h.failing(false, Instant::now() + Duration::from_secs(3));
        let u = h.unavailable().expect("failing");
        assert_eq!(u.kind, "dead-letter-unavailable");
        assert!(u.wait > Duration::from_secs(2) && u.wait <= Duration::from_secs(3));
        h.failing(true, Instant::now());
        assert_eq!(h.unavailable().map(|u| u.kind), Some("dead-letter-full"));
        h.writable();
        assert_eq!(h.unavailable(), None);
    }
}
