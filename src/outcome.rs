//! Where every job ends: the [`Outcome`] enum, the counters behind it and the
//! [`Stats`] snapshot.
//!
//! The accounting identity: every job passed to a submit call is counted in
//! exactly one outcome, or is still queued, in flight (or waiting for a
//! retry). [`Stats::submitted`] adds them all up.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::Reason;
use crate::overflow::Overflow;

/// A job's terminal outcome.
///
/// ```
/// use dripfeed::Outcome;
/// assert_eq!(Outcome::DeadLettered.as_str(), "dead_lettered");
/// assert_eq!(Outcome::ALL.len(), 8);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Outcome {
    /// The downstream answered [`Delivery::Done`](crate::Delivery::Done).
    Delivered,
    /// Handed back at submit ([`Rejected`](crate::Rejected)).
    Refused,
    /// Pushed out of a full queue by a newer job (head-drop), handed to `on_evicted`.
    Evicted,
    /// Past its deadline when drained, and no dead-letter sink took it; handed to `on_expired`.
    Expired,
    /// Taken by the dead-letter sink (overflow, expiry, failure, shutdown leftover).
    DeadLettered,
    /// Left in the queue at shutdown with no sink to take it; handed back in the report.
    Returned,
    /// Delivery failed for good and no dead-letter sink took it; handed to `on_failed`.
    Failed,
    /// Withdrawn by its caller while queued (a dropped [`Slots::acquire`](crate::Slots::acquire)).
    Cancelled,
}

impl Outcome {
    /// Every outcome, in a fixed order (the metrics' label order).
    pub const ALL: [Outcome; 8] = [
        Outcome::Delivered,
        Outcome::Refused,
        Outcome::Evicted,
        Outcome::Expired,
        Outcome::DeadLettered,
        Outcome::Returned,
        Outcome::Failed,
        Outcome::Cancelled,
    ];

    /// The `outcome` label of `leaky_bucket_jobs_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Delivered => "delivered",
            Outcome::Refused => "refused",
            Outcome::Evicted => "evicted",
            Outcome::Expired => "expired",
            Outcome::DeadLettered => "dead_lettered",
            Outcome::Returned => "returned",
            Outcome::Failed => "failed",
            Outcome::Cancelled => "cancelled",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// The shared counters. Producers touch only the refusal and overflow ones,
/// and only when they refuse or overflow.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) outcomes: [AtomicU64; 8],
    pub(crate) rejected: [AtomicU64; 4],
    pub(crate) overflow: [AtomicU64; 3],
    pub(crate) emitted: AtomicU64,
    pub(crate) expired: AtomicU64,
    pub(crate) delivery_failures: AtomicU64,
    /// Jobs that left the ring: popped by the drain or evicted by head-drop.
    pub(crate) left_ring: AtomicU64,
    /// Deliveries running.
    pub(crate) in_flight: AtomicU64,
    /// Jobs waiting for a retry.
    pub(crate) retry_wait: AtomicU64,
    /// Retries scheduled.
    pub(crate) retried: AtomicU64,
}

pub(crate) fn load(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

pub(crate) fn bump(a: &AtomicU64) {
    a.fetch_add(1, Ordering::Relaxed);
}

/// A snapshot of a throttle's counts and gauges.
///
/// Counts are read one by one, so a snapshot taken while jobs move may be
/// off by the jobs that moved during the read; once the throttle is quiet
/// (or shut down) the accounting identity holds exactly.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use dripfeed::{Delivery, Outcome, Throttle};
/// use std::time::Duration;
/// let (throttle, _drain) = Throttle::builder()
///     .drain_rate(100.0)
///     .build(|_job: &u32, _attempt| async { Delivery::Done })
///     .unwrap();
/// for i in 0..10 {
///     throttle.try_submit(i).unwrap();
/// }
/// tokio::time::sleep(Duration::from_secs(1)).await;
/// let stats = throttle.stats();
/// assert_eq!(stats.outcome(Outcome::Delivered), 10);
/// assert_eq!(stats.submitted(), 10);
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// Jobs waiting in the ring (including pushes under way).
    pub depth: u64,
    /// The current admission bound.
    pub capacity: u64,
    /// The ring's allocated size (the bound at `max_rate`).
    pub ring_capacity: u64,
    /// The current drain rate, jobs per second.
    pub drain_rate: f64,
    /// Deliveries running.
    pub in_flight: u64,
    /// Jobs waiting for a retry (outside the ring).
    pub retry_wait: u64,
    /// Retries scheduled so far.
    pub retried: u64,
    /// Jobs admitted into the ring.
    pub admitted: u64,
    /// Jobs handed to the downstream (each attempt counts).
    pub emitted: u64,
    /// Terminal outcomes, indexed like [`Outcome::ALL`].
    pub outcomes: [u64; 8],
    /// Refusals by reason, indexed like [`Reason::ALL`].
    pub rejected: [u64; 4],
    /// Overflow events by policy, indexed like [`Overflow::ALL`].
    pub overflow: [u64; 3],
    /// Jobs found past their deadline.
    pub expired: u64,
    /// Failed delivery attempts (failures, timeouts, panics).
    pub delivery_failures: u64,
    /// Emission is paused.
    pub paused: bool,
    /// The throttle admits nothing more.
    pub closed: bool,
}

impl Stats {
    /// Jobs that ended in `outcome`.
    pub fn outcome(&self, outcome: Outcome) -> u64 {
        self.outcomes[outcome.index()]
    }

    /// Jobs delivered.
    pub fn delivered(&self) -> u64 {
        self.outcome(Outcome::Delivered)
    }

    /// Refusals for `reason`.
    pub fn rejected(&self, reason: Reason) -> u64 {
        self.rejected[reason.index()]
    }

    /// Overflow events under `policy`.
    pub fn overflow(&self, policy: Overflow) -> u64 {
        self.overflow[policy.index()]
    }

    /// Jobs that reached a terminal outcome.
    pub fn finished(&self) -> u64 {
        self.outcomes.iter().sum()
    }

    /// Every job ever passed to a submit call: finished, queued, in flight or waiting for a retry.
    pub fn submitted(&self) -> u64 {
        self.finished() + self.depth + self.in_flight + self.retry_wait
    }
}

impl Counters {
    pub(crate) fn outcome(&self, outcome: Outcome) {
        bump(&self.outcomes[outcome.index()]);
    }

    pub(crate) fn snapshot_into(&self, stats: &mut Stats) {
        for (dst, src) in stats.outcomes.iter_mut().zip(&self.outcomes) {
            *dst = load(src);
        }
        for (dst, src) in stats.rejected.iter_mut().zip(&self.rejected) {
            *dst = load(src);
        }
        // Refusals are counted once, by reason.
        stats.outcomes[Outcome::Refused.index()] = stats.rejected.iter().sum();
        for (dst, src) in stats.overflow.iter_mut().zip(&self.overflow) {
            *dst = load(src);
        }
        stats.emitted = load(&self.emitted);
        stats.expired = load(&self.expired);
        stats.delivery_failures = load(&self.delivery_failures);
        stats.in_flight = load(&self.in_flight);
        stats.retry_wait = load(&self.retry_wait);
        stats.retried = load(&self.retried);
    }
}
