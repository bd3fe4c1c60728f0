//! The gate between a destination's drain and its breaker: the drain asks
//! it before each emission, every delivery reports to it, and it keeps the
//! breaker's metrics. It lives as long as the destination, across the
//! throttles the destination is given while it has work, so it keeps its own
//! time base.

use std::sync::Mutex;

use metrics::{Counter, Gauge, Label, counter, gauge};
use tokio::time::Instant;

use super::breaker::{Breaker, BreakerConfig, BreakerState, Change, Pass};
use super::nanos;
use crate::accounting::metrics::{BREAKER_OPEN, BREAKER_OPENED};
use crate::{AttemptEnd, Delivery};

pub(crate) struct Gate {
    epoch: Instant,
    breaker: Option<Mutex<Breaker>>,
    series: Mutex<Series>,
}

/// The breaker's series, under the destination's label.
struct Series {
    open: Gauge,
    opened: Counter,
}

impl Series {
    fn of(name: &str, destination: &str) -> Series {
        let labels = vec![
            Label::new("throttle", name.to_owned()),
            Label::new("destination", destination.to_owned()),
        ];
        Series {
            open: gauge!(BREAKER_OPEN, labels.clone()),
            opened: counter!(BREAKER_OPENED, labels),
        }
    }
}

/// Whether an attempt's end counts against the breaker: `None` for a live
/// receiver asking to slow down (a retry with a hint).
fn failed(ended: AttemptEnd) -> Option<bool> {
    match ended {
        AttemptEnd::Answered(Delivery::Done) => Some(false),
        AttemptEnd::Answered(Delivery::Retry { after: Some(_) }) => None,
        _ => Some(true),
    }
}

impl Gate {
    /// A gate for `destination` of the set `name`; no breaker when `cfg` is `None`.
    pub(crate) fn new(name: &str, destination: &str, cfg: Option<BreakerConfig>) -> Self {
        Gate {
            epoch: Instant::now(),
            breaker: cfg.map(|c| Mutex::new(Breaker::new(c))),
            series: Mutex::new(Series::of(name, destination)),
        }
    }

    /// Moves its series to the label `destination` (an open breaker's
    /// count with it).
    pub(crate) fn relabel(&self, name: &str, destination: &str) {
        let next = Series::of(name, destination);
        let mut series = self.series.lock().unwrap_or_else(|p| p.into_inner());
        if self.state() != BreakerState::Closed {
            series.open.decrement(1.0);
            next.open.increment(1.0);
        }
        *series = next;
    }

    fn ns(&self, at: Instant) -> u64 {
        nanos(at.saturating_duration_since(self.epoch))
    }

    fn with<T>(&self, default: T, f: impl FnOnce(&mut Breaker) -> T) -> T {
        match &self.breaker {
            Some(b) => f(&mut b.lock().unwrap_or_else(|p| p.into_inner())),
            None => default,
        }
    }

    /// What the drain may send at `at`; `Until` is returned as an instant.
    pub(crate) fn pass(&self, at: Instant) -> Result<Pass, Instant> {
        let now = self.ns(at);
        match self.with(Pass::Send, |b| b.pass(now)) {
            Pass::Until(ns) => Err(self.epoch + std::time::Duration::from_nanos(ns)),
            pass => Ok(pass),
        }
    }

    /// The probe was sent.
    pub(crate) fn probing(&self) {
        self.with((), Breaker::probing);
    }

    /// An attempt of `destination` ended; whether the breaker changed
    /// state.
    pub(crate) fn record(&self, destination: &str, ended: AttemptEnd) -> bool {
        let failed = failed(ended);
        if failed.is_none() && self.state() != BreakerState::HalfOpen {
            return false; // a hint counts only as a probe's answer
        }
        let now = self.ns(Instant::now());
        // The series first, then the breaker (as `relabel` takes them): a
        // change and its count land under the same label.
        let series = self.series.lock().unwrap_or_else(|p| p.into_inner());
        let (before, change) = self.with((BreakerState::Closed, Change::None), |b| {
            let before = b.state();
            let change = match failed {
                Some(failed) => b.record(now, failed),
                None => b.hinted(now),
            };
            (before, change)
        });
        match change {
            Change::None => false,
            Change::Opened => {
                series.opened.increment(1);
                if before == BreakerState::Closed {
                    series.open.increment(1.0);
                }
                tracing::warn!(destination, "destination breaker opened");
                true
            }
            Change::Closed => {
                series.open.decrement(1.0);
                tracing::info!(destination, "destination breaker closed");
                true
            }
        }
    }

    /// The breaker's state.
    pub(crate) fn state(&self) -> BreakerState {
        self.with(BreakerState::Closed, |b| b.state())
    }

    /// Times the breaker opened.
    pub(crate) fn opened(&self) -> u64 {
        self.with(0, |b| b.opened())
    }

    /// How long until a probe may go (zero unless open).
    pub(crate) fn remaining(&self) -> std::time::Duration {
        let now = self.ns(Instant::now());
        self.with(std::time::Duration::ZERO, |b| b.remaining(now))
    }
}
