//! The state shared by the handles and the drain task, and the accounting
//! moves that put a job in its terminal place.

use std::hash::RandomState;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_queue::ArrayQueue;
use tokio::sync::{Notify, Semaphore, watch};

use crate::clock::Clock;
use crate::drain::adapt::{SAMPLE_QUEUE, Sample};
use crate::drain::retry::{Retries, RetryPolicy};
use crate::error::{RateError, Reason, Rejected};
use crate::global::PermitSource;
use crate::headers::{RateLimit, secs};
use crate::keyed::KeyedBuckets;
use crate::metrics::Metrics;
use crate::outcome::{Counters, Outcome, Stats, bump, load};
use crate::overflow::{DeadLetterReason, DeadLetterSink, Overflow};
use crate::queue::Queue;
use crate::rate::Aimd;

/// A hook that takes a job the throttle gives up on.
pub(crate) type Hook<J> = Arc<dyn Fn(J) + Send + Sync>;

/// The validated configuration.
pub(crate) struct Config<J> {
    pub(crate) name: String,
    /// `Some` when the bound follows the rate; `None` for a fixed capacity.
    pub(crate) budget: Option<Duration>,
    pub(crate) fixed_capacity: usize,
    pub(crate) max_rate: f64,
    pub(crate) overflow: Overflow,
    pub(crate) sink: Option<Arc<dyn DeadLetterSink<J>>>,
    pub(crate) max_in_flight: u32,
    pub(crate) max_queue_wait_ns: Option<u64>,
    pub(crate) deliver_timeout: Duration,
    pub(crate) shutdown_grace: Duration,
    pub(crate) on_evicted: Option<Hook<J>>,
    pub(crate) on_expired: Option<Hook<J>>,
    pub(crate) on_failed: Option<Hook<J>>,
    pub(crate) adaptive: Option<Aimd>,
    pub(crate) permits: Option<Arc<dyn PermitSource>>,
    /// Claims a popped job for emission; `false` means its caller withdrew it
    /// (and already gave its place back). `None`: every job is live.
    pub(crate) claim: Option<fn(&J) -> bool>,
    /// Whether deliveries feed the adaptive window (slots report their callers' calls instead).
    pub(crate) sample_deliveries: bool,
    pub(crate) retry: Option<RetryPolicy>,
}

/// `ceil(budget × rate)`, at least 1, saturating; a hair of float noise
/// (0.1 s × 30/s = 3.0000000000000004) does not round up a whole job.
pub(crate) fn bound_for(budget: Duration, rate: f64) -> u64 {
    let jobs = budget.as_secs_f64() * rate;
    let jobs = (jobs * 1e6).round() / 1e6;
    if jobs >= u64::MAX as f64 {
        u64::MAX
    } else {
        (jobs.ceil() as u64).max(1)
    }
}

pub(crate) struct Shared<J> {
    pub(crate) queue: Queue<J>,
    pub(crate) clock: Clock,
    pub(crate) cfg: Config<J>,
    pub(crate) counters: Counters,
    pub(crate) metrics: Metrics,
    pub(crate) sem: Arc<Semaphore>,
    /// Finished attempts for the adaptive drain (only when adaptive).
    pub(crate) samples: Option<ArrayQueue<Sample>>,
    /// Per-key buckets, keyed by a seeded 64-bit hash of the user's key.
    pub(crate) keyed: Option<KeyedBuckets<u64>>,
    pub(crate) key_hasher: RandomState,
    /// Jobs waiting for another attempt (only with a retry policy).
    pub(crate) retries: Option<Retries<J>>,
    /// Wakes the drain: first job after empty, rate change, pause, close.
    pub(crate) wake: Notify,
    rate_bits: AtomicU64,
    paused: AtomicBool,
    room: Notify,
    room_waiters: AtomicUsize,
    /// Serialises rate changes against close.
    control: Mutex<()>,
    /// When closing: the drain's deadline in clock ns; `u64::MAX` while open.
    closing_ns: AtomicU64,
    pub(crate) handles: AtomicUsize,
    overflowing: AtomicBool,
    done: watch::Sender<bool>,
    leftovers: Mutex<Vec<J>>,
}

impl<J> Shared<J> {
    pub(crate) fn new(
        cfg: Config<J>,
        rate: f64,
        ring_capacity: usize,
        keyed: Option<KeyedBuckets<u64>>,
    ) -> Self {
        let bound = match cfg.budget {
            Some(budget) => usize::try_from(bound_for(budget, rate)).unwrap_or(usize::MAX),
            None => cfg.fixed_capacity,
        };
        let metrics = Metrics::register(&cfg.name);
        Shared {
            queue: Queue::new(ring_capacity, bound),
            clock: Clock::new(),
            sem: Arc::new(Semaphore::new(cfg.max_in_flight as usize)),
            samples: cfg.adaptive.as_ref().map(|_| ArrayQueue::new(SAMPLE_QUEUE)),
            keyed,
            key_hasher: RandomState::new(),
            retries: cfg.retry.map(|p| Retries::new(p, ring_capacity)),
            cfg,
            counters: Counters::default(),
            metrics,
            wake: Notify::new(),
            rate_bits: AtomicU64::new(rate.to_bits()),
            paused: AtomicBool::new(false),
            room: Notify::new(),
            room_waiters: AtomicUsize::new(0),
            control: Mutex::new(()),
            closing_ns: AtomicU64::new(u64::MAX),
            handles: AtomicUsize::new(1),
            overflowing: AtomicBool::new(false),
            done: watch::Sender::new(false),
            leftovers: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn rate(&self) -> f64 {
        f64::from_bits(self.rate_bits.load(Ordering::Relaxed))
    }

    /// The admission bound the configuration gives at `rate`.
    pub(crate) fn capacity_at(&self, rate: f64) -> usize {
        match self.cfg.budget {
            Some(budget) => usize::try_from(bound_for(budget, rate))
                .unwrap_or(usize::MAX)
                .min(self.queue.ring_capacity()),
            None => self.cfg.fixed_capacity,
        }
    }

    pub(crate) fn set_rate(&self, rate: f64) -> Result<f64, RateError> {
        if !(rate.is_finite() && rate > 0.0) {
            return Err(RateError::Invalid(rate));
        }
        if rate > self.cfg.max_rate {
            return Err(RateError::AboveMax {
                rate,
                max_rate: self.cfg.max_rate,
            });
        }
        let _guard = self.control.lock().unwrap_or_else(|p| p.into_inner());
        if self.queue.is_closed() {
            return Err(RateError::Closed);
        }
        let old = f64::from_bits(self.rate_bits.swap(rate.to_bits(), Ordering::Relaxed));
        let old_bound = self.queue.bound();
        self.queue.set_bound(self.capacity_at(rate));
        self.wake.notify_one();
        if self.queue.bound() > old_bound {
            self.room.notify_waiters();
        }
        tracing::info!(throttle = %self.cfg.name, old, new = rate, "drain rate changed");
        Ok(old)
    }

    pub(crate) fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Acquire)
    }

    pub(crate) fn set_paused(&self, paused: bool) {
        if self.paused.swap(paused, Ordering::AcqRel) != paused {
            tracing::info!(throttle = %self.cfg.name, paused, "emission paused state changed");
            self.wake.notify_one();
        }
    }

    /// Stops admission; the drain keeps emitting until `grace` has passed
    /// (or an earlier close's deadline), then hands off what remains.
    pub(crate) fn begin_close(&self, grace: Duration) {
        let deadline = self
            .clock
            .precise()
            .saturating_add(u64::try_from(grace.as_nanos()).unwrap_or(u64::MAX));
        let _guard = self.control.lock().unwrap_or_else(|p| p.into_inner());
        let first = !self.queue.is_closed();
        self.queue.close();
        self.closing_ns.fetch_min(deadline, Ordering::AcqRel);
        if first {
            tracing::info!(throttle = %self.cfg.name, ?grace, depth = self.queue.depth(), "shutdown started");
        }
        self.wake.notify_one();
        self.room.notify_waiters();
    }

    /// The drain's deadline when closing.
    pub(crate) fn closing_deadline(&self) -> Option<u64> {
        let ns = self.closing_ns.load(Ordering::Acquire);
        (ns != u64::MAX).then_some(ns)
    }

    /// Releases a popped job's place and wakes one waiting `submit`.
    pub(crate) fn release_place(&self) {
        self.queue.release();
        bump(&self.counters.left_ring);
        if self.room_waiters.load(Ordering::SeqCst) > 0 {
            self.room.notify_one();
        }
    }

    /// A queued job was withdrawn by its caller: its place frees at once,
    /// though the entry stays in the ring until the drain skips it.
    pub(crate) fn withdraw(&self) {
        self.release_place();
        self.finish(Outcome::Cancelled);
    }

    /// Registers a `submit` waiting for room; the guard unregisters it.
    pub(crate) fn wait_for_room(&self) -> (RoomWaiter<'_>, tokio::sync::futures::Notified<'_>) {
        self.room_waiters.fetch_add(1, Ordering::SeqCst);
        (RoomWaiter(&self.room_waiters), self.room.notified())
    }

    /// The time until the queue as it stands has drained.
    pub(crate) fn queue_wait(&self) -> Duration {
        secs(self.queue.depth() as f64 / self.rate())
    }

    /// The queue's `RateLimit` state.
    pub(crate) fn queue_limit(&self) -> RateLimit {
        let rate = self.rate();
        let bound = self.queue.bound();
        let depth = self.queue.depth();
        RateLimit::new(
            "queue",
            bound as u64,
            secs(bound as f64 / rate),
            bound.saturating_sub(depth) as u64,
            secs(depth as f64 / rate),
        )
    }

    /// Counts a refusal and builds it.
    pub(crate) fn refuse(&self, job: J, reason: Reason) -> Rejected<J> {
        self.count_refusal(reason);
        match reason {
            Reason::Overloaded => Rejected::queue(
                job,
                reason,
                self.queue.depth(),
                self.queue.bound(),
                self.rate(),
            ),
            _ => Rejected::new(job, reason, None, None),
        }
    }

    /// Counts a refusal with the given wait hint and limit state.
    pub(crate) fn refuse_with(
        &self,
        job: J,
        reason: Reason,
        retry_after: Option<Duration>,
        limit: Option<RateLimit>,
    ) -> Rejected<J> {
        self.count_refusal(reason);
        Rejected::new(job, reason, retry_after, limit)
    }

    /// One counter per refusal; the outcome and the metrics are derived from
    /// it when published, so producers touch a single shared line.
    fn count_refusal(&self, reason: Reason) {
        bump(&self.counters.rejected[reason.index()]);
        // A full queue means a drain at work, publishing on every wake; other
        // refusals can come while it sleeps (or after its last publish).
        if reason != Reason::Overloaded {
            self.publish_refusals();
        }
    }

    /// Publishes the refusal and overflow counters to the metrics.
    fn publish_refusals(&self) {
        let m = &self.metrics;
        let mut refused = 0;
        for (i, c) in self.counters.rejected.iter().enumerate() {
            refused += load(c);
            m.rejected[i].absolute(load(c));
        }
        m.jobs[Outcome::Refused.index()].absolute(refused);
        for (i, c) in self.counters.overflow.iter().enumerate() {
            m.overflow[i].absolute(load(c));
        }
    }

    /// Counts an overflow event and traces the start of an overflow episode.
    pub(crate) fn overflowed(&self, policy: Overflow) {
        bump(&self.counters.overflow[policy.index()]);
        if !self.overflowing.load(Ordering::Relaxed)
            && !self.overflowing.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(throttle = %self.cfg.name, policy = policy.as_str(), depth = self.queue.depth(), "overflow started");
        }
    }

    /// Called by the drain: ends an overflow episode once there is room again.
    pub(crate) fn check_overflow_ended(&self) {
        if self.overflowing.load(Ordering::Relaxed)
            && self.queue.depth() < self.queue.bound()
            && self.overflowing.swap(false, Ordering::Relaxed)
        {
            let total: u64 = self.counters.overflow.iter().map(load).sum();
            tracing::info!(throttle = %self.cfg.name, overflow_total = total, "overflow ended");
        }
    }

    /// Counts a job into a terminal outcome.
    pub(crate) fn finish(&self, outcome: Outcome) {
        self.counters.outcome(outcome);
        self.metrics.jobs[outcome.index()].increment(1);
    }
}

impl<J: 'static> Shared<J> {
    /// Offers `job` to the sink; on success it is counted as dead-lettered.
    pub(crate) fn dead_letter(&self, job: J, why: DeadLetterReason) -> Result<(), J> {
        match &self.cfg.sink {
            Some(sink) => sink
                .try_offer(job, why)
                .map(|()| self.finish(Outcome::DeadLettered)),
            None => Err(job),
        }
    }

    /// Gives up on a job: to the sink if it takes it, else to `hook`, counted as `outcome`.
    pub(crate) fn give_up(&self, job: J, why: DeadLetterReason, outcome: Outcome) {
        let job = match self.dead_letter(job, why) {
            Ok(()) => return,
            Err(job) => job,
        };
        self.finish(outcome);
        let hook = match outcome {
            Outcome::Evicted => &self.cfg.on_evicted,
            Outcome::Expired => &self.cfg.on_expired,
            _ => &self.cfg.on_failed,
        };
        if let Some(hook) = hook {
            call_hook(&self.cfg.name, hook, job);
        }
    }

    /// Hands an evicted job to `on_evicted` (never to the sink: eviction is head-drop's promise).
    pub(crate) fn evict(&self, job: J) {
        bump(&self.counters.left_ring);
        self.finish(Outcome::Evicted);
        if let Some(hook) = &self.cfg.on_evicted {
            call_hook(&self.cfg.name, hook, job);
        }
    }

    pub(crate) fn stats(&self) -> Stats {
        let depth = self.queue.depth() as u64;
        let mut stats = Stats {
            depth,
            capacity: self.capacity_at(self.rate()) as u64,
            ring_capacity: self.queue.ring_capacity() as u64,
            drain_rate: self.rate(),
            in_flight: 0,
            retry_wait: 0,
            retried: 0,
            admitted: load(&self.counters.left_ring) + depth,
            emitted: 0,
            outcomes: [0; 8],
            rejected: [0; 4],
            overflow: [0; 3],
            expired: 0,
            delivery_failures: 0,
            paused: self.is_paused(),
            closed: self.queue.is_closed(),
        };
        self.counters.snapshot_into(&mut stats);
        stats
    }

    /// Publishes the gauges and the derived admitted counter (drain only).
    pub(crate) fn publish(&self) {
        let m = &self.metrics;
        let depth = self.queue.depth();
        m.depth.set(depth as f64);
        m.capacity.set(self.queue.bound() as f64);
        m.rate.set(self.rate());
        m.in_flight.set(load(&self.counters.in_flight) as f64);
        m.admitted
            .absolute(load(&self.counters.left_ring) + depth as u64);
        self.publish_refusals();
        if let Some(table) = &self.keyed {
            m.keyed_buckets.set(table.len() as f64);
            m.keyed_evictions.absolute(table.evictions());
        }
    }

    /// The drain's last act: stores what shutdown hands back, marks done.
    pub(crate) fn mark_done(&self, returned: Vec<J>) {
        self.publish();
        *self.leftovers.lock().unwrap_or_else(|p| p.into_inner()) = returned;
        self.done.send_replace(true);
    }

    /// Waits for the drain to finish, then takes the leftovers (the first caller gets them).
    pub(crate) async fn wait_done(&self) -> Vec<J> {
        let mut rx = self.done.subscribe();
        // The sender lives in `self`, so this only ends when done is true.
        let _ = rx.wait_for(|done| *done).await;
        std::mem::take(&mut *self.leftovers.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Takes the leftovers without waiting (the drain has finished).
    pub(crate) fn wait_done_now(&self) -> Vec<J> {
        std::mem::take(&mut *self.leftovers.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub(crate) fn is_done(&self) -> bool {
        *self.done.borrow()
    }
}

/// Unregisters a waiting `submit` when dropped.
pub(crate) struct RoomWaiter<'a>(&'a AtomicUsize);

impl Drop for RoomWaiter<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Runs a user hook; a panic in it is logged, never propagated into the drain.
pub(crate) fn call_hook<J>(name: &str, hook: &Hook<J>, job: J) {
    if catch_unwind(AssertUnwindSafe(|| hook(job))).is_err() {
        tracing::error!(throttle = %name, "a job hook panicked");
    }
}
