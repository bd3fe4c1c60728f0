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
    ///
    /// ```
    /// use dripfeed::Outcome;
    /// let labels: Vec<&str> = Outcome::ALL.iter().map(|o| o.as_str()).collect();
    /// assert_eq!(labels[..3], ["delivered", "refused", "evicted"]);
    /// assert_eq!(Outcome::ALL.last(), Some(&Outcome::Kept));
    /// ```
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
    ///
    /// ```
    /// use dripfeed::Outcome;
    /// assert_eq!(Outcome::Delivered.as_str(), "delivered");
    /// assert_eq!(Outcome::Cancelled.as_str(), "cancelled");
    /// ```
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
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// throttle.pause();
    /// throttle.try_submit(1).unwrap();
    /// throttle.try_submit(2).unwrap();
    /// assert_eq!(throttle.stats().depth(), 2);
    /// # }
    /// ```
    pub fn depth(&self) -> u64 {
        self.depth
    }

    /// The current admission bound.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .latency_budget(Duration::from_secs(3))
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// assert_eq!(throttle.stats().capacity(), 30, "3 s × 10/s");
    /// # }
    /// ```
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The ring's allocated size (the bound at `max_rate`).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .max_rate(40.0)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// let stats = throttle.stats();
    /// assert_eq!((stats.capacity(), stats.ring_capacity()), (10, 40), "room for the highest rate");
    /// # }
    /// ```
    pub fn ring_capacity(&self) -> u64 {
        self.ring_capacity
    }

    /// The current drain rate, jobs per second.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(25.0)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// assert_eq!(throttle.stats().drain_rate(), 25.0);
    /// # }
    /// ```
    pub fn drain_rate(&self) -> f64 {
        self.drain_rate
    }

    /// Deliveries running.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(100.0)
    ///     .build(|_: &u32, _| async {
    ///         tokio::time::sleep(Duration::from_secs(1)).await; // a slow receiver
    ///         Delivery::Done
    ///     })
    ///     .unwrap();
    /// for job in 0..3 {
    ///     throttle.try_submit(job).unwrap();
    /// }
    /// tokio::time::sleep(Duration::from_millis(500)).await;
    /// assert_eq!(throttle.stats().in_flight(), 3);
    /// # }
    /// ```
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// Jobs waiting for a retry (outside the ring).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, RetryPolicy, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .retries(RetryPolicy::new(3))
    ///     .build(|_: &u32, _| async { Delivery::Retry { after: Some(Duration::from_secs(5)) } })
    ///     .unwrap();
    /// throttle.try_submit(1).unwrap();
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// let stats = throttle.stats();
    /// assert_eq!((stats.retry_wait(), stats.depth()), (1, 0), "waiting outside the ring");
    /// # }
    /// ```
    pub fn retry_wait(&self) -> u64 {
        self.retry_wait
    }

    /// Retries scheduled so far.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Attempt, Delivery, RetryPolicy, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(100.0)
    ///     .retries(RetryPolicy::new(5))
    ///     .build(|_: &u32, attempt: Attempt| async move {
    ///         if attempt.number() < 3 { Delivery::Retry { after: None } } else { Delivery::Done }
    ///     })
    ///     .unwrap();
    /// throttle.try_submit(1).unwrap();
    /// tokio::time::sleep(Duration::from_secs(2)).await;
    /// assert_eq!(throttle.stats().retried(), 2);
    /// # }
    /// ```
    pub fn retried(&self) -> u64 {
        self.retried
    }

    /// Jobs admitted into the ring.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(1.0)
    ///     .capacity(2)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// for job in 0..3 {
    ///     let _ = throttle.try_submit(job); // the third is refused
    /// }
    /// assert_eq!(throttle.stats().admitted(), 2);
    /// # }
    /// ```
    pub fn admitted(&self) -> u64 {
        self.admitted
    }

    /// Jobs handed to the downstream (each attempt counts).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, RetryPolicy, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(100.0)
    ///     .retries(RetryPolicy::new(2))
    ///     .build(|_: &u32, _| async { Delivery::Retry { after: None } })
    ///     .unwrap();
    /// throttle.try_submit(1).unwrap();
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// let stats = throttle.stats();
    /// assert_eq!((stats.admitted(), stats.emitted()), (1, 2), "one job, two attempts");
    /// # }
    /// ```
    pub fn emitted(&self) -> u64 {
        self.emitted
    }

    /// Jobs found past their deadline.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .max_queue_wait(Duration::from_millis(500))
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// throttle.pause();
    /// throttle.try_submit(1).unwrap();
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// throttle.resume(); // found past its deadline
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// assert_eq!((throttle.stats().expired(), throttle.stats().delivered()), (1, 0));
    /// # }
    /// ```
    pub fn expired(&self) -> u64 {
        self.expired
    }

    /// Failed delivery attempts (failures, timeouts, panics).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Outcome, RetryPolicy, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(100.0)
    ///     .retries(RetryPolicy::new(3))
    ///     .build(|_: &u32, _| async { Delivery::Retry { after: None } })
    ///     .unwrap();
    /// throttle.try_submit(1).unwrap();
    /// tokio::time::sleep(Duration::from_secs(2)).await;
    /// let stats = throttle.stats();
    /// assert_eq!((stats.delivery_failures(), stats.outcome(Outcome::Failed)), (3, 1), "per attempt, per job");
    /// # }
    /// ```
    pub fn delivery_failures(&self) -> u64 {
        self.delivery_failures
    }

    /// Whether emission is paused.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// assert!(!throttle.stats().is_paused());
    /// throttle.pause();
    /// assert!(throttle.stats().is_paused());
    /// # }
    /// ```
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// Whether the throttle admits nothing more.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// assert!(!throttle.stats().is_closed());
    /// let report = throttle.shutdown(Duration::from_secs(1)).await;
    /// assert!(report.stats.is_closed());
    /// # }
    /// ```
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Jobs that ended in `outcome`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Outcome, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .build(|job: &u32, _| {
    ///         let answer = if *job == 0 { Delivery::Failed } else { Delivery::Done };
    ///         async move { answer }
    ///     })
    ///     .unwrap();
    /// for job in 0..3 {
    ///     throttle.try_submit(job).unwrap();
    /// }
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// let stats = throttle.stats();
    /// assert_eq!((stats.outcome(Outcome::Delivered), stats.outcome(Outcome::Failed)), (2, 1));
    /// # }
    /// ```
    pub fn outcome(&self, outcome: Outcome) -> u64 {
        self.outcomes[outcome.index()]
    }

    /// Jobs delivered.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Outcome, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// throttle.try_submit(1).unwrap();
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// let stats = throttle.stats();
    /// assert_eq!(stats.delivered(), 1);
    /// assert_eq!(stats.delivered(), stats.outcome(Outcome::Delivered));
    /// # }
    /// ```
    pub fn delivered(&self) -> u64 {
        self.outcome(Outcome::Delivered)
    }

    /// Refusals for `reason` (0 for a reason never seen).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Reason, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(1.0)
    ///     .capacity(1)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// throttle.try_submit(1).unwrap();
    /// let _ = throttle.try_submit(2); // full
    /// throttle.begin_shutdown(Duration::from_secs(1));
    /// let _ = throttle.try_submit(3); // closed
    /// let stats = throttle.stats();
    /// assert_eq!((stats.rejected(Reason::Overloaded), stats.rejected(Reason::Closed)), (1, 1));
    /// assert_eq!(stats.rejected(Reason::OverQuota), 0);
    /// # }
    /// ```
    pub fn rejected(&self, reason: Reason) -> u64 {
        self.rejected
            .iter()
            .find(|(r, _)| *r == reason)
            .map_or(0, |(_, n)| *n)
    }

    /// Every reason refused so far with its count (the fixed reasons always,
    /// then each unavailable cause seen).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Reason, Throttle};
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(1.0)
    ///     .capacity(1)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// throttle.try_submit(1).unwrap();
    /// let _ = throttle.try_submit(2); // full
    /// let stats = throttle.stats();
    /// let seen: Vec<(Reason, u64)> = stats.rejections().filter(|(_, n)| *n > 0).collect();
    /// assert_eq!(seen, [(Reason::Overloaded, 1)]);
    /// # }
    /// ```
    pub fn rejections(&self) -> impl Iterator<Item = (Reason, u64)> + '_ {
        self.rejected.iter().copied()
    }

    /// Overflow events under `policy`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Overflow, Throttle};
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(1.0)
    ///     .capacity(1)
    ///     .overflow(Overflow::HeadDrop)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// for job in 0..3 {
    ///     throttle.try_submit(job).unwrap(); // each newcomer evicts the oldest
    /// }
    /// let stats = throttle.stats();
    /// assert_eq!((stats.overflow(Overflow::HeadDrop), stats.overflow(Overflow::TailDrop)), (2, 0));
    /// # }
    /// ```
    pub fn overflow(&self, policy: Overflow) -> u64 {
        self.overflow[policy.index()]
    }

    /// Jobs that reached a terminal outcome.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(1.0)
    ///     .capacity(5)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// for job in 0..3 {
    ///     throttle.try_submit(job).unwrap();
    /// }
    /// tokio::time::sleep(Duration::from_millis(1500)).await;
    /// let stats = throttle.stats();
    /// assert_eq!((stats.finished(), stats.depth()), (2, 1), "one still queued");
    /// # }
    /// ```
    pub fn finished(&self) -> u64 {
        self.outcomes.iter().sum()
    }

    /// Every job ever passed to a submit call: finished, queued, in flight or waiting for a retry.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(1.0)
    ///     .capacity(2)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// for job in 0..3 {
    ///     let _ = throttle.try_submit(job); // the third is refused
    /// }
    /// tokio::time::sleep(Duration::from_millis(500)).await;
    /// let stats = throttle.stats();
    /// // 1 delivered + 1 refused (finished) + 1 queued
    /// assert_eq!((stats.finished(), stats.depth(), stats.submitted()), (2, 1, 3));
    /// # }
    /// ```
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
