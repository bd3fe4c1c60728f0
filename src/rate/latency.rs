//! Sliding window of delivery outcomes: p50, p99 and max latency plus
//! failure, timeout and congestion counts over the last few seconds.
//!
//! The window is a ring of sub-windows, each a [`Tally`]: latencies in
//! logarithmic buckets 1/16 of a power of two wide, so a quantile is within
//! 6.25 % above the value it stands for, and a window holds a few hundred
//! bytes per sub-window that saw deliveries (nothing for one that saw none).
//! Time comes from the caller (`now`), so the window is tested without a
//! runtime and follows tokio's paused clock.
//!
//! ```
//! use dripfeed::rate::{LatencyWindow, DEFAULT_SUB_WINDOWS, DEFAULT_WINDOW};
//! let w = LatencyWindow::new(DEFAULT_WINDOW, DEFAULT_SUB_WINDOWS)?;
//! assert_eq!(w.span(), DEFAULT_WINDOW);
//! # Ok::<(), dripfeed::rate::WindowError>(())
//! ```

use std::error::Error;
use std::fmt;
use std::time::Duration;

use tokio::time::Instant;

use super::summary::WindowSummary;
use super::tally::Tally;

/// Default span of the window: the last 5 seconds.
///
/// ```
/// assert_eq!(dripfeed::rate::DEFAULT_WINDOW.as_secs(), 5);
/// ```
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(5);
/// Default number of sub-windows: 5 sub-windows of 1 second.
///
/// ```
/// assert_eq!(dripfeed::rate::DEFAULT_SUB_WINDOWS, 5);
/// ```
pub const DEFAULT_SUB_WINDOWS: usize = 5;
/// Largest number of sub-windows accepted by [`LatencyWindow::new`].
///
/// ```
/// use std::time::Duration;
/// use dripfeed::rate::{LatencyWindow, MAX_SUB_WINDOWS};
/// assert!(LatencyWindow::new(Duration::from_secs(64), MAX_SUB_WINDOWS).is_ok());
/// assert!(LatencyWindow::new(Duration::from_secs(65), MAX_SUB_WINDOWS + 1).is_err());
/// ```
pub const MAX_SUB_WINDOWS: usize = 64;

/// Why a [`LatencyWindow`] could not be built.
///
/// ```
/// use dripfeed::rate::WindowError;
/// assert_eq!(WindowError::ZeroWindow.to_string(), "latency window must be longer than zero");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowError {
    /// The window span was zero.
    ZeroWindow,
    /// The sub-window count was zero or above [`MAX_SUB_WINDOWS`].
    SubWindows(usize),
    /// A sub-window would be shorter than one millisecond.
    SubWindowTooShort,
}

impl fmt::Display for WindowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroWindow => f.write_str("latency window must be longer than zero"),
            Self::SubWindows(n) => write!(
                f,
                "sub-window count must be in 1..={MAX_SUB_WINDOWS}, got {n}"
            ),
            Self::SubWindowTooShort => f.write_str("sub-windows must be at least 1 ms long"),
        }
    }
}

impl Error for WindowError {}

/// One sub-window: the outcomes of one slice of time.
#[derive(Debug, Default)]
struct Slot {
    /// Index of the time slice this slot holds (`elapsed / sub_len`).
    epoch: u64,
    tally: Tally,
}

impl Slot {
    fn clear(&mut self, epoch: u64) {
        if !self.tally.is_empty() {
            self.tally = Tally::default();
        }
        self.epoch = epoch;
    }
}

/// A sliding window of delivery latency and outcomes over the last few
/// seconds, as a ring of sub-window tallies rotated on the caller's clock.
///
/// Latencies go into logarithmic buckets (1/16 of a power of two wide) from
/// 1 µs to 60 s; longer ones saturate, and a quantile is reported at the
/// top of its bucket (at most 6.25 % above). The live span is the current
/// (partial) sub-window plus the `sub_windows - 1` before it; older
/// sub-windows are cleared when the ring rotates past them, so a gap longer
/// than the window clears everything. A `now` earlier than one already
/// seen counts as the latest one seen. A window that saw nothing holds no
/// memory beyond its ring of empty slots.
///
/// ```
/// use std::time::Duration;
/// use dripfeed::rate::LatencyWindow;
/// use tokio::time::Instant;
///
/// let mut w = LatencyWindow::new(Duration::from_secs(5), 5)?;
/// let t0 = Instant::now();
/// for i in 1..=100u64 {
///     w.record(t0, Duration::from_millis(i));
/// }
/// let s = w.summary(t0);
/// assert_eq!(s.samples, 100);
/// assert!((50..=53).contains(&s.p50.as_millis()), "within a bucket");
/// assert!((99..=105).contains(&s.p99.as_millis()));
/// // Ten seconds later every sample has left the window.
/// assert_eq!(w.summary(t0 + Duration::from_secs(10)).samples, 0);
/// # Ok::<(), dripfeed::rate::WindowError>(())
/// ```
#[derive(Debug)]
pub struct LatencyWindow {
    slots: Vec<Slot>,
    sub_len: Duration,
    origin: Option<Instant>,
    latest: u64,
}

impl LatencyWindow {
    /// A window spanning `window`, split into `sub_windows` equal slices.
    ///
    /// Fails on a zero window, a sub-window count outside
    /// `1..=MAX_SUB_WINDOWS`, or slices shorter than 1 ms.
    ///
    /// ```
    /// use std::time::Duration;
    /// use dripfeed::rate::{LatencyWindow, WindowError};
    /// assert!(LatencyWindow::new(Duration::from_secs(5), 5).is_ok());
    /// assert_eq!(LatencyWindow::new(Duration::ZERO, 5).unwrap_err(), WindowError::ZeroWindow);
    /// assert_eq!(LatencyWindow::new(Duration::from_secs(5), 0).unwrap_err(), WindowError::SubWindows(0));
    /// ```
    pub fn new(window: Duration, sub_windows: usize) -> Result<Self, WindowError> {
        if window.is_zero() {
            return Err(WindowError::ZeroWindow);
        }
        if sub_windows == 0 || sub_windows > MAX_SUB_WINDOWS {
            return Err(WindowError::SubWindows(sub_windows));
        }
        // sub_windows <= 64, so the cast is exact.
        let sub_len = window / sub_windows as u32;
        if sub_len < Duration::from_millis(1) {
            return Err(WindowError::SubWindowTooShort);
        }
        let slots = (0..sub_windows).map(|_| Slot::default()).collect();
        Ok(Self {
            slots,
            sub_len,
            origin: None,
            latest: 0,
        })
    }

    /// The window's full span (`sub_windows` × sub-window length).
    ///
    /// ```
    /// use std::time::Duration;
    /// use dripfeed::rate::LatencyWindow;
    /// let w = LatencyWindow::new(Duration::from_secs(5), 5)?;
    /// assert_eq!(w.span(), Duration::from_secs(5));
    /// # Ok::<(), dripfeed::rate::WindowError>(())
    /// ```
    pub fn span(&self) -> Duration {
        // At most MAX_SUB_WINDOWS slots.
        self.sub_len * self.slots.len() as u32
    }

    /// Records a successful delivery that took `latency`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use dripfeed::rate::LatencyWindow;
    /// use tokio::time::Instant;
    /// let mut w = LatencyWindow::new(Duration::from_secs(5), 5)?;
    /// let now = Instant::now();
    /// w.record(now, Duration::from_secs(3600)); // saturates at 60 s
    /// assert_eq!(w.summary(now).max.as_secs(), 60);
    /// # Ok::<(), dripfeed::rate::WindowError>(())
    /// ```
    pub fn record(&mut self, now: Instant, latency: Duration) {
        self.slot(now).tally.record(latency);
    }

    /// Records a failed delivery.
    ///
    /// ```
    /// use std::time::Duration;
    /// use dripfeed::rate::LatencyWindow;
    /// use tokio::time::Instant;
    /// let mut w = LatencyWindow::new(Duration::from_secs(5), 5)?;
    /// let now = Instant::now();
    /// w.record(now, Duration::from_millis(10));
    /// w.record_failure(now);
    /// assert_eq!(w.summary(now).failure_share, 0.5);
    /// # Ok::<(), dripfeed::rate::WindowError>(())
    /// ```
    pub fn record_failure(&mut self, now: Instant) {
        let t = &mut self.slot(now).tally;
        t.failures = t.failures.saturating_add(1);
    }

    /// Records a delivery that timed out.
    ///
    /// ```
    /// use std::time::Duration;
    /// use dripfeed::rate::LatencyWindow;
    /// use tokio::time::Instant;
    /// let mut w = LatencyWindow::new(Duration::from_secs(5), 5)?;
    /// let now = Instant::now();
    /// w.record_timeout(now);
    /// let s = w.summary(now);
    /// assert_eq!((s.timeouts, s.failure_share), (1, 1.0));
    /// # Ok::<(), dripfeed::rate::WindowError>(())
    /// ```
    pub fn record_timeout(&mut self, now: Instant) {
        let t = &mut self.slot(now).tally;
        t.timeouts = t.timeouts.saturating_add(1);
    }

    /// Records a downstream "slow down" answer (429 or 503), with its
    /// `Retry-After` hint if it gave one.
    ///
    /// ```
    /// use std::time::Duration;
    /// use dripfeed::rate::LatencyWindow;
    /// use tokio::time::Instant;
    /// let mut w = LatencyWindow::new(Duration::from_secs(5), 5)?;
    /// let now = Instant::now();
    /// w.record_congestion(now, Some(Duration::from_secs(2)));
    /// w.record_congestion(now, None);
    /// let s = w.summary(now);
    /// assert_eq!((s.congestion, s.retry_hint), (2, Some(Duration::from_secs(2))));
    /// # Ok::<(), dripfeed::rate::WindowError>(())
    /// ```
    pub fn record_congestion(&mut self, now: Instant, hint: Option<Duration>) {
        self.slot(now).tally.record_congestion(hint);
    }

    /// Merges the live sub-windows into a summary. Takes `&mut self` to
    /// rotate the ring.
    ///
    /// ```
    /// use std::time::Duration;
    /// use dripfeed::rate::LatencyWindow;
    /// use tokio::time::Instant;
    /// let mut w = LatencyWindow::new(Duration::from_secs(5), 5)?;
    /// let t0 = Instant::now();
    /// w.record(t0, Duration::from_millis(500));
    /// w.record(t0 + Duration::from_secs(3), Duration::from_millis(20));
    /// assert_eq!(w.summary(t0 + Duration::from_secs(4)).samples, 2);
    /// // After 5 s the first sub-window has rotated out.
    /// let s = w.summary(t0 + Duration::from_secs(5));
    /// assert_eq!((s.samples, s.max.as_millis()), (1, 20));
    /// // One success in the 4 s it spans at that instant: 0.25 a second.
    /// assert!((s.throughput - 0.25).abs() < 1e-9);
    /// # Ok::<(), dripfeed::rate::WindowError>(())
    /// ```
    pub fn summary(&mut self, now: Instant) -> WindowSummary {
        let current = self.advance(now);
        let live = self.slots.len() as u64;
        let mut all = Tally::default();
        for slot in &mut self.slots {
            if current.saturating_sub(slot.epoch) >= live {
                // Rotated past: clear it so stale data never resurfaces.
                slot.clear(current.saturating_sub(live));
                continue;
            }
            all.merge(&slot.tally);
        }
        let mut out = all.summary();
        // The span seen: the current sub-window so far and the full ones
        // before it that the window holds (none before the first record).
        let origin = self.origin.unwrap_or(now);
        let partial = now.saturating_duration_since(origin).saturating_sub(
            self.sub_len
                .saturating_mul(u32::try_from(current).unwrap_or(u32::MAX)),
        );
        let before = u32::try_from(current.min(live.saturating_sub(1))).unwrap_or(0);
        let span = partial.min(self.sub_len) + self.sub_len * before;
        if span >= self.sub_len {
            out.throughput = out.samples as f64 / span.as_secs_f64();
        }
        out
    }

    /// Index of the current sub-window, moving `latest` forward.
    fn advance(&mut self, now: Instant) -> u64 {
        let origin = *self.origin.get_or_insert(now);
        let elapsed = now.saturating_duration_since(origin).as_nanos();
        let sub = self.sub_len.as_nanos().max(1);
        let epoch = u64::try_from(elapsed / sub).unwrap_or(u64::MAX);
        self.latest = self.latest.max(epoch);
        self.latest
    }

    /// The slot for `now`, cleared first if it still holds an older epoch.
    fn slot(&mut self, now: Instant) -> &mut Slot {
        let epoch = self.advance(now);
        let len = self.slots.len() as u64;
        // len >= 1 by construction; the index is < len <= MAX_SUB_WINDOWS.
        let index = (epoch % len.max(1)) as usize;
        let slot = &mut self.slots[index];
        if slot.epoch != epoch {
            slot.clear(epoch);
        }
        slot
    }
}
