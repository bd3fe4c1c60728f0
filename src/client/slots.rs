//! Awaitable drain slots, for calls that must wait their turn: wrapping an
//! outbound client of a partner API with a quota.
//!
//! [`Slots`] is a throttle whose jobs are waiters. [`Slots::acquire`] queues
//! a waiter and resolves when the drain emits it, at the drain rate, FIFO;
//! when the queue is full it fails at once with a wait hint. The caller then
//! makes its call and [reports](Slot::report) how it went, so an adaptive
//! drain follows the partner's p99 and honours its "slow down" answers.
//!
//! Cancel-safe: dropping a waiting `acquire` gives its place back at once
//! (depth and Retry-After count live waiters only) and the drain skips the
//! withdrawn waiter without spending a pacing slot on it. Withdrawn waiters
//! that crowd the ring (many cancelled while the drain is paused) are purged
//! when a new waiter needs their room.

use std::future::Future;
use std::hash::Hash;
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
use crate::handle::throttle::{Admitted, Throttle};

const WAITING: u8 = 0;
const CLAIMED: u8 = 1;
const WITHDRAWN: u8 = 2;

/// A queued [`Slots::acquire`]: opaque, only [`Slots`] makes them.
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
            shared.ledger.record(Event::Finished(Outcome::Cancelled));
        }
    }
}

/// Drain slots shared by every clone: each [`acquire`](Self::acquire) waits
/// for its turn at the drain rate.
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
}

/// A granted slot: make the call, then [`report`](Self::report) how it went.
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
    pub fn report(self, outcome: Delivery) {
        if let Some(feedback) = &self.throttle.shared.feedback {
            feedback.report(self.granted.elapsed(), AttemptEnd::Answered(outcome));
        }
    }
}

impl ThrottleBuilder<Waiter> {
    /// Builds [`Slots`] and spawns their drain. The overflow policy is always
    /// tail-drop (a full queue refuses at once); hooks and sinks do not apply.
    pub fn build_slots(self) -> Result<(Slots, Drain<Waiter>), BuildError> {
        let (throttle, drain) = self
            .for_slots(Withdrawal { claim, withdrawn })
            .build(Grant)?;
        Ok((Slots { throttle }, drain))
    }
}

impl Slots {
    /// A builder; set at least the drain rate, then call
    /// [`build_slots`](ThrottleBuilder::build_slots).
    pub fn builder() -> ThrottleBuilder<Waiter> {
        ThrottleBuilder::new()
    }

    /// Waits for a slot: resolves when the drain emits this waiter, or fails
    /// at once when the queue is full (`Overloaded`, with `retry_after`) or
    /// closed. Cancel-safe.
    pub async fn acquire(&self) -> Result<Slot, Rejected<()>> {
        self.enqueue(|waiter| self.throttle.try_submit(waiter))
            .await
    }

    /// Like [`acquire`](Self::acquire), counted against `key`'s own quota
    /// (see [`ThrottleBuilder::per_key`]).
    pub async fn acquire_keyed(&self, key: impl Hash, cost: f64) -> Result<Slot, Rejected<()>> {
        self.enqueue(|waiter| self.throttle.try_submit_keyed(key, cost, waiter))
            .await
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

    async fn enqueue(
        &self,
        submit: impl FnOnce(Waiter) -> Result<Admitted, Rejected<Waiter>>,
    ) -> Result<Slot, Rejected<()>> {
        let (tx, rx) = oneshot::channel();
        let status = Arc::new(AtomicU8::new(WAITING));
        let waiter = Waiter {
            status: status.clone(),
            grant: Mutex::new(Some(tx)),
        };
        submit(waiter).map_err(|r| r.map(|_| ()))?;
        let withdraw = Withdraw {
            status: &status,
            throttle: &self.throttle,
        };
        let granted = rx.await;
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
    pub fn depth(&self) -> usize {
        self.throttle.depth()
    }

    /// The admission bound.
    pub fn capacity(&self) -> usize {
        self.throttle.capacity()
    }

    /// The current rate, slots per second.
    pub fn drain_rate(&self) -> f64 {
        self.throttle.drain_rate()
    }

    /// Changes the rate (see [`Throttle::set_drain_rate`]).
    pub fn set_drain_rate(&self, rate: f64) -> Result<f64, RateError> {
        self.throttle.set_drain_rate(rate)
    }

    /// Counts and gauges; granted slots count as delivered.
    pub fn stats(&self) -> Stats {
        self.throttle.stats()
    }

    /// Stops granting after `grace`; waiters still queued then get `Closed`.
    /// Returns the final counts.
    pub async fn shutdown(&self, grace: Duration) -> Stats {
        self.throttle.shutdown(grace).await.stats
    }

    /// The underlying throttle (pause, resume, per-key quotas, …).
    pub fn throttle(&self) -> &Throttle<Waiter> {
        &self.throttle
    }
}

impl std::fmt::Debug for Slots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Slots").field(&self.throttle).finish()
    }
}
