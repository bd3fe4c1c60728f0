//! [`DrainHook`]: code of yours that the drain asks before each emission
//! and tells what happened: each ended attempt, each job's end, and its own
//! idleness. A circuit breaker, a per-destination gate, a shared bound on
//! jobs held, or retiring an idle throttle are built on it (the
//! `destinations` set does all four, through this and the builder's other
//! extension points).
//!
//! The drain calls the hook from its own task, so every method must be
//! quick and must not block: take a short lock at most, never await.

use std::time::Duration;

use tokio::time::Instant;

use crate::accounting::outcome::Outcome;
use crate::drain::downstream::Attempt;
use crate::drain::feedback::AttemptEnd;

/// What a [`DrainHook`] lets the drain do with the job that is due.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use dripfeed::{Attempt, AttemptEnd, Delivery, DrainHook, Emit, Throttle};
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::time::Duration;
/// use tokio::time::Instant;
///
/// /// One delivery at a time: each goes as a probe, the next once it lands.
/// struct OneAtATime(AtomicBool);
///
/// impl DrainHook for OneAtATime {
///     fn before_emit(&self, _now: Instant) -> Emit {
///         match self.0.load(Ordering::Relaxed) {
///             true => Emit::AfterLanding,
///             false => Emit::Probe,
///         }
///     }
///     fn probe_sent(&self) {
///         self.0.store(true, Ordering::Relaxed);
///     }
///     fn attempt_ended(&self, _attempt: Attempt, _end: AttemptEnd) {
///         self.0.store(false, Ordering::Relaxed);
///     }
/// }
///
/// let (throttle, _drain) = Throttle::builder()
///     .drain_rate(1000.0)
///     .max_in_flight(8)
///     .drain_hook(OneAtATime(AtomicBool::new(false)))
///     .build(|_: &u32, _| async {
///         tokio::time::sleep(Duration::from_millis(100)).await;
///         Delivery::Done
///     })
///     .unwrap();
/// for job in 0..3 {
///     throttle.try_submit(job).unwrap();
/// }
/// tokio::time::sleep(Duration::from_millis(250)).await;
/// assert_eq!(throttle.stats().delivered(), 2, "one each 100 ms, not three at once");
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Emit {
    /// Send it.
    Send,
    /// Send it as a probe: once it is out the hook is told
    /// ([`DrainHook::probe_sent`]); if it could not go (no job after all,
    /// no delivery place) the hook is asked again next time.
    Probe,
    /// Send nothing until a delivery in flight lands (a probe is out, say).
    AfterLanding,
    /// Send nothing until then; the pacing schedule restarts after, so the
    /// time held back is never sent as a burst.
    Until(Instant),
}

/// Code the drain asks and tells; every method has a default that does
/// nothing, so implement only what you need.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use dripfeed::{Attempt, AttemptEnd, Delivery, DrainHook, Emit, Outcome, Throttle};
/// use std::sync::Mutex;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::time::Duration;
/// use tokio::time::Instant;
///
/// /// Holds emission back for the first 2 s, and counts what it is told.
/// struct Warmup {
///     until: Instant,
///     attempts: AtomicU64,
///     delivered: AtomicU64,
/// }
///
/// impl DrainHook for Warmup {
///     fn before_emit(&self, now: Instant) -> Emit {
///         if now < self.until { Emit::Until(self.until) } else { Emit::Send }
///     }
///     fn attempt_ended(&self, _attempt: Attempt, _end: AttemptEnd) {
///         self.attempts.fetch_add(1, Ordering::Relaxed);
///     }
///     fn job_ended(&self, _id: u64, outcome: Outcome) {
///         if outcome == Outcome::Delivered {
///             self.delivered.fetch_add(1, Ordering::Relaxed);
///         }
///     }
/// }
///
/// let hook = std::sync::Arc::new(Warmup {
///     until: Instant::now() + Duration::from_secs(2),
///     attempts: AtomicU64::new(0),
///     delivered: AtomicU64::new(0),
/// });
/// let (throttle, _drain) = Throttle::builder()
///     .drain_rate(100.0)
///     .drain_hook(hook.clone())
///     .build(|_: &u32, _| async { Delivery::Done })
///     .unwrap();
/// throttle.try_submit(1).unwrap();
/// tokio::time::sleep(Duration::from_secs(1)).await;
/// assert_eq!(throttle.stats().delivered(), 0, "held back");
/// tokio::time::sleep(Duration::from_secs(2)).await;
/// assert_eq!(hook.delivered.load(Ordering::Relaxed), 1);
/// assert_eq!(hook.attempts.load(Ordering::Relaxed), 1);
/// # }
/// ```
pub trait DrainHook: Send + Sync + 'static {
    /// Asked before each emission while a job (queued, or a retry) is due,
    /// with the drain's clock. The default lets every job go.
    fn before_emit(&self, _now: Instant) -> Emit {
        Emit::Send
    }

    /// The probe that [`before_emit`](Self::before_emit) allowed went out.
    fn probe_sent(&self) {}

    /// Delivery `attempt` (the job's id and the attempt's number) ended
    /// (delivered, failed, timed out, panicked), before the job's retry or
    /// end is recorded.
    fn attempt_ended(&self, _attempt: Attempt, _end: AttemptEnd) {}

    /// The job will be tried again, as `next` (its id and the next
    /// attempt's number), in `after`; also for a job recovered from the
    /// journal at a start that had failed before (`after` the time left
    /// until its retry was due).
    fn retry_scheduled(&self, _next: Attempt, _after: Duration) {}

    /// Job `id` reached its terminal [`Outcome`] (every job the throttle
    /// admitted, once; a refused job is handed back to its caller instead).
    fn job_ended(&self, _id: u64, _outcome: Outcome) {}

    /// How long the drain waits with nothing queued, waiting for a retry or
    /// in flight before it calls [`idle`](Self::idle); `None` (the
    /// default): never.
    fn idle_after(&self) -> Option<Duration> {
        None
    }

    /// The drain has had nothing to do for [`idle_after`](Self::idle_after).
    /// The hook may shut the throttle down now
    /// ([`Throttle::begin_shutdown`](crate::Throttle::begin_shutdown)): the
    /// drain then ends without waking again. Otherwise it is called again
    /// after the next spell of idleness.
    fn idle(&self) {}
}

impl<H: DrainHook + ?Sized> DrainHook for std::sync::Arc<H> {
    fn before_emit(&self, now: Instant) -> Emit {
        (**self).before_emit(now)
    }
    fn probe_sent(&self) {
        (**self).probe_sent()
    }
    fn attempt_ended(&self, attempt: Attempt, end: AttemptEnd) {
        (**self).attempt_ended(attempt, end)
    }
    fn retry_scheduled(&self, next: Attempt, after: Duration) {
        (**self).retry_scheduled(next, after)
    }
    fn job_ended(&self, id: u64, outcome: Outcome) {
        (**self).job_ended(id, outcome)
    }
    fn idle_after(&self) -> Option<Duration> {
        (**self).idle_after()
    }
    fn idle(&self) {
        (**self).idle()
    }
}
