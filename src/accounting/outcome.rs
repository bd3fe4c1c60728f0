//! Where every job ends: the [`Outcome`] enum, the counters behind it and the
//! [`Stats`] snapshot.
//!
//! The accounting identity: every job passed to a submit call is counted in
//! exactly one outcome, or is still queued, in flight (or waiting for a
//! retry). [`Stats::submitted`] adds them all up.

use crate::admission::overflow::Overflow;
use crate::admission::reason::Reason;

/// A job's terminal outcome.
///
/// ```
/// use dripfeed::Outcome;
/// assert_eq!(Outcome::DeadLettered.as_str(), "dead_lettered");
/// assert_eq!(Outcome::ALL.len(), 9);
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
    /// Unfinished at shutdown and left in the journal, to be delivered by
    /// the next start on it (only with a journal).
    Kept,
}

impl Outcome {
    /// Every outcome, in a fixed order (the metrics' label order).
    pub const ALL: [Outcome; 9] = [
        Outcome::Delivered,
        Outcome::Refused,
        Outcome::Evicted,
        Outcome::Expired,
        Outcome::DeadLettered,
        Outcome::Returned,
        Outcome::Failed,
        Outcome::Cancelled,
        Outcome::Kept,
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
            Outcome::Kept => "kept",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
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
/// // Debug names every count
/// assert!(format!("{stats:?}").contains("outcomes: {delivered: 10, refused: 0,"));
/// # }
/// ```
#[derive(Clone, PartialEq)]
pub struct Stats {
    pub(crate) depth: u64,
    pub(crate) capacity: u64,
    pub(crate) ring_capacity: u64,
    pub(crate) drain_rate: f64,
    pub(crate) in_flight: u64,
    pub(crate) retry_wait: u64,
    pub(crate) retried: u64,
    pub(crate) admitted: u64,
    pub(crate) emitted: u64,
    /// Terminal outcomes, indexed like [`Outcome::ALL`]; `Refused` is the sum of `rejected`.
    pub(crate) outcomes: [u64; 9],
    pub(crate) rejected: Vec<(Reason, u64)>,
    pub(crate) overflow: [u64; 3],
    pub(crate) expired: u64,
    pub(crate) delivery_failures: u64,
    pub(crate) paused: bool,
    pub(crate) closed: bool,
}

impl Stats {
    /// Jobs waiting in the ring (including pushes under way).
    pub fn depth(&self) -> u64 {
        self.depth
    }

    /// The current admission bound.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The ring's allocated size (the bound at `max_rate`).
    pub fn ring_capacity(&self) -> u64 {
        self.ring_capacity
    }

    /// The current drain rate, jobs per second.
    pub fn drain_rate(&self) -> f64 {
        self.drain_rate
    }

    /// Deliveries running.
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// Jobs waiting for a retry (outside the ring).
    pub fn retry_wait(&self) -> u64 {
        self.retry_wait
    }

    /// Retries scheduled so far.
    pub fn retried(&self) -> u64 {
        self.retried
    }

    /// Jobs admitted into the ring.
    pub fn admitted(&self) -> u64 {
        self.admitted
    }

    /// Jobs handed to the downstream (each attempt counts).
    pub fn emitted(&self) -> u64 {
        self.emitted
    }

    /// Jobs found past their deadline.
    pub fn expired(&self) -> u64 {
        self.expired
    }

    /// Failed delivery attempts (failures, timeouts, panics).
    pub fn delivery_failures(&self) -> u64 {
        self.delivery_failures
    }

    /// Whether emission is paused.
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// Whether the throttle admits nothing more.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Jobs that ended in `outcome`.
    pub fn outcome(&self, outcome: Outcome) -> u64 {
        self.outcomes[outcome.index()]
    }

    /// Jobs delivered.
    pub fn delivered(&self) -> u64 {
        self.outcome(Outcome::Delivered)
    }

    /// Refusals for `reason` (0 for a reason never seen).
    pub fn rejected(&self, reason: Reason) -> u64 {
        self.rejected
            .iter()
            .find(|(r, _)| *r == reason)
            .map_or(0, |(_, n)| *n)
    }

    /// Every reason refused so far with its count (the fixed reasons always,
    /// then each unavailable cause seen).
    pub fn rejections(&self) -> impl Iterator<Item = (Reason, u64)> + '_ {
        self.rejected.iter().copied()
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

/// Counts with their names, for `Debug`.
struct Named<'a>(Vec<(&'a str, u64)>);

impl std::fmt::Debug for Named<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut map = f.debug_map();
        for (name, n) in &self.0 {
            map.key(&format_args!("{name}")).value(n);
        }
        map.finish()
    }
}

impl std::fmt::Debug for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let outcomes = Named(
            Outcome::ALL
                .iter()
                .map(|o| (o.as_str(), self.outcome(*o)))
                .collect(),
        );
        let rejected = Named(
            self.rejected
                .iter()
                .map(|(r, n)| (r.as_str(), *n))
                .collect(),
        );
        let overflow = Named(
            Overflow::ALL
                .iter()
                .map(|p| (p.as_str(), self.overflow(*p)))
                .collect(),
        );
        f.debug_struct("Stats")
            .field("depth", &self.depth)
            .field("capacity", &self.capacity)
            .field("ring_capacity", &self.ring_capacity)
            .field("drain_rate", &self.drain_rate)
            .field("in_flight", &self.in_flight)
            .field("retry_wait", &self.retry_wait)
            .field("admitted", &self.admitted)
            .field("emitted", &self.emitted)
            .field("retried", &self.retried)
            .field("outcomes", &outcomes)
            .field("rejected", &rejected)
            .field("overflow", &overflow)
            .field("expired", &self.expired)
            .field("delivery_failures", &self.delivery_failures)
            .field("paused", &self.paused)
            .field("closed", &self.closed)
            .finish()
    }
}
