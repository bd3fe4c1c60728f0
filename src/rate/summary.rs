//! What a window of delivery outcomes saw ([`WindowSummary`]): what a
//! [`LatencyWindow`](super::LatencyWindow) and a [`Tally`](super::Tally)
//! report, and what the AIMD controller decides from.

use std::time::Duration;

/// What the window saw over its live span, as returned by
/// [`LatencyWindow::summary`](super::LatencyWindow::summary).
///
/// Latencies describe successful deliveries only (`samples` of them), each
/// reported at the top of its tally bucket: at most 6.25 % above a
/// recorded value and never below it. `failure_share` is `(failures + timeouts) / attempts`, where attempts also
/// count successes and congestion answers; it is `0.0` when nothing happened.
///
/// ```
/// use dripfeed::rate::WindowSummary;
/// let empty = WindowSummary::default();
/// assert_eq!(empty.samples, 0);
/// assert_eq!(empty.attempts(), 0);
/// assert_eq!(empty.failure_share, 0.0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct WindowSummary {
    /// Successful deliveries recorded with a latency.
    pub samples: u64,
    /// Median latency of the successful deliveries.
    pub p50: Duration,
    /// 99th percentile latency of the successful deliveries.
    pub p99: Duration,
    /// Largest latency (saturated at 60 s).
    pub max: Duration,
    /// Failed deliveries.
    pub failures: u64,
    /// Deliveries that timed out.
    pub timeouts: u64,
    /// Downstream "slow down" answers (429 or 503).
    pub congestion: u64,
    /// `(failures + timeouts) / attempts`, in `[0, 1]`.
    pub failure_share: f64,
    /// Largest `Retry-After` hint seen with a congestion answer.
    pub retry_hint: Option<Duration>,
    /// Successful deliveries per second over the span the window has
    /// seen (0: not known yet, under one sub-window): what the downstream
    /// delivers, its capacity when the drain overruns it.
    pub throughput: f64,
}

impl WindowSummary {
    /// Every recorded outcome: successes, failures, timeouts and congestion.
    ///
    /// ```
    /// use dripfeed::rate::WindowSummary;
    /// let s = WindowSummary { samples: 90, failures: 6, timeouts: 3, congestion: 1, ..Default::default() };
    /// assert_eq!(s.attempts(), 100);
    /// ```
    pub fn attempts(&self) -> u64 {
        self.samples
            .saturating_add(self.failures)
            .saturating_add(self.timeouts)
            .saturating_add(self.congestion)
    }
}
