//! The drain task: one task per throttle that pops jobs and emits them at the
//! drain rate, and the handles to it.
//!
//! Each loop turn reads the clock once, publishes the gauges, then emits
//! every job that is due (see [`pacer`]) as a spawned delivery (see
//! [`dispatch`]). It then sleeps until the next due instant, or until woken:
//! by the first job after the queue was empty, a rate change, pause/resume or
//! shutdown. It never awaits user code.

pub(crate) mod adapt;
pub(crate) mod dispatch;
pub(crate) mod pacer;
pub(crate) mod retry;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::OwnedSemaphorePermit;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::clock::COARSE_REFRESH;
use crate::downstream::Downstream;
use crate::outcome::{Outcome, Stats, bump};
use crate::overflow::DeadLetterReason;
use crate::shared::Shared;
use adapt::Adapt;
use pacer::{Pacer, TICK_NS, TIMER_SLACK_NS};

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
    /// Jobs still queued at the deadline that no dead-letter sink took, oldest first.
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
    handle: JoinHandle<()>,
    shared: Arc<Shared<J>>,
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
        Drain { handle, shared }
    }

    /// Waits until the drain task has finished (after a shutdown, or after
    /// the last handle was dropped) and returns the report. The returned jobs
    /// go to whoever asks first: this or [`Throttle::shutdown`](crate::Throttle::shutdown).
    pub async fn join(self) -> ShutdownReport<J> {
        // The task never panics; if it did, the report still tells what is known.
        let _ = self.handle.await;
        ShutdownReport {
            stats: self.shared.stats(),
            returned: self.shared.wait_done_now(),
        }
    }

    /// Whether the drain task has finished.
    pub fn is_finished(&self) -> bool {
        self.shared.is_done()
    }
}

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
                returned: self.shared.wait_done_now(),
            }),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// How often a paused drain wakes to publish its gauges, ns.
const PAUSED_PUBLISH_NS: u64 = 250_000_000;

/// What the drain waits for at the end of a turn.
enum Wait {
    /// The next due instant (or a coarse-clock refresh).
    Timer(u64),
    /// Jobs are due but every delivery slot is busy.
    Permit,
    /// The queue is empty.
    Idle,
    /// A reserved place's push is under way.
    Yield,
    /// Jobs are due but the shared permit source has none.
    Global,
}

/// The drain task.
pub(crate) async fn run<J: Send + Sync + 'static>(
    shared: Arc<Shared<J>>,
    downstream: Arc<dyn Downstream<J>>,
) {
    let s = &*shared;
    let mut pacer = Pacer::new(s.rate());
    let mut rate_seen = s.rate();
    let mut idle = true;
    // Whether the last wait was for a delivery slot or a shared permit.
    let mut blocked = false;
    let mut permit: Option<OwnedSemaphorePermit> = None;
    let mut next_id: u64 = 0;
    let mut adapt = s.cfg.adaptive.clone().and_then(Adapt::new);
    if let Some(source) = &s.cfg.permits {
        source.set_local_rate(rate_seen);
    }
    let sleep = tokio::time::sleep_until(Instant::now());
    tokio::pin!(sleep);

    loop {
        let now_at = Instant::now();
        let now = s.clock.ns(now_at);
        s.clock.refresh(now);
        s.publish();
        s.check_overflow_ended();
        if let (Some(a), Some(samples)) = (adapt.as_mut(), s.samples.as_ref()) {
            a.absorb(samples);
            if let Some((rate, pause)) = a.decide(now_at, s.rate()) {
                // Closed or out of range: keep the rate; the controller clamps.
                if s.set_rate(rate).is_ok() {
                    follow_rate(s, &mut pacer, &mut rate_seen, rate);
                }
                if let Some(pause) = pause {
                    tracing::info!(throttle = %s.cfg.name, ?pause, "downstream asked to pause");
                    pacer.hold(now.saturating_add(pause.as_nanos() as u64));
                }
            }
        }
        let rate = s.rate();
        if rate != rate_seen {
            follow_rate(s, &mut pacer, &mut rate_seen, rate);
        }
        let closing = s.closing_deadline();
        if let Some(deadline) = closing
            && (now >= deadline
                || (s.queue.depth() == 0 && s.retries.as_ref().is_none_or(|r| r.len() == 0)))
        {
            break;
        }

        let wait = if s.is_paused() {
            idle = true;
            // Wake now and then to publish the gauges while paused.
            Wait::Timer(now.saturating_add(PAUSED_PUBLISH_NS))
        } else {
            if idle {
                pacer.restart(now);
            } else {
                pacer.clamp(now, if blocked { TICK_NS } else { TIMER_SLACK_NS });
            }
            emit_due(
                &shared,
                &downstream,
                &mut pacer,
                now,
                &mut permit,
                &mut next_id,
                &mut idle,
            )
        };

        if let Some(a) = adapt.as_mut() {
            match wait {
                Wait::Idle => a.went_idle(),
                Wait::Permit => a.saturated(),
                Wait::Timer(_) | Wait::Yield | Wait::Global => {}
            }
        }
        blocked = matches!(wait, Wait::Permit | Wait::Global);
        let deadline = closing.unwrap_or(u64::MAX);
        match wait {
            Wait::Yield => tokio::task::yield_now().await,
            Wait::Idle if deadline == u64::MAX => s.wake.notified().await,
            Wait::Idle | Wait::Timer(_) => {
                let refresh = now.saturating_add(COARSE_REFRESH.as_nanos() as u64);
                let due = match wait {
                    Wait::Timer(due) => due.min(refresh),
                    _ => u64::MAX,
                };
                sleep.as_mut().reset(s.clock.instant(due.min(deadline)));
                tokio::select! {
                    () = &mut sleep => {}
                    () = s.wake.notified() => {}
                }
            }
            Wait::Global => {
                let Some(source) = s.cfg.permits.as_ref() else {
                    continue;
                };
                sleep.as_mut().reset(s.clock.instant(deadline));
                tokio::select! {
                    () = source.ready() => {}
                    () = s.wake.notified() => {}
                    () = &mut sleep, if deadline != u64::MAX => {}
                }
            }
            Wait::Permit => {
                sleep.as_mut().reset(s.clock.instant(deadline));
                tokio::select! {
                    got = s.sem.clone().acquire_owned() => permit = got.ok(),
                    () = s.wake.notified() => {}
                    () = &mut sleep, if deadline != u64::MAX => {}
                }
            }
        }
    }

    drop(permit);
    finish(&shared).await;
}

/// Emits every due job; says what to wait for next.
fn emit_due<J: Send + Sync + 'static>(
    shared: &Arc<Shared<J>>,
    downstream: &Arc<dyn Downstream<J>>,
    pacer: &mut Pacer,
    now: u64,
    permit: &mut Option<OwnedSemaphorePermit>,
    next_id: &mut u64,
    idle: &mut bool,
) -> Wait {
    let s = &**shared;
    while pacer.is_due(now) {
        let held = match permit.take() {
            Some(p) => p,
            None => match s.sem.clone().try_acquire_owned() {
                Ok(p) => p,
                Err(_) => return Wait::Permit,
            },
        };
        let retry_due = s.retries.as_ref().is_some_and(|r| r.is_due(now));
        if let Some(source) = &s.cfg.permits
            && (retry_due || s.queue.depth() > 0)
            && !source.try_take()
        {
            *permit = Some(held);
            return Wait::Global;
        }
        // Due retries go first: they were admitted before anything queued now.
        let job = match retry_due.then(|| s.retries.as_ref().and_then(|r| r.pop_due(now))) {
            Some(Some(p)) => {
                s.counters
                    .retry_wait
                    .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                dispatch::Job {
                    job: p.job,
                    id: p.id,
                    attempt: p.attempt,
                    deadline_ns: p.deadline_ns,
                }
            }
            _ => {
                let Some(entry) = s.queue.pop() else {
                    give_back(s);
                    *permit = Some(held);
                    if s.queue.depth() > 0 {
                        return Wait::Yield;
                    }
                    *idle = true;
                    return match s.retries.as_ref().and_then(|r| r.next_due()) {
                        Some(due) => Wait::Timer(due),
                        None => Wait::Idle,
                    };
                };
                if let Some(claim) = s.cfg.claim
                    && !claim(&entry.job)
                {
                    // Withdrawn while queued: its place is already free; no slot spent.
                    give_back(s);
                    *permit = Some(held);
                    continue;
                }
                s.release_place();
                s.metrics.record_wait(std::time::Duration::from_nanos(
                    now.saturating_sub(entry.admitted_ns),
                ));
                *next_id += 1;
                dispatch::Job {
                    job: entry.job,
                    id: *next_id - 1,
                    attempt: 1,
                    deadline_ns: entry.deadline_ns,
                }
            }
        };
        *idle = false;
        if job.deadline_ns <= now {
            // Expired: takes no pacing slot.
            *permit = Some(held);
            give_back(s);
            bump(&s.counters.expired);
            s.metrics.expired.increment(1);
            s.give_up(job.job, DeadLetterReason::Expired, Outcome::Expired);
            continue;
        }
        bump(&s.counters.emitted);
        s.metrics.emitted.increment(1);
        pacer.emitted(now);
        dispatch::spawn(shared.clone(), downstream.clone(), job, held);
    }
    Wait::Timer(pacer.next_due())
}

/// Re-plans the schedule for a new rate, effective from the next emission.
fn follow_rate<J>(s: &Shared<J>, pacer: &mut Pacer, rate_seen: &mut f64, rate: f64) {
    pacer.set_rate(rate);
    *rate_seen = rate;
    if let Some(source) = &s.cfg.permits {
        source.set_local_rate(rate);
    }
}

/// Returns a permit taken for a job that was not emitted.
fn give_back<J>(s: &Shared<J>) {
    if let Some(source) = &s.cfg.permits {
        source.give_back();
    }
}

/// After the deadline (or once the queue is empty while closing): hands off
/// what remains, waits for deliveries in flight, flushes the sink.
async fn finish<J: Send + Sync + 'static>(shared: &Arc<Shared<J>>) {
    let s = &**shared;
    let mut returned = Vec::new();
    // Closed: no new reservation can start, so this ends once the pushes under way land.
    while s.queue.depth() > 0 {
        match s.queue.pop() {
            Some(entry) => {
                if s.cfg.claim.is_some_and(|claim| !claim(&entry.job)) {
                    continue; // withdrawn: its place and count are settled
                }
                s.release_place();
                if let Err(job) = s.dead_letter(entry.job, DeadLetterReason::Shutdown) {
                    s.finish(Outcome::Returned);
                    // A waiter is handed back by dropping it: its caller gets `Closed`.
                    if s.cfg.claim.is_none() {
                        returned.push(job);
                    }
                }
            }
            None => tokio::task::yield_now().await,
        }
    }
    // Every delivery holds a permit until it is accounted (or scheduled for a retry).
    let _all = s.sem.acquire_many(s.cfg.max_in_flight).await;
    if let Some(retries) = &s.retries {
        for p in retries.take_all() {
            s.counters
                .retry_wait
                .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            if let Err(job) = s.dead_letter(p.job, DeadLetterReason::Shutdown) {
                s.finish(Outcome::Returned);
                returned.push(job);
            }
        }
    }
    if let Some(sink) = &s.cfg.sink {
        sink.flush().await;
    }
    let stats = s.stats();
    tracing::info!(
        throttle = %s.cfg.name,
        delivered = stats.delivered(),
        returned = returned.len(),
        dead_lettered = stats.outcome(Outcome::DeadLettered),
        "shutdown complete"
    );
    s.mark_done(returned);
}
