//! Awaitable drain slots, for calls that must wait their turn: wrapping an
//! outbound client of a partner API with a quota.
//!
//! [`Slots`] is a throttle whose jobs are waiters. [`Slots::acquire`] queues
//! a waiter and resolves when the drain emits it, at the drain rate, first
//! in, first out; when the queue is full the caller waits for room, in line
//! behind the callers already waiting (bound the wait with
//! [`acquire_within`](Slots::acquire_within), or refuse at once with
//! [`try_acquire`](Slots::try_acquire)). The caller then makes its call and
//! [reports](Slot::report) how it went, so an adaptive drain follows the
//! partner's p99 and honours its "slow down" answers.
//!
//! Cancel-safe: dropping a waiting `acquire` gives its place (or its turn in
//! line) back at once (depth and Retry-After count live waiters only) and
//! the drain skips the withdrawn waiter without spending a pacing slot on
//! it. Withdrawn waiters that crowd the ring (many cancelled while the
//! drain is paused) are purged when a new waiter needs their room.

use std::future::Future;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::accounting::ledger::Event;
use crate::accounting::outcome::{Outcome, Stats};
use crate::admission::Withdrawal;
use crate::admission::reason::Reason;
use crate::admission::rejected::Rejected;
use crate::drain::Drain;
use crate::drain::downstream::{Attempt, Delivery, Downstream};
use crate::drain::feedback::AttemptEnd;
use crate::error::{BuildError, RateError};
use crate::handle::builder::ThrottleBuilder;
use crate::handle::submission::{Key, Submission};
use crate::handle::throttle::{Admitted, Throttle};

const WAITING: u8 = 0;
const CLAIMED: u8 = 1;
const WITHDRAWN: u8 = 2;

/// A queued [`Slots::acquire`]: opaque, only [`Slots`] makes them. It
/// names the job type of the throttle under the slots.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use dripfeed::{Slots, Throttle, Waiter};
/// let (slots, _drain) = Slots::builder().drain_rate(10.0).build_slots().unwrap();
/// let under: &Throttle<Waiter> = slots.throttle();
/// let slot = slots.acquire().await.unwrap();
/// assert_eq!(under.stats().emitted(), 1, "the waiter was emitted: its slot granted");
/// drop(slot);
/// # }
/// ```
pub struct Waiter {
    status: Arc<AtomicU8>,
    grant: Mutex<Option<oneshot::Sender<()>>>,
}

/// The drain's claim: a waiter still waiting becomes claimed; a withdrawn one is skipped.
fn claim(w: &Waiter) -> bool {
    w.status
        .compare_exchange(WAITING, CLAIMED, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
}

/// Whether a waiter was withdrawn (its `acquire` dropped while queued).
fn withdrawn(w: &Waiter) -> bool {
    w.status.load(Ordering::Acquire) == WITHDRAWN
}

/// The slots' downstream: emitting a waiter grants it.
struct Grant;

#[async_trait]
impl Downstream<Waiter> for Grant {
    async fn deliver(&self, waiter: &Waiter, _attempt: Attempt) -> Delivery {
        let tx = waiter
            .grant
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(tx) = tx {
            let _ = tx.send(());
        }
        Delivery::Done
    }
}

/// Gives a waiter's place back if its `acquire` is dropped before the grant.
struct Withdraw<'a> {
    status: &'a AtomicU8,
    throttle: &'a Throttle<Waiter>,
    /// The waiter's id (from its admission).
    id: u64,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        if self
            .status
            .compare_exchange(WAITING, WITHDRAWN, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            let shared = &self.throttle.shared;
            shared.admission.withdrawn();
            shared
                .ledger
                .record(Event::Finished(self.id, Outcome::Cancelled));
        }
    }
}

/// Drain slots shared by every clone: each [`acquire`](Self::acquire) waits
/// for its turn at the drain rate. Cheap to clone: clones share the slots.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use dripfeed::{Delivery, Slots};
/// use std::time::Duration;
/// let (slots, _drain) = Slots::builder().drain_rate(10.0).capacity(100).build_slots().unwrap();
/// let start = tokio::time::Instant::now();
/// for _ in 0..5 {
///     let slot = slots.acquire().await.unwrap();
///     // … call the partner API here …
///     slot.report(Delivery::Done);
/// }
/// // first at once, then every 100 ms
/// assert_eq!(start.elapsed(), Duration::from_millis(400));
/// # }
/// ```
#[derive(Clone)]
pub struct Slots {
    throttle: Throttle<Waiter>,
    /// Callers waiting for room take it in turn (tokio's mutex is fair:
    /// first come, first served), so a caller never overtakes one that
    /// waited longer.
    line: Arc<tokio::sync::Mutex<()>>,
}

/// A granted slot: make the call, then [`report`](Self::report) how it went.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use dripfeed::{Delivery, Slots};
/// use std::time::Duration;
/// let (slots, _drain) = Slots::builder().drain_rate(10.0).build_slots().unwrap();
/// let first = slots.acquire().await.unwrap();
/// first.report(Delivery::Done);
/// let asked = tokio::time::Instant::now();
/// let second = slots.acquire().await.unwrap();
/// assert_eq!(asked.elapsed(), Duration::from_millis(100), "one drain interval on");
/// // … the partner answered 503: an adaptive drain would slow down …
/// second.report(Delivery::Retry { after: None });
/// # }
/// ```
#[must_use = "report the call's outcome so an adaptive drain can follow the partner"]
pub struct Slot {
    granted: Instant,
    throttle: Throttle<Waiter>,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("granted", &self.granted)
            .finish()
    }
}

impl Slot {
    /// Reports the call made in this slot: its latency (since the grant) and
    /// outcome feed the adaptive drain; `Delivery::Retry { after: Some(..) }`
    /// (a 429 or 503 with `Retry-After`) counts as congestion. Without an
    /// adaptive drain this does nothing.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::rate::AimdConfig;
    /// use dripfeed::{Delivery, Slots};
    /// use std::time::Duration;
    /// let aimd = AimdConfig::default().with_floor(10.0).with_ceiling(100.0).build().unwrap();
    /// let (slots, _drain) = Slots::builder().adaptive(aimd).drain_rate(100.0).build_slots().unwrap();
    /// let slot = slots.acquire().await.unwrap();
    /// // … the partner answered 429 with Retry-After: 1 …
    /// slot.report(Delivery::Retry { after: Some(Duration::from_secs(1)) });
    /// tokio::time::sleep(Duration::from_secs(2)).await;
    /// let asked = tokio::time::Instant::now();
    /// let _next = slots.acquire().await.unwrap(); // the drain decides as it grants
    /// assert_eq!(slots.drain_rate(), 75.0, "cut by a quarter");
    /// assert!(asked.elapsed() < Duration::from_millis(100), "its 1 s ran out a second ago");
    /// # }
    /// ```
    pub fn report(self, outcome: Delivery) {
        if let Some(feedback) = &self.throttle.shared.feedback {
            feedback.report(self.granted.elapsed(), AttemptEnd::Answered(outcome));
        }
    }
}

/// A waiter's far end: its status and its grant.
struct Pending {
    status: Arc<AtomicU8>,
    grant: oneshot::Receiver<()>,
}

/// A new waiter and what its caller waits on.
fn pending() -> (Waiter, Pending) {
    let (tx, rx) = oneshot::channel();
    let status = Arc::new(AtomicU8::new(WAITING));
    let waiter = Waiter {
        status: status.clone(),
        grant: Mutex::new(Some(tx)),
    };
    (waiter, Pending { status, grant: rx })
}

impl ThrottleBuilder<Waiter> {
    /// Builds [`Slots`] and spawns their drain. The overflow policy is always
    /// tail-drop (a full queue makes [`acquire`](Slots::acquire) wait and
    /// [`try_acquire`](Slots::try_acquire) refuse); hooks and sinks do not
    /// apply. The capacity is the queue of callers let in ahead of the
    /// rest: with the default 1 s budget, a second's worth.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::Slots;
    /// let (slots, _drain) = Slots::builder().drain_rate(25.0).build_slots().unwrap();
    /// assert_eq!(slots.capacity(), 25, "a second's worth of callers");
    /// assert!(slots.acquire().await.is_ok());
    /// # }
    /// ```
    pub fn build_slots(self) -> Result<(Slots, Drain<Waiter>), BuildError> {
        let (throttle, drain) = self
            .for_slots(Withdrawal { claim, withdrawn })
            .build(Grant)?;
        let line = Arc::new(tokio::sync::Mutex::new(()));
        Ok((Slots { throttle, line }, drain))
    }
}

impl Slots {
    /// A builder; set at least the drain rate, then call
    /// [`build_slots`](ThrottleBuilder::build_slots).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{BuildError, Slots};
    /// assert!(matches!(Slots::builder().build_slots(), Err(BuildError::MissingRate)));
    /// let (slots, _drain) = Slots::builder().drain_rate(50.0).build_slots().unwrap();
    /// assert_eq!(slots.drain_rate(), 50.0);
    /// # }
    /// ```
    pub fn builder() -> ThrottleBuilder<Waiter> {
        ThrottleBuilder::new()
    }

    /// Waits for a slot: resolves when the drain emits this waiter. When the
    /// queue is full it waits for room, behind the callers already waiting
    /// (first in, first out). Fails only when the slots shut down
    /// (`Closed`). Cancel-safe: dropped, it gives back its place or its
    /// turn.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::Slots;
    /// // A queue of 2 places at 10/s: the 3rd to 5th callers wait for room.
    /// let (slots, _drain) = Slots::builder().drain_rate(10.0).capacity(2).build_slots().unwrap();
    /// let callers: Vec<_> = (0..5)
    ///     .map(|_| {
    ///         let slots = slots.clone();
    ///         tokio::spawn(async move { slots.acquire().await.is_ok() })
    ///     })
    ///     .collect();
    /// for caller in callers {
    ///     assert!(caller.await.unwrap(), "none refused");
    /// }
    /// # }
    /// ```
    pub async fn acquire(&self) -> Result<Slot, Rejected<()>> {
        let (waiter, pending) = pending();
        let admitted = {
            let _turn = self.line.lock().await;
            self.throttle.submit(waiter).await
        };
        self.granted(admitted, pending).await
    }

    /// Like [`acquire`](Self::acquire), but when the queue is full it fails
    /// at once (`Overloaded`, with `retry_after`) instead of waiting.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Reason, Slots};
    /// let (slots, _drain) = Slots::builder().drain_rate(1.0).capacity(1).build_slots().unwrap();
    /// slots.throttle().pause();
    /// let first = tokio::spawn({
    ///     let slots = slots.clone();
    ///     async move { slots.try_acquire().await.is_ok() }
    /// });
    /// tokio::task::yield_now().await;
    /// let refused = slots.try_acquire().await.unwrap_err();
    /// assert_eq!(refused.reason(), Reason::Overloaded);
    /// assert!(refused.retry_after().is_some());
    /// slots.throttle().resume();
    /// assert!(first.await.unwrap());
    /// # }
    /// ```
    pub async fn try_acquire(&self) -> Result<Slot, Rejected<()>> {
        let (waiter, pending) = pending();
        let admitted = self.throttle.try_submit(waiter);
        self.granted(admitted, pending).await
    }

    /// Like [`acquire`](Self::acquire), counted against `key`'s own quota
    /// (see [`ThrottleBuilder::per_key`]): a key over its quota is refused
    /// at once (`OverQuota`, 429); a full queue is waited for.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::keyed::Quota;
    /// use dripfeed::{Reason, Slots};
    /// let (slots, _drain) = Slots::builder()
    ///     .drain_rate(100.0)
    ///     .per_key(1_000, Quota::per_second(1.0).burst(1.0).unwrap())
    ///     .build_slots()
    ///     .unwrap();
    /// assert!(slots.acquire_keyed("acme", 1.0).await.is_ok());
    /// let over = slots.acquire_keyed("acme", 1.0).await.unwrap_err();
    /// assert_eq!((over.reason(), over.status()), (Reason::OverQuota, 429));
    /// assert!(slots.acquire_keyed("globex", 1.0).await.is_ok());
    /// # }
    /// ```
    pub async fn acquire_keyed<'k>(
        &self,
        key: impl Into<Key<'k>>,
        cost: f64,
    ) -> Result<Slot, Rejected<()>> {
        let (waiter, pending) = pending();
        let admitted = {
            let _turn = self.line.lock().await;
            let keyed = Submission::new(waiter).key(key, cost);
            self.throttle.submit(keyed).await
        };
        self.granted(admitted, pending).await
    }

    /// Like [`acquire`](Self::acquire), giving up after `deadline`: the place
    /// is given back and the refusal says how long the queue would take.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Reason, Slots};
    /// use std::time::Duration;
    /// let (slots, _drain) = Slots::builder().drain_rate(1.0).capacity(10).build_slots().unwrap();
    /// let _first = slots.acquire().await.unwrap(); // at once
    /// let late = slots.acquire_within(Duration::from_millis(500)).await.unwrap_err();
    /// assert_eq!(late.reason(), Reason::Overloaded);
    /// assert_eq!(slots.depth(), 0, "the place was given back");
    /// # }
    /// ```
    pub async fn acquire_within(&self, deadline: Duration) -> Result<Slot, Rejected<()>> {
        match tokio::time::timeout(deadline, self.acquire()).await {
            Ok(granted) => granted,
            Err(_) => {
                let wait = crate::util::num::jittered(self.throttle.shared.queue_wait());
                let limit = self.throttle.shared.queue_limit();
                Err(Rejected::new(
                    (),
                    Reason::Overloaded,
                    Some(wait),
                    Some(limit),
                ))
            }
        }
    }

    /// Waits for an admitted waiter's grant.
    async fn granted(
        &self,
        admitted: Result<Admitted, Rejected<Waiter>>,
        pending: Pending,
    ) -> Result<Slot, Rejected<()>> {
        let admitted = admitted.map_err(|r| r.map(|_| ()))?;
        let withdraw = Withdraw {
            status: &pending.status,
            throttle: &self.throttle,
            id: admitted.id(),
        };
        let granted = pending.grant.await;
        drop(withdraw);
        match granted {
            Ok(()) => Ok(Slot {
                granted: Instant::now(),
                throttle: self.throttle.clone(),
            }),
            // The waiter was dropped unserved: left at shutdown.
            Err(_) => Err(Rejected::new((), Reason::Closed, None, None)),
        }
    }

    /// Acquires a slot, runs `call` in it, and reports its outcome as `judge`
    /// reads it. The future is not polled before the slot is granted.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Slots};
    /// let (slots, _drain) = Slots::builder().drain_rate(50.0).build_slots().unwrap();
    /// let status = slots
    ///     .call(async { 200u16 }, |status| match status {
    ///         429 | 503 => Delivery::Retry { after: None },
    ///         _ => Delivery::Done,
    ///     })
    ///     .await
    ///     .unwrap();
    /// assert_eq!(status, 200);
    /// # }
    /// ```
    pub async fn call<T>(
        &self,
        call: impl Future<Output = T>,
        judge: impl FnOnce(&T) -> Delivery,
    ) -> Result<T, Rejected<()>> {
        let slot = self.acquire().await?;
        let out = call.await;
        slot.report(judge(&out));
        Ok(out)
    }

    /// Live waiters queued.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::Slots;
    /// let (slots, _drain) = Slots::builder().drain_rate(10.0).build_slots().unwrap();
    /// slots.throttle().pause();
    /// let waiting = tokio::spawn({
    ///     let slots = slots.clone();
    ///     async move { slots.acquire().await.is_ok() }
    /// });
    /// tokio::task::yield_now().await;
    /// assert_eq!(slots.depth(), 1);
    /// waiting.abort(); // the caller gives up
    /// let _ = waiting.await;
    /// assert_eq!(slots.depth(), 0, "live waiters only");
    /// # }
    /// ```
    pub fn depth(&self) -> usize {
        self.throttle.depth()
    }

    /// The admission bound.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::Slots;
    /// use std::time::Duration;
    /// let (slots, _drain) = Slots::builder()
    ///     .drain_rate(10.0)
    ///     .latency_budget(Duration::from_secs(3))
    ///     .build_slots()
    ///     .unwrap();
    /// assert_eq!(slots.capacity(), 30, "3 s × 10/s");
    /// # }
    /// ```
    pub fn capacity(&self) -> usize {
        self.throttle.capacity()
    }

    /// The current rate, slots per second.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::Slots;
    /// let (slots, _drain) = Slots::builder().drain_rate(10.0).build_slots().unwrap();
    /// assert_eq!(slots.drain_rate(), 10.0);
    /// slots.set_drain_rate(5.0).unwrap();
    /// assert_eq!(slots.drain_rate(), 5.0);
    /// # }
    /// ```
    pub fn drain_rate(&self) -> f64 {
        self.throttle.drain_rate()
    }

    /// Changes the rate (see [`Throttle::set_drain_rate`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Slots};
    /// use std::time::Duration;
    /// let (slots, _drain) = Slots::builder().drain_rate(10.0).build_slots().unwrap();
    /// assert_eq!(slots.set_drain_rate(5.0), Ok(10.0));
    /// let start = tokio::time::Instant::now();
    /// for _ in 0..3 {
    ///     slots.acquire().await.unwrap().report(Delivery::Done);
    /// }
    /// assert_eq!(start.elapsed(), Duration::from_millis(400), "one every 200 ms");
    /// # }
    /// ```
    pub fn set_drain_rate(&self, rate: f64) -> Result<f64, RateError> {
        self.throttle.set_drain_rate(rate)
    }

    /// Counts and gauges; granted slots count as delivered.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Slots};
    /// let (slots, _drain) = Slots::builder().drain_rate(10.0).build_slots().unwrap();
    /// for _ in 0..3 {
    ///     slots.acquire().await.unwrap().report(Delivery::Done);
    /// }
    /// assert_eq!(slots.stats().delivered(), 3);
    /// # }
    /// ```
    pub fn stats(&self) -> Stats {
        self.throttle.stats()
    }

    /// Stops granting after `grace`; waiters still queued then get `Closed`.
    /// Returns the final counts.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Outcome, Reason, Slots};
    /// use std::time::Duration;
    /// let (slots, _drain) = Slots::builder().drain_rate(10.0).build_slots().unwrap();
    /// slots.throttle().pause();
    /// let waiting = tokio::spawn({
    ///     let slots = slots.clone();
    ///     async move { slots.acquire().await.map(drop) }
    /// });
    /// tokio::task::yield_now().await;
    /// let stats = slots.shutdown(Duration::ZERO).await;
    /// assert_eq!(stats.outcome(Outcome::Returned), 1);
    /// assert_eq!(waiting.await.unwrap().unwrap_err().reason(), Reason::Closed);
    /// # }
    /// ```
    pub async fn shutdown(&self, grace: Duration) -> Stats {
        self.throttle.shutdown(grace).await.stats
    }

    /// The underlying throttle (pause, resume, per-key quotas, …).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::Slots;
    /// use std::time::Duration;
    /// let (slots, _drain) = Slots::builder().drain_rate(10.0).build_slots().unwrap();
    /// slots.throttle().pause();
    /// assert!(slots.acquire_within(Duration::from_secs(1)).await.is_err(), "paused: no grants");
    /// slots.throttle().resume();
    /// assert!(slots.acquire().await.is_ok());
    /// # }
    /// ```
    pub fn throttle(&self) -> &Throttle<Waiter> {
        &self.throttle
    }
}

impl std::fmt::Debug for Slots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Slots").field(&self.throttle).finish()
    }
}
