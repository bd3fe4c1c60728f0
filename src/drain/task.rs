//! The drain task as a struct: the state only the drain touches (pacer,
//! fleet permits, the adaptive controller, the idle edge, a spare delivery
//! place) and one small method per step of a turn.
//!
//! Each turn reads the clock once, publishes the gauges, adapts the rate,
//! then emits every job that is due (see [`pacer`](super::pacer)) as a
//! delivery (see [`dispatch`](super::dispatch)). It then sleeps until the
//! next due instant, or until woken: by the first job after the queue was
//! empty, a rate change, pause/resume, a retry scheduled, a refusal to
//! publish, or shutdown. A drain whose ring holds less than a tick's worth
//! at its rate does not sleep while jobs wait and the next is at hand
//! (`Pacer::outruns`): it takes another turn. It never awaits user code.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Instant, Sleep};

use crate::accounting::dead_letter::DeadLetterReason;
use crate::accounting::endings::Offer;
use crate::accounting::ledger::Event;
use crate::accounting::outcome::Outcome;
use crate::drain::downstream::Downstream;
use crate::drain::shared::Shared;
use crate::limits::in_flight::InFlightPermit;
use crate::limits::permits::PermitSource;
use crate::rate::Aimd;
use crate::util::clock::COARSE_REFRESH;
use crate::util::num::nanos;

use super::adapt::Adapt;
use super::dispatch::{Dispatch, Dispatcher, Handed, Job, Target, dispatcher};
use super::fair::{DeliveryOrder, Fair};
use super::hook::Emit;
use super::pacer::{Pacer, TICK_NS, TIMER_SLACK_NS};
use super::slowest;

/// How soon a drain whose dead letters' ends are pending looks again
/// whether it may go idle, at the least (50 ms).
const PENDING_LOOK_AGAIN_NS: u64 = 50_000_000;
/// The shortest time between two publishes of the gauges, ns.
const PUBLISH_EVERY_NS: u64 = 1_000_000;

/// How often a paused drain wakes to publish its gauges, ns.
const PAUSED_PUBLISH_NS: u64 = 250_000_000;

/// What the drain waits for at the end of a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// The next due instant.
    Timer(u64),
    /// Emission is paused: the next publish.
    Paused(u64),
    /// Jobs are due but every delivery place is taken.
    Permit,
    /// Nothing to emit.
    Idle,
    /// A reserved place's push is under way.
    Yield,
    /// Jobs are due but the shared permit source has none.
    Global,
    /// Jobs wait and the next is due within the tick, but the ring holds
    /// less than a tick's worth: the drain takes another turn at once
    /// rather than sleep to the timer's next millisecond.
    Busy,
    /// The drain hook holds emission until a delivery lands.
    Landing,
}

/// What ended a wait.
enum Woke {
    /// The timer, a wake-up or fleet permits.
    Done,
    /// A delivery place freed.
    Place(Option<InFlightPermit>),
    /// A delivery polled by the drain landed.
    Landed,
}

/// What the drain emits next.
enum Next<J> {
    Job(Job<J>, Option<Duration>),
    Nothing(Wait),
}

/// What the drain owns besides the shared state, from the builder.
pub(crate) struct DrainParts {
    pub(crate) adaptive: Option<Aimd>,
    pub(crate) permits: Option<Arc<dyn PermitSource>>,
    /// Whether deliveries feed the adaptive window (granted slots report
    /// their callers' calls instead).
    pub(crate) report_deliveries: bool,
    pub(crate) dispatch: Dispatch,
    pub(crate) order: DeliveryOrder,
}

/// What a drain with a hook that wants to hear of idleness does with
/// nothing to do.
enum Linger {
    /// It has work (or no hook asks).
    No,
    /// Waits until then for work.
    Until(u64),
    /// Tells the hook now.
    Tell,
}

/// `F`: a delivery's future (see [`Dispatcher`]).
pub(crate) struct DrainTask<J, F> {
    shared: Arc<Shared<J>>,
    /// The downstream, with the shared state, for each delivery.
    target: Arc<Target<J>>,
    permits: Option<Arc<dyn PermitSource>>,
    report_deliveries: bool,
    dispatcher: Dispatcher<J, F>,
    pacer: Pacer,
    rate_seen: f64,
    adapt: Option<Adapt>,
    /// A delivery place kept from a turn that could not use it.
    spare: Option<InFlightPermit>,
    /// The queue ran dry (or emission was paused): restart the schedule.
    idle: bool,
    /// The last wait was for a delivery place or a fleet permit.
    blocked: bool,
    /// When the gauges were last published, ns.
    published_ns: u64,
    /// How long the drain lingers with nothing to do before it tells its
    /// hook, ns (`None`: the hook does not ask).
    idle_after_ns: Option<u64>,
    /// Since when it has had nothing queued, waiting or in flight, ns.
    idle_since: Option<u64>,
    /// The clock of the last turn that emitted all that was due, ns.
    last_turn_ns: u64,
    /// The jobs taken from the ring into one queue per key, when the
    /// drain emits round-robin across keys.
    fair: Option<Fair<J>>,
    /// This turn's closing deadline (`None` while open).
    closing: Option<u64>,
}

/// The drain of `shared`, delivering to `downstream`.
pub(crate) fn drain_task<J: Send + Sync + 'static>(
    shared: Arc<Shared<J>>,
    downstream: Arc<dyn Downstream<J>>,
    parts: DrainParts,
) -> DrainTask<J, impl Future<Output = Handed<J>> + Send + 'static> {
    let deliveries = dispatcher(parts.dispatch);
    DrainTask::new(shared, downstream, parts, deliveries)
}

impl<J: Send + Sync + 'static, F: Future<Output = Handed<J>> + Send + 'static> DrainTask<J, F> {
    fn new(
        shared: Arc<Shared<J>>,
        downstream: Arc<dyn Downstream<J>>,
        parts: DrainParts,
        dispatcher: Dispatcher<J, F>,
    ) -> Self {
        let rate = shared.rate();
        if let Some(source) = &parts.permits {
            source.set_local_rate(rate);
        }
        DrainTask {
            target: Arc::new(Target {
                shared: shared.clone(),
                downstream,
            }),
            permits: parts.permits,
            report_deliveries: parts.report_deliveries,
            dispatcher,
            pacer: Pacer::new(rate),
            rate_seen: rate,
            adapt: parts.adaptive.and_then(Adapt::new),
            spare: None,
            idle: true,
            blocked: false,
            published_ns: 0,
            idle_after_ns: shared.hook.as_ref().and_then(|h| h.idle_after()).map(nanos),
            idle_since: None,
            last_turn_ns: 0,
            fair: match parts.order {
                DeliveryOrder::Fifo => None,
                DeliveryOrder::RoundRobinByKey => Some(Fair::new()),
            },
            closing: None,
            shared,
        }
    }

    /// The task: turns until shutdown, then hands off what remains.
    pub(crate) async fn run(mut self) {
        let sleep = tokio::time::sleep_until(Instant::now());
        tokio::pin!(sleep);
        loop {
            let now = self.begin_turn();
            let closing = self.shared.closing_deadline();
            self.closing = closing;
            if closing.is_some_and(|deadline| self.may_stop(now, deadline)) {
                break;
            }
            let mut wait = self.plan(now);
            self.note(wait);
            if closing.is_none() {
                match self.linger(wait, now) {
                    Linger::Tell if self.tell_idle() => continue,
                    Linger::Until(due) => {
                        // A place kept for a job that did not come goes
                        // back to the set's budget while this one lingers.
                        self.spare = None;
                        wait = Wait::Timer(due);
                    }
                    _ => {}
                }
            }
            // About to sleep for longer than a publish interval: publish first.
            let long = match wait {
                Wait::Timer(due) => due > now.saturating_add(PUBLISH_EVERY_NS),
                Wait::Idle | Wait::Paused(_) | Wait::Landing => true,
                Wait::Permit | Wait::Yield | Wait::Global | Wait::Busy => false,
            };
            if long && self.published_ns != now {
                self.publish(now);
            }
            self.wait(wait, now, closing, sleep.as_mut()).await;
        }
        self.spare = None;
        self.finish().await;
    }

    /// Reads the clock, publishes, adapts and follows the rate.
    fn begin_turn(&mut self) -> u64 {
        let shared = self.shared.clone();
        let s = &*shared;
        let at = Instant::now();
        let now = s.clock.ns(at);
        s.clock.refresh(now);
        // At most once a millisecond: a busy drain turns far more often.
        if now >= self.published_ns.saturating_add(PUBLISH_EVERY_NS) || self.idle {
            self.publish(now);
        }
        // An overflow episode ends once the queue has drained to three
        // quarters of its bound, not with every place a full queue frees
        // (which would log a start and an end per emission).
        let bound = s.admission.bound();
        if s.admission.depth() <= bound - bound / 4 {
            s.ledger.room_again();
        }
        self.adapt(at, now);
        let rate = s.rate();
        if rate != self.rate_seen {
            self.follow_rate(rate);
        }
        now
    }

    fn publish(&mut self, now: u64) {
        self.shared.publish();
        self.published_ns = now;
    }

    /// Feeds the adaptive controller and applies what it decides.
    fn adapt(&mut self, at: Instant, now: u64) {
        let shared = self.shared.clone();
        let s = &*shared;
        let Some(a) = self.adapt.as_mut() else {
            return;
        };
        if let Some(feedback) = &s.feedback {
            a.absorb(feedback);
        }
        let Some((rate, pause)) = a.decide(at, s.rate()) else {
            return;
        };
        // `set_limits` may have lowered the ceiling below the controller's own.
        let rate = rate.min(s.limit());
        // Closed or out of range: keep the rate; the controller clamps.
        if s.set_rate(rate).is_ok() {
            self.follow_rate(rate);
        }
        if let Some(pause) = pause {
            tracing::info!(throttle = %s.cfg.name, ?pause, "downstream asked to pause");
            self.pacer.hold(now.saturating_add(nanos(pause)));
        }
    }

    /// Re-plans the schedule for a new rate, effective from the next emission.
    fn follow_rate(&mut self, rate: f64) {
        self.pacer.set_rate(rate);
        self.rate_seen = rate;
        if let Some(source) = &self.permits {
            source.set_local_rate(rate);
        }
    }

    /// Closing: stop at the deadline, or once nothing is in flight and
    /// nothing more will start: nothing queued or waiting for a retry (a
    /// delivery still running may schedule one), or too late for another
    /// delivery to end before the deadline.
    fn may_stop(&self, now: u64, deadline: u64) -> bool {
        let s = &*self.shared;
        if now >= deadline {
            return true;
        }
        // In flight first: a delivery pushes its retry before it lands, so
        // none is missed between the two reads. A retry due only at or
        // after the deadline cannot be tried before it: the drain hands it
        // off now as it would then.
        s.ledger.in_flight() == 0
            && (slowest::outlasts(now, s.slowest.faded_at(now), deadline)
                || (s.admission.depth() == 0
                    && s.retries
                        .as_ref()
                        .is_none_or(|r| r.next_due().is_none_or(|due| due >= deadline))))
    }

    /// Emits what is due; says what to wait for next.
    fn plan(&mut self, now: u64) -> Wait {
        if self.shared.is_paused() {
            self.idle = true;
            return Wait::Paused(now.saturating_add(PAUSED_PUBLISH_NS));
        }
        if self.idle {
            self.pacer.restart(now);
        } else {
            let allowance = if self.blocked {
                TICK_NS
            } else {
                TIMER_SLACK_NS
            };
            self.pacer.clamp(now, allowance);
        }
        self.emit_due(now)
    }

    /// Tells the controller what the turn saw.
    fn note(&mut self, wait: Wait) {
        if let Some(a) = self.adapt.as_mut() {
            match wait {
                Wait::Idle | Wait::Paused(_) | Wait::Landing => a.went_idle(),
                Wait::Permit => a.saturated(),
                Wait::Timer(_) | Wait::Yield | Wait::Global | Wait::Busy => {}
            }
        }
        self.blocked = matches!(wait, Wait::Permit | Wait::Global);
    }

    /// With nothing queued, waiting or in flight, a drain whose hook asks
    /// to hear of idleness lingers for the hook's `idle_after` (a job
    /// arriving meanwhile finds the drain as it was, and AIMD keeps its
    /// window across sparse traffic), then tells the hook.
    fn linger(&mut self, wait: Wait, now: u64) -> Linger {
        let s = &*self.shared;
        let Some(after) = self.idle_after_ns else {
            return Linger::No;
        };
        let empty = wait == Wait::Idle
            && s.ledger.in_flight() == 0
            && s.retries.as_ref().is_none_or(|r| r.len() == 0);
        if !empty {
            self.idle_since = None;
            return Linger::No;
        }
        // Dead-lettered jobs whose records wait for the sink to store
        // them keep the throttle: its flushing task ends them once the
        // sink has (a sink that cannot write holds their lines and writes
        // them later). Handed back now, they would stay in the journal,
        // to be delivered again at the next start beside their lines.
        if s.dead_ends_pending() {
            self.idle_since = None;
            // Looked at again later: at least the flushing task's first
            // backoff, so an `idle_after` of zero does not spin.
            return Linger::Until(now.saturating_add(after.max(PENDING_LOOK_AGAIN_NS)));
        }
        let due = self.idle_since.get_or_insert(now).saturating_add(after);
        if now >= due {
            self.idle_since = None;
            Linger::Tell
        } else {
            Linger::Until(due)
        }
    }

    /// Tells the hook the drain has nothing to do; it may shut the
    /// throttle down. Whether it did.
    fn tell_idle(&self) -> bool {
        let Some(hook) = &self.shared.hook else {
            return false;
        };
        hook.idle();
        self.shared.closing_deadline().is_some()
    }

    /// Asks the hook, when a job waits: `Err` is what to wait for instead
    /// of sending; `Ok(true)` sends a probe.
    fn ask_hook(&mut self, now: u64) -> Result<bool, Wait> {
        let s = &*self.shared;
        let Some(hook) = &s.hook else {
            return Ok(false);
        };
        let waiting = s.admission.depth() > 0 || s.retries.as_ref().is_some_and(|r| r.is_due(now));
        if !waiting {
            return Ok(false);
        }
        match hook.before_emit(s.clock.instant(now)) {
            Emit::Send => Ok(false),
            Emit::Probe => Ok(true),
            Emit::AfterLanding => {
                self.idle = true;
                Err(Wait::Landing)
            }
            Emit::Until(until) => {
                // Sent nothing meanwhile: the schedule restarts after.
                self.idle = true;
                Err(Wait::Timer(s.clock.ns(until).max(now)))
            }
        }
    }

    /// Emits every due job.
    fn emit_due(&mut self, now: u64) -> Wait {
        let source = self.permits.clone();
        while self.pacer.is_due(now) {
            // Closing: no delivery that would be cut off at the deadline
            // (handed off instead, its receiver never asked twice).
            if let Some(deadline) = self.closing
                && slowest::outlasts(now, self.shared.slowest.faded_at(now), deadline)
            {
                return Wait::Idle;
            }
            let probe = match self.ask_hook(now) {
                Ok(probe) => probe,
                Err(wait) => return wait,
            };
            let shared = &self.shared;
            let dispatcher = &mut self.dispatcher;
            let Some(place) = self
                .spare
                .take()
                .or_else(|| shared.in_flight.try_acquire_with(dispatcher.spare_permit()))
            else {
                return Wait::Permit;
            };
            let retry_due = shared.retries.as_ref().is_some_and(|r| r.is_due(now));
            // A fleet permit, only when a job waits; dropped unspent, it goes back.
            let permit = match &source {
                Some(source) if retry_due || shared.admission.depth() > 0 => {
                    match source.try_take() {
                        Some(permit) => Some(permit),
                        None => {
                            self.spare = Some(place);
                            return Wait::Global;
                        }
                    }
                }
                _ => None,
            };
            let (job, waited) = match self.next_job(now, retry_due) {
                Next::Job(job, waited) => (job, waited),
                Next::Nothing(wait) => {
                    self.spare = Some(place);
                    return wait;
                }
            };
            self.idle = false;
            if job.entry.deadline_ns <= now {
                // Expired: takes no pacing slot (nor the permit).
                self.spare = Some(place);
                self.expire(job);
                continue;
            }
            if let Some(permit) = permit {
                permit.spend();
            }
            self.shared.ledger.record(Event::Emitted { waited });
            self.pacer.emitted(now);
            if let Some(cost) = &self.shared.cost {
                // User code: a panic in it counts as one unit, never the drain's end.
                let units = crate::util::catch::guarded(&self.shared.cfg.name, "cost_by", || {
                    cost(&job.entry.job)
                })
                .unwrap_or(1)
                .max(1);
                self.pacer.charge(units - 1);
                self.shared.note_cost(units);
            }
            if probe && let Some(hook) = &self.shared.hook {
                hook.probe_sent();
            }
            self.dispatcher
                .start(&self.target, job, place, self.report_deliveries);
        }
        // Only when the clock moved since the last such turn: a clock that
        // stands still (tokio's paused time) must end in a sleep.
        let moved = std::mem::replace(&mut self.last_turn_ns, now) != now;
        let adm = &self.shared.admission;
        if moved && adm.depth() > 0 && self.pacer.outruns(now, adm.bound()) {
            return Wait::Busy;
        }
        Wait::Timer(self.pacer.next_wake(now))
    }

    /// A due retry (they were admitted before anything queued now), else
    /// the oldest queued job.
    fn next_job(&mut self, now: u64, retry_due: bool) -> Next<J> {
        let s = &*self.shared;
        if retry_due && let Some(p) = s.retries.as_ref().and_then(|r| r.pop_due(now)) {
            let job = Job {
                entry: p.entry,
                attempt: p.attempt,
            };
            return Next::Job(job, None);
        }
        let popped = match &mut self.fair {
            None => s.admission.pop().map(|(entry, place)| {
                drop(place);
                entry
            }),
            Some(fair) => {
                while let Some(entry) = s.admission.pop_held() {
                    fair.push(entry);
                }
                fair.pop()
                    .inspect(|entry| s.admission.release_held(entry.key))
            }
        };
        match popped {
            Some(entry) => {
                let waited = Duration::from_nanos(now.saturating_sub(entry.admitted_ns));
                let attempt = entry.attempt;
                Next::Job(Job { entry, attempt }, Some(waited))
            }
            None if s.admission.depth() > 0 => Next::Nothing(Wait::Yield),
            None => {
                self.idle = true;
                let next_retry = s.retries.as_ref().and_then(|r| r.next_due());
                Next::Nothing(next_retry.map_or(Wait::Idle, Wait::Timer))
            }
        }
    }

    fn expire(&self, job: Job<J>) {
        let s = &*self.shared;
        s.ledger.record(Event::Expired);
        let taken = s.endings.give_up(
            &s.ledger,
            job.entry.id,
            job.entry.job,
            DeadLetterReason::Expired,
            Outcome::Expired,
        );
        s.gone(job.entry.id, taken);
    }

    /// Sleeps until what `wait` names, a wake-up, or the closing deadline,
    /// polling the deliveries that run in this task meanwhile; a busy drain
    /// ([`Wait::Busy`]) polls them once and takes its next turn at once. A landing
    /// ends the wait when it matters: a delivery place freed for a drain
    /// that waits for one, or a closing drain that may be done.
    async fn wait(
        &mut self,
        wait: Wait,
        now: u64,
        closing: Option<u64>,
        mut sleep: Pin<&mut Sleep>,
    ) {
        let shared = self.shared.clone();
        let s = &*shared;
        let deadline = closing.unwrap_or(u64::MAX);
        let woken = s.admission.drain_wakeups();
        match wait {
            Wait::Yield => return tokio::task::yield_now().await,
            Wait::Busy => {
                // What landed meanwhile, without waiting; then the next
                // turn, yielding to the runtime only once the task's
                // budget is spent (a yield per turn would poll the I/O
                // driver each time).
                let clock = &s.clock;
                let dispatcher = &mut self.dispatcher;
                std::future::poll_fn(|cx| {
                    let _ = dispatcher.poll_landed(cx, clock);
                    std::task::Poll::Ready(())
                })
                .await;
                return tokio::task::coop::consume_budget().await;
            }
            _ => {}
        }
        let until = match wait {
            // The coarse clock is refreshed while jobs wait in the ring.
            Wait::Timer(due) if s.admission.depth() > 0 => {
                due.min(now.saturating_add(nanos(COARSE_REFRESH)))
            }
            Wait::Timer(due) | Wait::Paused(due) => due,
            _ => u64::MAX,
        };
        let until = until.min(deadline);
        sleep.as_mut().reset(s.clock.instant(until));
        let timed = until != u64::MAX;
        let source = self.permits.clone();
        let notified = woken.notified();
        let permits_ready = async {
            match &source {
                Some(source) if wait == Wait::Global => source.ready().await,
                _ => std::future::pending().await,
            }
        };
        let place_free = async {
            match wait {
                Wait::Permit => s.in_flight.acquire().await,
                _ => std::future::pending().await,
            }
        };
        tokio::pin!(notified, permits_ready, place_free);
        loop {
            let woke = tokio::select! {
                () = &mut sleep, if timed => Woke::Done,
                () = notified.as_mut() => Woke::Done,
                () = permits_ready.as_mut() => Woke::Done,
                got = place_free.as_mut() => Woke::Place(got),
                _ = self.dispatcher.landed(&s.clock) => Woke::Landed,
            };
            match woke {
                Woke::Done => return,
                Woke::Place(got) => {
                    self.spare = got;
                    return;
                }
                Woke::Landed
                    if closing.is_some()
                        || matches!(wait, Wait::Permit | Wait::Landing)
                        || (wait == Wait::Idle && self.idle_after_ns.is_some()) =>
                {
                    return;
                }
                Woke::Landed => {}
            }
        }
    }

    /// After the deadline (or once nothing is left while closing): hands
    /// off what remains, stops the deliveries still running (their jobs
    /// handed off too), flushes the sink.
    async fn finish(mut self) {
        let shared = self.shared.clone();
        let s = &*shared;
        // What its life dead-lettered before: the log line below tells
        // only what the shutdown itself handed off.
        let before = s.stats().outcome(Outcome::DeadLettered);
        let mut returned = Vec::new();
        let held = self.fair.as_mut().map(Fair::take_all).unwrap_or_default();
        for entry in held {
            s.admission.release_held(entry.key);
            self.hand_back(entry.id, entry.job, &mut returned);
        }
        // Closed: no new place can be taken, so this ends once the pushes under way land.
        while s.admission.depth() > 0 {
            match s.admission.pop() {
                Some((entry, place)) => {
                    drop(place);
                    self.hand_back(entry.id, entry.job, &mut returned);
                }
                None => tokio::task::yield_now().await,
            }
        }
        // Deliveries still running stop where they are (the deadline has
        // come, or none is running); each lands at once, its job handed off
        // below. Every other delivery is accounted (or has scheduled its
        // retry) before it lands; those polled here are driven to their end.
        s.stop.fire();
        while s.ledger.in_flight() > 0 {
            let woken = s.admission.drain_wakeups().notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if s.ledger.in_flight() == 0 {
                break;
            }
            tokio::select! {
                () = woken => {}
                _ = self.dispatcher.landed(&s.clock) => {}
            }
        }
        let stopped = std::mem::take(&mut *s.stopped.lock().unwrap_or_else(|p| p.into_inner()));
        for entry in stopped {
            self.hand_back(entry.id, entry.job, &mut returned);
        }
        if let Some(retries) = &s.retries {
            for p in retries.take_all() {
                self.hand_back(p.entry.id, p.entry.job, &mut returned);
            }
        }
        let flushed = s.endings.flush().await;
        s.close_journal(flushed).await;
        let stats = s.stats();
        let dead_lettered = stats.outcome(Outcome::DeadLettered).saturating_sub(before);
        if returned.is_empty() && dead_lettered == 0 {
            tracing::debug!(throttle = %s.cfg.name, delivered = stats.delivered(), "shutdown complete");
        } else {
            tracing::info!(
                throttle = %s.cfg.name,
                delivered = stats.delivered(),
                returned = returned.len(),
                dead_lettered,
                "shutdown complete"
            );
        }
        s.mark_done(returned);
    }

    /// A leftover at shutdown: kept in the journal for the next start, else
    /// to the sink, else back to the caller.
    fn hand_back(&self, id: u64, job: J, returned: &mut Vec<J>) {
        let s = &*self.shared;
        if s.keeps_leftovers() {
            s.ledger.record(Event::Finished(id, Outcome::Kept));
            return;
        }
        match s
            .endings
            .offer(&s.ledger, id, job, DeadLetterReason::Shutdown)
        {
            Offer::Taken => s.dead_lettered(id),
            Offer::Lost => s.ledger.record(Event::Finished(id, Outcome::Returned)),
            Offer::Refused(job) => {
                s.ledger.record(Event::Finished(id, Outcome::Returned));
                returned.push(job);
            }
        }
    }
}
