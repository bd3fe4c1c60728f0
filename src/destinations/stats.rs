//! What a set reports for each destination.

use crate::{Outcome, Stats};

use super::breaker::BreakerState;

/// Counts a destination keeps across the throttles it is given while it has
/// work (it holds none while idle).
#[derive(Debug, Clone, Default)]
pub(crate) struct Totals {
    pub(crate) delivered: u64,
    pub(crate) failed: u64,
    pub(crate) dead_lettered: u64,
    pub(crate) expired: u64,
    pub(crate) evicted: u64,
    pub(crate) kept: u64,
}

impl Totals {
    /// Adds a throttle's final counts.
    pub(crate) fn absorb(&mut self, s: &Stats) {
        self.delivered += s.delivered();
        self.failed += s.outcome(Outcome::Failed);
        self.dead_lettered += s.outcome(Outcome::DeadLettered);
        self.expired += s.outcome(Outcome::Expired);
        self.evicted += s.outcome(Outcome::Evicted);
        self.kept += s.outcome(Outcome::Kept);
    }
}

/// One destination's state and counts.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use dripfeed::destinations::{BreakerState, Destinations};
/// use dripfeed::{Delivery, Throttle};
/// use std::time::Duration;
/// let set = Destinations::builder(Throttle::builder().drain_rate(10.0))
///     .build(|_name: &str| |_: &u32, _| async { Delivery::Done })?;
/// set.try_submit("a", 1)?;
/// tokio::time::sleep(Duration::from_secs(2)).await; // delivered, then idle for 1 s
/// let a = set.stats("a").unwrap();
/// assert_eq!((a.accepted(), a.delivered(), a.depth()), (1, 1, 0));
/// assert_eq!(a.breaker(), BreakerState::Closed);
/// assert!(!a.is_active(), "idle: it holds no throttle");
/// assert_eq!(a.activations(), 1);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct DestinationStats {
    pub(crate) name: String,
    pub(crate) named: bool,
    pub(crate) active: bool,
    pub(crate) depth: u64,
    pub(crate) in_flight: u64,
    pub(crate) held: u64,
    pub(crate) rate: f64,
    pub(crate) capacity: u64,
    pub(crate) accepted: u64,
    pub(crate) refused: u64,
    pub(crate) activations: u64,
    pub(crate) totals: Totals,
    pub(crate) breaker: BreakerState,
    pub(crate) opened: u64,
}

impl DestinationStats {
    /// The destination's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether it was named in the set's configuration (and has its own metrics series).
    pub fn is_named(&self) -> bool {
        self.named
    }

    /// Whether it has a throttle now (work queued, waiting or in flight).
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// Jobs queued.
    pub fn depth(&self) -> u64 {
        self.depth
    }

    /// Deliveries running.
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// Jobs held against the set's bound: queued, waiting for a retry, in flight.
    pub fn held(&self) -> u64 {
        self.held
    }

    /// The drain rate now, or the rate it will start at when next active.
    pub fn drain_rate(&self) -> f64 {
        self.rate
    }

    /// The admission bound now; while idle, the bound it would start with
    /// (its budget × the rate it would start at).
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Jobs accepted.
    pub fn accepted(&self) -> u64 {
        self.accepted
    }

    /// Jobs refused (its queue full, the set's bound, or closed).
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Jobs delivered.
    pub fn delivered(&self) -> u64 {
        self.totals.delivered
    }

    /// Jobs whose delivery failed for good (not taken by a dead-letter sink).
    pub fn failed(&self) -> u64 {
        self.totals.failed
    }

    /// Jobs handed to the dead-letter sink.
    pub fn dead_lettered(&self) -> u64 {
        self.totals.dead_lettered
    }

    /// Jobs that expired in the queue.
    pub fn expired(&self) -> u64 {
        self.totals.expired
    }

    /// Jobs evicted by head-drop.
    pub fn evicted(&self) -> u64 {
        self.totals.evicted
    }

    /// Throttles made for it so far: one each time it became active after
    /// being idle (its ring, task and metrics handles are made then).
    pub fn activations(&self) -> u64 {
        self.activations
    }

    /// Jobs left in the set's journal at shutdown for the next start.
    pub fn kept(&self) -> u64 {
        self.totals.kept
    }

    /// The breaker's state.
    pub fn breaker(&self) -> BreakerState {
        self.breaker
    }

    /// Times its breaker opened.
    pub fn breaker_opened(&self) -> u64 {
        self.opened
    }
}
