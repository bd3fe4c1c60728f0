//! Delivery latencies for the status line: an HDR histogram the deliveries
//! record into and the status line reads (and resets) once a second.

use std::sync::Mutex;
use std::time::Duration;

use hdrhistogram::Histogram;

/// Microseconds, 3 significant figures, up to an hour.
pub struct Latencies(Mutex<Histogram<u64>>);

impl Latencies {
    pub fn new() -> Self {
        let h = Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds");
        Latencies(Mutex::new(h))
    }

    pub fn record(&self, latency: Duration) {
        let micros = u64::try_from(latency.as_micros())
            .unwrap_or(u64::MAX)
            .max(1);
        let mut h = self.0.lock().unwrap_or_else(|p| p.into_inner());
        h.saturating_record(micros);
    }

    /// The p99 since the last call, then starts afresh; `None` when nothing was recorded.
    pub fn take_p99(&self) -> Option<Duration> {
        let mut h = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let p99 = (!h.is_empty()).then(|| Duration::from_micros(h.value_at_quantile(0.99)));
        h.reset();
        p99
    }
}
