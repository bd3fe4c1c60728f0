//! The handle: admission, runtime control and shutdown.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::accounting::dead_letter::DeadLetterReason;
use crate::accounting::ledger::Event;
use crate::accounting::outcome::{Outcome, Stats};
use crate::admission::overflow::Overflow;
use crate::admission::reason::Reason;
use crate::admission::rejected::Rejected;
use crate::admission::{Full, Place, Terms};
use crate::drain::ShutdownReport;
use crate::drain::shared::Shared;
use crate::error::RateError;

/// An admitted job: its id, and whether it was queued or deferred to the
/// dead-letter sink.
///
/// The id is given at admission, is unique across the throttles of a
/// process and across restarts, and is the one every delivery attempt
/// carries ([`Attempt::id`](crate::Attempt::id)): name the job by it in a
/// 202 and in an idempotency key.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use dripfeed::{Attempt, Delivery, Throttle};
/// use std::sync::{Arc, Mutex};
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let ids = seen.clone();
/// let (throttle, _drain) = Throttle::builder()
///     .drain_rate(10.0)
///     .build(move |_: &u8, attempt: Attempt| {
///         ids.lock().unwrap().push(attempt.id());
///         async { Delivery::Done }
///     })
///     .unwrap();
/// let admitted = throttle.try_submit(1).unwrap();
/// assert!(admitted.is_queued());
/// assert_eq!(admitted.status(), 202);
/// tokio::time::sleep(std::time::Duration::from_secs(1)).await;
/// assert_eq!(*seen.lock().unwrap(), vec![admitted.id()]);
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Admitted {
    id: u64,
    deferred: bool,
}

impl Admitted {
    pub(crate) fn queued(id: u64) -> Self {
        Admitted {
            id,
            deferred: false,
        }
    }

    pub(crate) fn deferred(id: u64) -> Self {
        Admitted { id, deferred: true }
    }

    /// The job's id.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// let a = throttle.try_submit(1).unwrap();
    /// let b = throttle.try_submit(2).unwrap();
    /// assert_ne!(a.id(), b.id(), "each job its own id");
    /// # }
    /// ```
    pub fn id(self) -> u64 {
        self.id
    }

    /// Queued for delivery.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// let admitted = throttle.try_submit(1).unwrap();
    /// assert!(admitted.is_queued() && !admitted.is_deferred());
    /// assert_eq!(throttle.depth(), 1);
    /// # }
    /// ```
    pub fn is_queued(self) -> bool {
        !self.deferred
    }

    /// The queue was full and the dead-letter sink took the job for later replay.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{ChannelSink, Delivery, Overflow, Throttle};
    /// let (sink, mut letters) = ChannelSink::new(10).unwrap();
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(1.0)
    ///     .capacity(1)
    ///     .overflow(Overflow::DeadLetter)
    ///     .dead_letter(sink)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// assert!(throttle.try_submit(1).unwrap().is_queued());
    /// assert!(throttle.try_submit(2).unwrap().is_deferred(), "the queue is full");
    /// assert_eq!(letters.recv().await.unwrap().job, 2);
    /// # }
    /// ```
    pub fn is_deferred(self) -> bool {
        self.deferred
    }

    /// The HTTP status for an accepted job (202: accepted for later processing).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// assert_eq!(throttle.try_submit(1).unwrap().status(), 202);
    /// # }
    /// ```
    pub fn status(self) -> u16 {
        202
    }
}

/// How many times head-drop retries when the ring is momentarily empty.
const HEAD_DROP_TRIES: usize = 64;

/// A cloneable handle to a throttle: a bounded queue drained at a constant
/// rate by one task.
///
/// Cheap to clone (one reference count): give each task, request handler
/// or connection its own clone. Clones share one queue and one rate. When
/// the last handle is dropped, the throttle shuts down as
/// [`shutdown`](Self::shutdown) does, with the builder's `shutdown_grace`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use dripfeed::{Delivery, Outcome, Throttle};
/// use std::time::Duration;
///
/// let (throttle, _drain) = Throttle::builder()
///     .drain_rate(200.0)                        // jobs per second, out
///     .latency_budget(Duration::from_secs(2))   // capacity 400
///     .build(|url: &String, _attempt| {
///         let _url = url.clone();
///         async move { Delivery::Done }          // POST it somewhere
///     })
///     .unwrap();
/// assert_eq!(throttle.capacity(), 400);
/// assert!(throttle.try_submit("https://example.test/hook".to_string()).unwrap().is_queued());
/// let report = throttle.shutdown(Duration::from_secs(5)).await;
/// assert_eq!(report.stats.outcome(Outcome::Delivered), 1);
/// assert!(report.returned.is_empty());
/// # }
/// ```
pub struct Throttle<J> {
    pub(crate) shared: Arc<Shared<J>>,
}

impl<J> Clone for Throttle<J> {
    fn clone(&self) -> Self {
        self.shared.handles.fetch_add(1, Ordering::Relaxed);
        Throttle {
            shared: self.shared.clone(),
        }
    }
}

impl<J> Drop for Throttle<J> {
    fn drop(&mut self) {
        if self.shared.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shared.begin_close(self.shared.cfg.shutdown_grace);
        }
    }
}

impl<J: 'static> std::fmt::Debug for Throttle<J> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Throttle")
            .field("name", &self.shared.cfg.name)
            .field("depth", &self.depth())
            .field("capacity", &self.capacity())
            .field("drain_rate", &self.drain_rate())
            .finish()
    }
}

impl<J: 'static> Throttle<J> {
    /// Admission of a job whose id is given. A key above its share of a
    /// queue near its bound is refused as the full queue would refuse it
    /// (503), whatever the overflow policy: it evicts no one.
    #[inline]
    pub(crate) fn admit_as(
        &self,
        id: u64,
        key: u64,
        job: J,
        terms: Terms,
    ) -> Result<Admitted, Rejected<J>> {
        let s = &*self.shared;
        match s.admission.try_reserve_for(key) {
            Ok(place) => self.queue(place, id, job, terms),
            Err(Full::Closed) => Err(s.refuse(job, Reason::Closed)),
            Err(Full::Bound) => self.overflow(id, job, terms),
            Err(Full::Share) => Err(s.refuse(job, Reason::Overloaded)),
        }
    }

    /// Queues `job` in `place`.
    #[inline(always)]
    pub(crate) fn queue(
        &self,
        place: Place<'_, J>,
        id: u64,
        job: J,
        terms: Terms,
    ) -> Result<Admitted, Rejected<J>> {
        let s = &*self.shared;
        let entry = s.entry(id, job, place.is_first(), terms);
        match place.push(entry) {
            Ok(()) => Ok(Admitted::queued(id)),
            // Unreachable while the bound stays within the ring; refuse, never lose.
            Err(entry) => Err(s.refuse(entry.job, Reason::Overloaded)),
        }
    }

    /// At the bound: the overflow policy decides. Tail-drop, the common
    /// refusal, stays inline; the other policies are out of the way.
    #[inline]
    fn overflow(&self, id: u64, job: J, terms: Terms) -> Result<Admitted, Rejected<J>> {
        let s = &*self.shared;
        let policy = s.cfg.overflow;
        s.ledger.overflowed(policy, s.admission.depth());
        match policy {
            Overflow::DeadLetter => self.defer(id, job),
            Overflow::HeadDrop => self.head_drop(id, job, terms),
            _ => Err(s.refuse(job, Reason::Overloaded)),
        }
    }

    /// Head-drop: the oldest queued job's place becomes the newcomer's.
    #[inline(never)]
    fn head_drop(&self, id: u64, job: J, terms: Terms) -> Result<Admitted, Rejected<J>> {
        let s = &*self.shared;
        for _ in 0..HEAD_DROP_TRIES {
            // A place may have freed (or the queue closed) since the bound
            // was seen: that comes before evicting anyone.
            match s.admission.try_reserve() {
                Ok(place) => return self.queue(place, id, job, terms),
                Err(Full::Closed) => return Err(s.refuse(job, Reason::Closed)),
                Err(Full::Bound | Full::Share) => {}
            }
            if let Some((oldest, place)) = s.admission.pop() {
                let queued = self.queue(place, id, job, terms);
                s.ended(oldest.id);
                s.endings.evict(&s.ledger, oldest.id, oldest.job);
                return queued;
            }
            // The ring is momentarily empty (the drain popped, or a push is
            // under way).
            std::hint::spin_loop();
        }
        Err(s.refuse(job, Reason::Overloaded))
    }

    /// Dead-letter overflow: the sink takes the job for later replay. A
    /// panic in the sink propagates to this caller (it is the caller's own
    /// code running on its own thread).
    #[inline(never)]
    fn defer(&self, id: u64, job: J) -> Result<Admitted, Rejected<J>> {
        let s = &*self.shared;
        let Some(sink) = &s.endings.sink else {
            return Err(s.refuse(job, Reason::Overloaded));
        };
        match sink.try_offer_admitted(id, job, DeadLetterReason::Overflow) {
            Ok(()) => {
                s.ledger.record(Event::Finished(id, Outcome::DeadLettered));
                Ok(Admitted::deferred(id))
            }
            Err(job) => Err(s.refuse(job, Reason::Overloaded)),
        }
    }

    /// Jobs waiting in the queue (including pushes under way).
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
    /// for job in 0..3 {
    ///     throttle.try_submit(job).unwrap();
    /// }
    /// assert_eq!(throttle.depth(), 3);
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// assert_eq!(throttle.depth(), 0, "drained");
    /// # }
    /// ```
    pub fn depth(&self) -> usize {
        self.shared.admission.depth()
    }

    /// How long a caller refused now for a full queue is told to wait: the
    /// time the queue as it stands takes to drain, plus up to 20 % jitter.
    /// For a refusal made outside the throttle (a byte budget, say) that
    /// should answer like the queue does.
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
    /// throttle.pause();
    /// for job in 0..5 {
    ///     throttle.try_submit(job).unwrap();
    /// }
    /// let wait = throttle.retry_after(); // 5 queued at 10/s
    /// assert!(wait >= Duration::from_millis(500) && wait <= Duration::from_millis(600));
    /// # }
    /// ```
    pub fn retry_after(&self) -> std::time::Duration {
        crate::util::num::jittered(self.shared.queue_wait())
    }

    /// The current admission bound: `ceil(latency_budget × drain_rate)`, or
    /// the fixed capacity.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(50.0)
    ///     .latency_budget(Duration::from_secs(2))
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// assert_eq!(throttle.capacity(), 100, "2 s × 50/s");
    /// throttle.set_drain_rate(25.0).unwrap();
    /// assert_eq!(throttle.capacity(), 50, "follows the rate");
    /// # }
    /// ```
    pub fn capacity(&self) -> usize {
        self.shared.capacity_at(self.shared.rate())
    }

    /// The current drain rate, jobs per second.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(50.0)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// assert_eq!(throttle.drain_rate(), 50.0);
    /// throttle.set_drain_rate(20.0).unwrap();
    /// assert_eq!(throttle.drain_rate(), 20.0);
    /// # }
    /// ```
    pub fn drain_rate(&self) -> f64 {
        self.shared.rate()
    }

    /// Changes the drain rate; it takes effect from the next emission, and
    /// the admission bound follows it (queued jobs are never pulled back when
    /// it shrinks). Returns the old rate.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(100.0)
    ///     .max_rate(400.0)
    ///     .latency_budget(Duration::from_secs(1))
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// assert_eq!(throttle.set_drain_rate(400.0), Ok(100.0));
    /// assert_eq!(throttle.capacity(), 400);
    /// # }
    /// ```
    pub fn set_drain_rate(&self, rate: f64) -> Result<f64, RateError> {
        self.shared.set_rate(rate)
    }

    /// Changes the limits of a running throttle at once: the highest rate
    /// (`set_drain_rate` and AIMD stay at or below it), the latency budget
    /// the admission bound follows (ignored with a fixed capacity; `None`
    /// keeps the current one) and the drain rate (capped at the new
    /// highest). The ring was allocated at build for the builder's
    /// `max_rate`: limits whose full budget at `max_rate` it cannot hold are
    /// refused with [`RateError::AboveMax`] naming the highest rate it
    /// holds, and nothing changes.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, RateError, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(100.0)
    ///     .max_rate(200.0)
    ///     .latency_budget(Duration::from_secs(1))
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// throttle.set_limits(50.0, Some(Duration::from_secs(2)), 100.0).unwrap();
    /// assert_eq!(throttle.drain_rate(), 50.0, "capped at the new highest");
    /// assert_eq!(throttle.capacity(), 100, "2 s × 50/s");
    /// assert!(throttle.set_drain_rate(60.0).is_err());
    /// // 3 s at 200/s would need a ring of 600; it holds 200 (1 s × 200/s).
    /// let err = throttle.set_limits(200.0, Some(Duration::from_secs(3)), 100.0).unwrap_err();
    /// assert!(matches!(err, RateError::AboveMax { .. }));
    /// # }
    /// ```
    pub fn set_limits(
        &self,
        max_rate: f64,
        latency_budget: Option<Duration>,
        rate: f64,
    ) -> Result<(), RateError> {
        if !(max_rate.is_finite() && max_rate > 0.0) {
            return Err(RateError::Invalid(max_rate));
        }
        if !(rate.is_finite() && rate > 0.0) {
            return Err(RateError::Invalid(rate));
        }
        if latency_budget.is_some_and(|b| b.is_zero()) {
            return Err(RateError::Invalid(0.0));
        }
        self.shared.set_limits(max_rate, latency_budget, rate)
    }

    /// Whether [`set_limits`](Self::set_limits) would take `max_rate` and
    /// `latency_budget` now, changing nothing: `Ok`, or the error it would
    /// give (`AboveMax` with the highest rate the ring holds a full budget
    /// at, or `Closed`).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, RateError, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .max_rate(100.0)
    ///     .latency_budget(Duration::from_secs(1))
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// assert!(throttle.can_set_limits(50.0, None).is_ok());
    /// assert!(matches!(
    ///     throttle.can_set_limits(500.0, None),
    ///     Err(RateError::AboveMax { .. })
    /// ));
    /// assert_eq!(throttle.drain_rate(), 10.0, "nothing changed");
    /// # }
    /// ```
    pub fn can_set_limits(
        &self,
        max_rate: f64,
        latency_budget: Option<Duration>,
    ) -> Result<(), RateError> {
        if !(max_rate.is_finite() && max_rate > 0.0) {
            return Err(RateError::Invalid(max_rate));
        }
        if latency_budget.is_some_and(|b| b.is_zero()) {
            return Err(RateError::Invalid(0.0));
        }
        self.shared
            .check_limits(max_rate, latency_budget)
            .map(|_| ())
    }

    /// Starts a shutdown without waiting for it: as
    /// [`shutdown`](Self::shutdown) (admission stops, the queue drains for
    /// up to `grace`, then what remains goes to the sink or the journal, or
    /// back through [`Drain::join`](crate::Drain::join)). Safe to call from
    /// a [`DrainHook`](crate::DrainHook).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Reason, Throttle};
    /// use std::time::Duration;
    /// let (throttle, drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// throttle.try_submit(1).unwrap();
    /// throttle.begin_shutdown(Duration::from_secs(1));
    /// assert_eq!(throttle.try_submit(2).unwrap_err().reason(), Reason::Closed);
    /// assert_eq!(drain.join().await.stats.delivered(), 1);
    /// # }
    /// ```
    pub fn begin_shutdown(&self, grace: Duration) {
        self.shared.begin_close(grace);
    }

    /// Starts a shutdown for good: as [`begin_shutdown`](Self::begin_shutdown),
    /// but what remains at the deadline goes to the dead-letter sink even
    /// with a journal (which otherwise keeps it for the next start); with
    /// no sink, a journal still keeps it. For a throttle that will not be
    /// built again (a receiver removed from a configuration, say).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{ChannelSink, Delivery, Outcome, Throttle};
    /// use std::time::Duration;
    /// let (sink, mut letters) = ChannelSink::new(10).unwrap();
    /// let (throttle, drain) = Throttle::builder()
    ///     .drain_rate(1.0)
    ///     .dead_letter(sink)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// throttle.pause();
    /// throttle.try_submit(7).unwrap();
    /// throttle.retire(Duration::ZERO);
    /// let report = drain.join().await;
    /// assert_eq!(report.stats.outcome(Outcome::DeadLettered), 1);
    /// assert_eq!(letters.recv().await.unwrap().job, 7);
    /// # }
    /// ```
    pub fn retire(&self, grace: Duration) {
        self.shared
            .retiring
            .store(true, std::sync::atomic::Ordering::Release);
        self.shared.begin_close(grace);
    }

    /// Stops emission; admission goes on until the queue is full.
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
    /// throttle.pause();
    /// assert!(throttle.try_submit(1).is_ok(), "still admits");
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// assert_eq!((throttle.stats().emitted(), throttle.depth()), (0, 1));
    /// # }
    /// ```
    pub fn pause(&self) {
        self.shared.set_paused(true);
    }

    /// Restarts emission: the next job goes out at once, the following ones
    /// at the drain rate (no burst for the time paused).
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
    /// throttle.pause();
    /// for job in 0..3 {
    ///     throttle.try_submit(job).unwrap();
    /// }
    /// tokio::time::sleep(Duration::from_secs(5)).await;
    /// throttle.resume();
    /// tokio::time::sleep(Duration::from_millis(150)).await;
    /// assert_eq!(throttle.stats().delivered(), 2, "at once, then 100 ms later: no burst");
    /// # }
    /// ```
    pub fn resume(&self) {
        self.shared.set_paused(false);
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
    /// assert!(!throttle.is_paused());
    /// throttle.pause();
    /// assert!(throttle.is_paused());
    /// throttle.resume();
    /// assert!(!throttle.is_paused());
    /// # }
    /// ```
    pub fn is_paused(&self) -> bool {
        self.shared.is_paused()
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
    /// assert!(!throttle.is_closed());
    /// throttle.begin_shutdown(Duration::from_secs(1));
    /// assert!(throttle.is_closed());
    /// assert!(throttle.try_submit(1).is_err());
    /// # }
    /// ```
    pub fn is_closed(&self) -> bool {
        self.shared.admission.is_closed()
    }

    /// The throttle's name (its metrics label).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// let (throttle, _drain) = Throttle::builder()
    ///     .name("webhooks")
    ///     .drain_rate(10.0)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// assert_eq!(throttle.name(), "webhooks");
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        &self.shared.cfg.name
    }

    /// A snapshot of the counts and gauges.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Reason, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .capacity(2)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// for job in 0..3 {
    ///     let _ = throttle.try_submit(job); // the third is refused
    /// }
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// let stats = throttle.stats();
    /// assert_eq!((stats.delivered(), stats.rejected(Reason::Overloaded)), (2, 1));
    /// # }
    /// ```
    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }

    /// What a delivery takes lately, as a closing drain reckons it, ns (see
    /// [`shutdown`](Self::shutdown)): a destination keeps it across its
    /// throttles.
    pub(crate) fn slowest_now(&self) -> u64 {
        let s = &*self.shared;
        s.slowest.faded_at(s.clock.ns(tokio::time::Instant::now()))
    }

    /// Shuts down: new submits are refused as `Closed`; queued jobs keep
    /// draining at the current rate for up to `grace`, and deliveries
    /// under way may end meanwhile. No delivery starts that would outlast
    /// the grace as deliveries take lately (the slowest recent one, older
    /// ones fading, by half every 10 s without one): cut off at its end, it
    /// would be tried again later although the downstream may have taken
    /// it. At the end of the grace (or once nothing runs and no more could
    /// end in time), what is still queued or waiting for a retry, and every
    /// delivery still running (stopped where it is, as a timeout stops
    /// it), goes to the journal for the next start when there is one, else
    /// to the dead-letter sink, else back in the report's `returned`: a
    /// shutdown ends within its grace whatever the downstream does.
    ///
    /// Only the first caller (of this or [`Drain::join`](crate::Drain::join))
    /// receives the returned jobs. Requires the drain future to be running.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Outcome, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .build(|_: &u32, _| std::future::pending::<Delivery>()) // hangs
    ///     .unwrap();
    /// throttle.try_submit(1).unwrap();
    /// tokio::time::sleep(Duration::from_millis(10)).await; // out, hanging
    /// let began = tokio::time::Instant::now();
    /// let report = throttle.shutdown(Duration::from_millis(100)).await;
    /// assert!(began.elapsed() < Duration::from_millis(200), "within its grace");
    /// assert_eq!(report.returned, vec![1]);
    /// assert_eq!(report.stats.outcome(Outcome::Returned), 1);
    /// # }
    /// ```
    pub async fn shutdown(&self, grace: Duration) -> ShutdownReport<J> {
        self.shared.begin_close(grace);
        let returned = self.shared.wait_done().await;
        ShutdownReport {
            stats: self.shared.stats(),
            returned,
        }
    }
}
