//! The drain: one task per throttle that pops jobs and emits them at the
//! drain rate (the loop is [`task::DrainTask`]), and the handles to it.
//! Beside the loop: the [`pacer`] (when the next job is due), [`dispatch`]
//! (deliveries under the in-flight bound), the
//! [`downstream`] it delivers to and the [`feedback`] each attempt sends
//! back to the adaptive rate ([`adapt`]), retries ([`retry_policy`] and the
//! [`retry_queue`] of jobs waiting for another attempt), the [`stop`] a
//! closing drain gives deliveries still running at its deadline, and the
//! user's [`hook`].

pub(crate) mod adapt;
pub(crate) mod dispatch;
pub(crate) mod downstream;
pub(crate) mod fair;
pub(crate) mod feedback;
pub(crate) mod hook;
pub(crate) mod pacer;
pub(crate) mod retry_policy;
pub(crate) mod retry_queue;
pub(crate) mod shared;
pub(crate) mod slowest;
pub(crate) mod stop;
pub(crate) mod task;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::task::JoinHandle;

use crate::accounting::outcome::Stats;
use crate::drain::shared::Shared;

/// What a shutdown hands back.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use dripfeed::{Delivery, Outcome, Throttle};
/// use std::time::Duration;
/// let (throttle, _drain) = Throttle::builder()
///     .drain_rate(1.0)
///     .capacity(3)
///     .build(|_: &u32, _| async { Delivery::Done })
///     .unwrap();
/// for job in 0..3 {
///     throttle.try_submit(job).unwrap();
/// }
/// // 1 job/s, 1.5 s of grace: jobs 0 and 1 go out, job 2 comes back
/// let report = throttle.shutdown(Duration::from_millis(1500)).await;
/// assert_eq!(report.stats.outcome(Outcome::Delivered), 2);
/// assert_eq!(report.returned, vec![2]);
/// assert_eq!(report.stats.outcome(Outcome::Returned), 1);
/// # }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct ShutdownReport<J> {
    /// The final counts.
    pub stats: Stats,
    /// Jobs left at the deadline that no dead-letter sink took: those still
    /// queued, oldest first, then those waiting for a retry, oldest first.
    pub returned: Vec<J>,
}

/// The handle to a spawned drain task. Dropping it detaches the task.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use dripfeed::{Delivery, Throttle};
/// let (throttle, drain) = Throttle::builder()
///     .drain_rate(10.0)
///     .build(|_: &u32, _| async { Delivery::Done })
///     .unwrap();
/// throttle.try_submit(1).unwrap();
/// drop(throttle); // the last handle: shuts down, draining what is queued
/// let report = drain.join().await;
/// assert_eq!(report.stats.delivered(), 1);
/// # }
/// ```
pub struct Drain<J> {
    ending: Ending,
    shared: Arc<Shared<J>>,
}

/// How a drain's end is heard: its own task's, or a driver's word.
enum Ending {
    Task(JoinHandle<()>),
    Driven(tokio::sync::oneshot::Receiver<()>),
}

impl<J: 'static> std::fmt::Debug for Drain<J> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Drain")
            .field("finished", &self.is_finished())
            .finish()
    }
}

impl<J: 'static> Drain<J> {
    pub(crate) fn new(handle: JoinHandle<()>, shared: Arc<Shared<J>>) -> Self {
        Drain {
            ending: Ending::Task(handle),
            shared,
        }
    }

    /// A drain run by a set's driver, which tells its end on `ended`.
    pub(crate) fn driven(
        ended: tokio::sync::oneshot::Receiver<()>,
        shared: Arc<Shared<J>>,
    ) -> Self {
        Drain {
            ending: Ending::Driven(ended),
            shared,
        }
    }

    /// Waits until the drain task has finished (after a shutdown, or after
    /// the last handle was dropped) and returns the report. The returned jobs
    /// go to whoever asks first: this or [`Throttle::shutdown`](crate::Throttle::shutdown).
    pub async fn join(self) -> ShutdownReport<J> {
        // The task never panics; if it did, the report still tells what is known.
        match self.ending {
            Ending::Task(handle) => drop(handle.await),
            Ending::Driven(ended) => drop(ended.await),
        }
        ShutdownReport {
            stats: self.shared.stats(),
            returned: self.shared.take_leftovers(),
        }
    }

    /// Whether the drain task has finished.
    pub fn is_finished(&self) -> bool {
        self.shared.is_done()
    }
}

/// A drain's loop, boxed.
pub(crate) type BoxedDrain = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The drain task as a future, from
/// [`build_unspawned`](crate::ThrottleBuilder::build_unspawned): spawn it
/// (or await it); nothing is emitted until it runs. It ends after shutdown
/// and resolves to the report.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use dripfeed::{Delivery, Throttle};
/// let (throttle, drain) = Throttle::builder()
///     .drain_rate(10.0)
///     .build_unspawned(|_: &u32, _| async { Delivery::Done })
///     .unwrap();
/// throttle.try_submit(7).unwrap();
/// let task = tokio::spawn(drain);
/// drop(throttle);
/// let report = task.await.unwrap();
/// assert_eq!(report.stats.delivered(), 1);
/// # }
/// ```
pub struct DrainFuture<J> {
    inner: Pin<Box<dyn Future<Output = ()> + Send>>,
    shared: Arc<Shared<J>>,
}

impl<J> DrainFuture<J> {
    pub(crate) fn new(
        inner: Pin<Box<dyn Future<Output = ()> + Send>>,
        shared: Arc<Shared<J>>,
    ) -> Self {
        DrainFuture { inner, shared }
    }

    pub(crate) fn into_inner(self) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        self.inner
    }

    /// The future, and what its drain shares with its throttle.
    pub(crate) fn into_parts(self) -> (BoxedDrain, Arc<Shared<J>>) {
        (self.inner, self.shared)
    }
}

impl<J> std::fmt::Debug for DrainFuture<J> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DrainFuture").finish_non_exhaustive()
    }
}

impl<J: 'static> Future for DrainFuture<J> {
    type Output = ShutdownReport<J>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.inner.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(ShutdownReport {
                stats: self.shared.stats(),
                returned: self.shared.take_leftovers(),
            }),
            Poll::Pending => Poll::Pending,
        }
    }
}
