//! Adaptive drain rate: a sliding latency window feeding an AIMD controller.
//!
//! The drain records every delivery in a [`LatencyWindow`] and, once per
//! interval, asks [`Aimd::decide`] for the next rate:
//!
//! ```
//! use std::time::Duration;
//! use dripfeed::rate::{Action, AimdConfig, LatencyWindow};
//! use tokio::time::Instant;
//!
//! let mut window = LatencyWindow::new(Duration::from_secs(5), 5)?;
//! let mut aimd = AimdConfig::default().build()?;
//! let now = Instant::now();
//! for _ in 0..100 {
//!     window.record(now, Duration::from_millis(30));
//! }
//! let decision = aimd.decide(now, 50.0, &window.summary(now), true);
//! assert_eq!(decision.action, Action::Increase);
//! assert_eq!(decision.rate, 56.0); // start-up steps are at most 12 %
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod aimd;
mod latency;
mod summary;
mod tally;

pub use aimd::{Action, Aimd, AimdConfig, AimdError, Decision, HoldReason, MAX_PAUSE, Signal};
pub use latency::{
    DEFAULT_SUB_WINDOWS, DEFAULT_WINDOW, LatencyWindow, MAX_SUB_WINDOWS, WindowError,
};
pub use summary::WindowSummary;
pub use tally::Tally;
