//! Dispatch: how deliveries run, each under an in-flight permit.
//!
//! A delivery owns its job and lends it to the downstream, so whatever the
//! downstream does (fail, hang past `deliver_timeout`, panic) the job is
//! still there afterwards to be counted and put in its place: delivered,
//! scheduled for a retry, or given up on.
//!
//! [`Dispatch::Inline`] (the default) polls the deliveries in the drain task
//! itself, in a set bounded by `max_in_flight`: no task, no allocation for
//! one, no scheduler lock per delivery. A delivery is first polled as it
//! starts; one that ends there never enters the set, and the next delivery
//! is written into its box. [`Dispatch::Spawn`] runs each as its
//! own task, for downstreams that do CPU work in `deliver`.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::task::coop::{Unconstrained, unconstrained};
use tokio::time::{Instant, Sleep};

use crate::accounting::dead_letter::DeadLetterReason;
use crate::accounting::ledger::Event;
use crate::accounting::outcome::Outcome;
use crate::admission::Entry;
use crate::drain::downstream::{Attempt, Delivery, Downstream};
use crate::drain::feedback::AttemptEnd;
use crate::drain::shared::Shared;
use crate::drain::stop::Stop;
use crate::limits::in_flight::{InFlightPermit, Spare};
use crate::util::catch::CatchUnwind;
use crate::util::clock::Clock;
use crate::util::num::nanos;

/// How an attempt ran: to an end, or stopped by a closing drain's
/// deadline (no end: its job is handed off as a queued one is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ran {
    Ended(AttemptEnd),
    Stopped,
}

/// Runs one attempt: the downstream borrows the job; bounded by
/// `deadline` and by `stop`; a panic (even one raised while creating the
/// future) is caught. Nothing is allocated here, and an attempt that
/// answers on its first poll never asks for its deadline nor arms a timer.
pub(crate) async fn attempt<J: Sync + 'static>(
    downstream: &dyn Downstream<J>,
    job: &J,
    attempt: Attempt,
    deadline: impl FnOnce() -> Instant,
    stop: &Stop,
) -> Ran {
    let mut call = CatchUnwind(pin!(async { downstream.deliver(job, attempt).await }));
    // Unconstrained, as tokio's own timeout polls its timer: a downstream
    // that spends the task's coop budget cannot put off its own deadline.
    let mut timer = pin!(None::<Unconstrained<Sleep>>);
    let mut deadline = Some(deadline);
    let mut stopped = pin!(stop.fired());
    std::future::poll_fn(|cx| {
        match Pin::new(&mut call).poll(cx) {
            Poll::Ready(Ok(delivery)) => {
                return Poll::Ready(Ran::Ended(AttemptEnd::Answered(delivery)));
            }
            Poll::Ready(Err(())) => return Poll::Ready(Ran::Ended(AttemptEnd::Panicked)),
            Poll::Pending => {}
        }
        if let Some(deadline) = deadline.take() {
            timer.set(Some(unconstrained(tokio::time::sleep_until(deadline()))));
        }
        if let Some(Poll::Ready(())) = timer.as_mut().as_pin_mut().map(|t| t.poll(cx)) {
            return Poll::Ready(Ran::Ended(AttemptEnd::TimedOut));
        }
        match stopped.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Ran::Stopped),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// Where a drain's deliveries go and what they account to, in one
/// reference count: a delivery takes one, not one for each.
pub(crate) struct Target<J> {
    pub(crate) shared: Arc<Shared<J>>,
    pub(crate) downstream: Arc<dyn Downstream<J>>,
}

/// A job on its way to the downstream.
pub(crate) struct Job<J> {
    pub(crate) entry: Entry<J>,
    /// 1 for the first attempt.
    pub(crate) attempt: u32,
}

/// How deliveries run.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use dripfeed::{Delivery, Dispatch, Throttle};
/// // The downstream hashes and signs each body: CPU work that would hold
/// // up the drain's pacing if it ran in the drain task.
/// let (throttle, _drain) = Throttle::builder()
///     .drain_rate(100.0)
///     .dispatch(Dispatch::Spawn)
///     .build(|_: &Vec<u8>, _| async { Delivery::Done })
///     .unwrap();
/// assert!(throttle.try_submit(vec![1, 2, 3]).is_ok());
/// assert_eq!(Dispatch::default(), Dispatch::Inline);
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Dispatch {
    /// Deliveries are polled by the drain task itself, at most
    /// `max_in_flight` at once. The fastest, and the right choice when
    /// `deliver` mostly awaits I/O (an HTTP call, a database write): the
    /// drain runs a delivery only between its awaits. A `deliver` that
    /// computes for long between awaits delays the drain's next emission by
    /// as much. A delivery is first polled as it starts, with a waker that
    /// does nothing, then (if pending) by the set with its own: like any
    /// future, it must wake the waker of its latest poll.
    #[default]
    Inline,
    /// Each delivery runs as its own tokio task. Use it when `deliver` does
    /// CPU work (parsing, signing, compressing) or may block: pacing stays
    /// on time whatever a delivery does, at the cost of a task per delivery.
    Spawn,
}

/// A delivery in progress (inline mode).
type Running<J> = Pin<Box<dyn Future<Output = Handed<J>> + Send>>;

/// What a delivery hands back as it ends: its reference to the target and
/// its permit's to the in-flight budget, for the next delivery to reuse (a
/// reference taken and given back per delivery is two atomic operations).
pub(crate) struct Handed<J> {
    to: Arc<Target<J>>,
    own: Option<Spare>,
}

/// How often a dispatcher whose deliveries do not end on their first poll
/// tries one again at its start (see [`Dispatcher::start`]).
const PROBE_EVERY: u32 = 64;

/// Makes a delivery's future: [`deliver`], whose future type has no name,
/// so the dispatcher is generic over it.
type Make<J, F> = fn(Arc<Target<J>>, Job<J>, InFlightPermit, bool, bool) -> F;

/// Starts deliveries and, inline, polls them to their end.
pub(crate) struct Dispatcher<J, F> {
    mode: Dispatch,
    running: FuturesUnordered<Running<J>>,
    /// The references a delivery that ended handed back ([`Handed`]).
    spare: Option<Arc<Target<J>>>,
    spare_own: Option<Spare>,
    /// Whether the last delivery polled at its start ended there.
    ends_at_start: bool,
    /// Deliveries started since the last one polled at its start.
    since_probe: u32,
    make: Make<J, F>,
    /// The box of the last delivery that ended at its start (its future
    /// done, holding nothing): the next one is written into it, so a
    /// delivery that ends where it starts allocates nothing. One box kept
    /// for the drain's life.
    ended_box: Option<Pin<Box<F>>>,
}

/// A dispatcher for a drain's deliveries in `mode`.
pub(crate) fn dispatcher<J: Send + Sync + 'static>(
    mode: Dispatch,
) -> Dispatcher<J, impl Future<Output = Handed<J>> + Send + 'static> {
    Dispatcher {
        mode,
        running: FuturesUnordered::new(),
        spare: None,
        spare_own: None,
        ends_at_start: true,
        since_probe: 0,
        make: deliver::<J>,
        ended_box: None,
    }
}

impl<J, F: Future<Output = Handed<J>> + Send + 'static> Dispatcher<J, F> {
    /// A permit's reference to the in-flight budget that a delivery handed
    /// back, for [`InFlight::try_acquire_with`](crate::limits::in_flight::InFlight::try_acquire_with).
    pub(crate) fn spare_permit(&mut self) -> Option<Spare> {
        self.spare_own.take()
    }

    fn keep(&mut self, handed: Handed<J>) {
        self.spare = Some(handed.to);
        if handed.own.is_some() {
            self.spare_own = handed.own;
        }
    }

    /// Whether to poll the next inline delivery as it starts: while
    /// deliveries end on their first poll (a downstream that queues the job
    /// in memory, a cache hit), one that ends there costs no place in the
    /// set. Otherwise (an HTTP call is pending at first) the set would poll
    /// it again at once, so only one start in [`PROBE_EVERY`] looks.
    fn poll_at_start(&mut self) -> bool {
        if self.ends_at_start {
            return true;
        }
        self.since_probe += 1;
        if self.since_probe >= PROBE_EVERY {
            self.since_probe = 0;
            return true;
        }
        false
    }

    /// Starts one delivery attempt; `permit` is held until it is accounted.
    /// `report` says whether the attempt feeds the adaptive window.
    pub(crate) fn start(
        &mut self,
        to: &Arc<Target<J>>,
        job: Job<J>,
        permit: InFlightPermit,
        report: bool,
    ) {
        let inline = self.mode == Dispatch::Inline;
        let to = self.spare.take().unwrap_or_else(|| to.clone());
        let delivery = (self.make)(to, job, permit, report, inline);
        match self.mode {
            Dispatch::Inline => {
                if !self.poll_at_start() {
                    self.running.push(Box::pin(delivery));
                    return;
                }
                let mut slot = match self.ended_box.take() {
                    Some(mut slot) => {
                        // The future in it has ended: replacing it drops nothing.
                        slot.set(delivery);
                        slot
                    }
                    None => Box::pin(delivery),
                };
                // A no-op waker: a delivery still pending goes into the
                // set, which polls it again with its own.
                let mut cx = Context::from_waker(Waker::noop());
                match slot.as_mut().poll(&mut cx) {
                    Poll::Ready(handed) => {
                        self.ends_at_start = true;
                        self.keep(handed);
                        self.ended_box = Some(slot);
                    }
                    Poll::Pending => {
                        self.ends_at_start = false;
                        self.running.push(slot);
                    }
                }
            }
            Dispatch::Spawn => {
                // The target handed back is dropped in the task.
                tokio::spawn(async move {
                    delivery.await;
                });
            }
        }
    }

    /// Resolves when deliveries polled here have landed, with how many
    /// (every one that is ready, in one poll); never while none runs here
    /// (spawned deliveries run on their own). Each poll refreshes `clock`'s
    /// coarse copy once, which the deliveries polled in it read.
    pub(crate) async fn landed(&mut self, clock: &Clock) -> usize {
        std::future::poll_fn(|cx| self.poll_landed(cx, clock)).await
    }

    /// Polls the deliveries running here once: how many landed, or
    /// `Pending` (woken by `cx`) when none did.
    pub(crate) fn poll_landed(&mut self, cx: &mut Context<'_>, clock: &Clock) -> Poll<usize> {
        if self.running.is_empty() {
            return Poll::Pending;
        }
        clock.precise();
        let mut landed = 0;
        loop {
            match self.running.poll_next_unpin(cx) {
                Poll::Ready(Some(handed)) => {
                    landed += 1;
                    self.keep(handed);
                }
                Poll::Ready(None) => return Poll::Ready(landed),
                Poll::Pending if landed > 0 => return Poll::Ready(landed),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// One attempt and its accounting. `inline`: polled by the drain, which
/// keeps the coarse clock fresh on every poll, so the attempt's start and
/// end are read from it rather than from the system clock.
async fn deliver<J: Send + Sync + 'static>(
    to: Arc<Target<J>>,
    job: Job<J>,
    permit: InFlightPermit,
    report: bool,
    inline: bool,
) -> Handed<J> {
    let Job {
        entry,
        attempt: number,
    } = job;
    let s = &*to.shared;
    let downstream = &*to.downstream;
    let read = || {
        if inline {
            s.clock.coarse()
        } else {
            s.clock.precise()
        }
    };
    let started = read();
    let deadline = || {
        s.clock
            .instant(started.saturating_add(nanos(s.cfg.deliver_timeout)))
    };
    let ran = attempt(
        downstream,
        &entry.job,
        Attempt::new(entry.id, number),
        deadline,
        &s.stop,
    )
    .await;
    let ended = match ran {
        Ran::Ended(ended) => ended,
        Ran::Stopped => {
            // Not an attempt that ended: its job is handed off by the
            // drain's finish, as a queued one is.
            s.stopped
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(entry);
            s.ledger.record(Event::Landed);
            let own = permit.free();
            s.admission.wake_drain();
            return Handed { to, own };
        }
    };
    let ended_at = read();
    let took = ended_at.saturating_sub(started);
    s.slowest.note(ended_at, took, inline);
    let latency = Duration::from_nanos(took);
    s.ledger.record(Event::Attempted {
        latency,
        failed: !ended.is_done(),
    });
    if report && let Some(feedback) = &s.feedback {
        feedback.report(latency, ended);
    }
    if let Some(hook) = &s.hook {
        hook.attempt_ended(Attempt::new(entry.id, number), ended);
    }
    if ended.is_done() {
        s.ledger
            .record(Event::Finished(entry.id, Outcome::Delivered));
        s.ended(entry.id);
    } else {
        if ended == AttemptEnd::Panicked {
            tracing::error!(throttle = %s.cfg.name, id = entry.id, "delivery panicked");
        }
        if let Err(entry) = retry(s, ended, entry, number) {
            let why = DeadLetterReason::Failed { attempts: number };
            let taken = s
                .endings
                .give_up(&s.ledger, entry.id, entry.job, why, Outcome::Failed);
            s.gone(entry.id, taken);
        }
    }
    s.ledger.record(Event::Landed);
    let own = permit.free();
    if s.closing_deadline().is_some() || s.hook.is_some() {
        // A closing drain waits for the deliveries still running; a drain
        // with a hook learns it is idle, or that the hook's answer changed.
        s.admission.wake_drain();
    }
    Handed { to, own }
}

/// Schedules another attempt when the failure is worth retrying and
/// attempts remain; hands the entry back otherwise (or when the delay
/// structure is full).
fn retry<J: 'static>(
    s: &Shared<J>,
    ended: AttemptEnd,
    entry: Entry<J>,
    number: u32,
) -> Result<(), Entry<J>> {
    let Some(retries) = &s.retries else {
        return Err(entry);
    };
    let hint = match ended {
        AttemptEnd::Answered(Delivery::Failed) => return Err(entry), // not worth retrying
        AttemptEnd::Answered(Delivery::Retry { after }) => after,
        _ => None,
    };
    if number >= retries.policy.max_attempts() {
        return Err(entry);
    }
    let delay = retries.policy.delay(number + 1, hint, fastrand::f64());
    let due = s.clock.ns(Instant::now()).saturating_add(nanos(delay));
    let id = entry.id;
    // Recorded first: a restart after the retry is queued counts it.
    s.retrying(id, number, delay, &entry.job);
    retries.push(entry, number + 1, due)?;
    s.ledger.record(Event::Retried);
    if let Some(hook) = &s.hook {
        hook.retry_scheduled(Attempt::new(id, number + 1), delay);
    }
    s.admission.wake_drain(); // the drain may be asleep with nothing else due
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn panics_and_hangs_become_endings() {
        let panicking = |_: &u8, _: Attempt| -> std::future::Ready<Delivery> { panic!("boom") };
        let soon = || Instant::now() + Duration::from_secs(1);
        let stop = Stop::default();
        let ended = attempt(&panicking, &1, Attempt::new(0, 1), soon, &stop).await;
        assert_eq!(ended, Ran::Ended(AttemptEnd::Panicked));

        let panics_later = |_: &u8, _: Attempt| async {
            tokio::task::yield_now().await;
            panic!("later")
        };
        let ended = attempt(&panics_later, &1, Attempt::new(0, 1), soon, &stop).await;
        assert_eq!(ended, Ran::Ended(AttemptEnd::Panicked));

        let hangs = |_: &u8, _: Attempt| std::future::pending::<Delivery>();
        let ended = attempt(&hangs, &1, Attempt::new(0, 1), soon, &stop).await;
        assert_eq!(ended, Ran::Ended(AttemptEnd::TimedOut));

        let fine = |_: &u8, _: Attempt| async { Delivery::Done };
        let ended = attempt(&fine, &1, Attempt::new(0, 1), soon, &stop).await;
        assert_eq!(ended, Ran::Ended(AttemptEnd::Answered(Delivery::Done)));

        // A hanging call stops when its drain's deadline comes.
        let later = || Instant::now() + Duration::from_secs(60);
        let running = attempt(&hangs, &1, Attempt::new(0, 1), later, &stop);
        let fire = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            stop.fire();
        };
        let (ran, ()) = tokio::join!(running, fire);
        assert_eq!(ran, Ran::Stopped);
    }
}
