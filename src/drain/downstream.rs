//! The downstream: where the drain delivers jobs.

use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;

/// Which delivery attempt this is, for idempotency keys and logs.
///
/// Ids are assigned by the drain in emission order and stay the same across
/// retries of one job.
///
/// ```
/// use dripfeed::Attempt;
/// let attempt = Attempt::new(41, 2);
/// assert_eq!((attempt.id(), attempt.number()), (41, 2));
/// assert!(attempt.is_retry());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Attempt {
    id: u64,
    number: u32,
}

impl Attempt {
    /// Attempt `number` (1 for the first) of job `id`.
    ///
    /// ```
    /// use dripfeed::Attempt;
    /// let first = Attempt::new(7, 1);
    /// assert_eq!((first.id(), first.number(), first.is_retry()), (7, 1, false));
    /// ```
    pub fn new(id: u64, number: u32) -> Self {
        Attempt { id, number }
    }

    /// The job's id, unique within its throttle.
    ///
    /// ```
    /// use dripfeed::Attempt;
    /// // The same key for every attempt of a job: the receiver deduplicates on it.
    /// let key = |a: Attempt| format!("job-{}", a.id());
    /// assert_eq!(key(Attempt::new(41, 1)), key(Attempt::new(41, 2)));
    /// ```
    pub fn id(&self) -> u64 {
        self.id
    }

    /// 1 for the first attempt, 2 for the first retry, and so on.
    ///
    /// ```
    /// use dripfeed::Attempt;
    /// assert_eq!(Attempt::new(41, 3).number(), 3, "the second retry");
    /// ```
    pub fn number(&self) -> u32 {
        self.number
    }

    /// Whether an earlier attempt of this job failed.
    ///
    /// ```
    /// use dripfeed::Attempt;
    /// assert!(!Attempt::new(41, 1).is_retry());
    /// assert!(Attempt::new(41, 2).is_retry());
    /// ```
    pub fn is_retry(&self) -> bool {
        self.number > 1
    }
}

/// What the downstream made of a delivery.
///
/// ```
/// use dripfeed::Delivery;
/// use std::time::Duration;
/// let slow_down = Delivery::Retry { after: Some(Duration::from_secs(2)) };
/// assert!(!slow_down.is_done());
/// assert!(Delivery::Done.is_done());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Delivered.
    Done,
    /// Not delivered, worth trying again, after `after` if the downstream said
    /// (e.g. a 429 or 503 with `Retry-After`). Until retries are configured a
    /// retry counts as a failure.
    Retry {
        /// The downstream's wait hint.
        after: Option<Duration>,
    },
    /// Not delivered, and trying again would not help.
    Failed,
}

impl Delivery {
    /// Whether the job was delivered.
    ///
    /// ```
    /// use dripfeed::Delivery;
    /// assert!(Delivery::Done.is_done());
    /// assert!(!Delivery::Failed.is_done());
    /// assert!(!Delivery::Retry { after: None }.is_done());
    /// ```
    pub fn is_done(&self) -> bool {
        matches!(self, Delivery::Done)
    }
}

/// Delivers jobs. The drain keeps each job while it is delivered (the
/// downstream borrows it), so it can retry or dead-letter it afterwards.
///
/// Deliveries run under the throttle's [`Dispatch`](crate::Dispatch) mode
/// (by default polled by the drain task itself); a panic or a delivery that outlives
/// the throttle's `deliver_timeout` counts as a failed delivery.
///
/// Closures `Fn(&J, Attempt) -> impl Future<Output = Delivery>` implement it:
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use dripfeed::{Attempt, Delivery, Downstream};
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU64, Ordering};
///
/// let seen = Arc::new(AtomicU64::new(0));
/// let counter = seen.clone();
/// let downstream = move |job: &u64, _attempt: Attempt| {
///     counter.fetch_add(*job, Ordering::Relaxed);
///     async { Delivery::Done }
/// };
/// assert_eq!(downstream.deliver(&5, Attempt::new(0, 1)).await, Delivery::Done);
/// assert_eq!(seen.load(Ordering::Relaxed), 5);
/// # }
/// ```
#[async_trait]
pub trait Downstream<J>: Send + Sync + 'static {
    /// Delivers one job.
    async fn deliver(&self, job: &J, attempt: Attempt) -> Delivery;
}

#[async_trait]
impl<J, F, Fut> Downstream<J> for F
where
    J: Sync + 'static,
    F: Fn(&J, Attempt) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Delivery> + Send + 'static,
{
    async fn deliver(&self, job: &J, attempt: Attempt) -> Delivery {
        (self)(job, attempt).await
    }
}
