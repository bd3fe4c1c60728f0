//! Delivery latencies for the status line: an HDR histogram the deliveries
//! record into and the status line reads (and resets) once a second.

use std::sync::Mutex;
use std::time::Duration;

use hdrhistogram::Histogram;

/// Microseconds, 3 significant figures, up to an hour.
pub(crate) struct Latencies(Mutex<Option<Histogram<u64>>>);

/// A histogram of microseconds up to an hour, with `figures` significant
/// figures; `None` only if hdrhistogram ever refused these constant bounds.
pub(crate) fn histogram(figures: u8) -> Option<Histogram<u64>> {
    Histogram::new_with_bounds(1, 3_600_000_000, figures).ok()
}

/// `latency` as a histogram records it: whole microseconds, at least 1.
pub(crate) fn micros(latency: Duration) -> u64 {
    u64::try_from(latency.as_micros())
        .unwrap_or(u64::MAX)
        .max(1)
}

impl Default for Latencies {
    fn default() -> Self {
        // Constant bounds that hdrhistogram accepts; None only if it ever refused them.
        Latencies(Mutex::new(histogram(3)))
    }
}

impl Latencies {
    /// Records one delivery's latency.
    pub(crate) fn record(&self, latency: Duration) {
        let mut h = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(h) = h.as_mut() {
            h.saturating_record(micros(latency));
        }
    }

    /// The p99 since the last call, then starts afresh; `None` when nothing was recorded.
    pub(crate) fn take_p99(&self) -> Option<Duration> {
        let mut h = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let h = h.as_mut()?;
        let p99 = (!h.is_empty()).then(|| Duration::from_micros(h.value_at_quantile(0.99)));
        h.reset();
        p99
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_p99_is_read_and_reset() {
        let l = Latencies::default();
        assert_eq!(l.take_p99(), None);
        for ms in 1..=100 {
            l.record(Duration::from_millis(ms));
        }
        let p99 = l.take_p99().unwrap();
        assert!(
            p99 >= Duration::from_millis(98) && p99 <= Duration::from_millis(100),
            "{p99:?}"
        );
        assert_eq!(l.take_p99(), None, "read and reset");
    }
}
