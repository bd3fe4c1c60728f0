//! What the handles and the drain share: the admission object, the clock,
//! the ledger, the rate and the lifecycle (pause, close, done). The drain
//! owns it (the handles, above, reach the drain through it); what only the
//! drain touches (pacer, fleet permits, the adaptive controller, idle
//! state) lives in the drain task, not here.

use std::hash::RandomState;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use super::feedback::Feedback;
use super::hook::DrainHook;
use super::retry_queue::Retries;
use super::slowest::Slowest;
use super::stop::Stop;
use crate::accounting::endings::Endings;
use crate::accounting::ledger::{Gauges, Ledger};
use crate::accounting::outcome::Stats;
use crate::admission::overflow::Overflow;
use crate::admission::rate_limit::RateLimit;
use crate::admission::reason::Reason;
use crate::admission::rejected::Rejected;
use crate::admission::{Admission, Entry, Terms};
use crate::error::RateError;
use crate::keyed::{BucketStore, KeyedBuckets, Prehashed};
use crate::limits::in_flight::InFlight;
use crate::util::clock::Clock;
use crate::util::num::{nanos, secs};

/// The validated configuration the handles and the drain read.
pub(crate) struct Config {
    pub(crate) name: String,
    /// `Some` when the bound follows the rate; `None` for a fixed capacity.
    pub(crate) budget: Option<Duration>,
    pub(crate) fixed_capacity: usize,
    pub(crate) max_rate: f64,
    pub(crate) overflow: Overflow,
    pub(crate) max_queue_wait_ns: Option<u64>,
    pub(crate) deliver_timeout: Duration,
    pub(crate) shutdown_grace: Duration,
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

/// Per-key buckets, keyed by a seeded 64-bit hash of the user's key.
pub(crate) struct Keyed {
    /// Its keys are seeded hashes already: the table only mixes them.
    pub(crate) table: KeyedBuckets<u64, Prehashed>,
    pub(crate) hasher: RandomState,
}

pub(crate) struct Shared<J> {
    pub(crate) cfg: Config,
    pub(crate) admission: Admission<J>,
    pub(crate) clock: Clock,
    pub(crate) ledger: Ledger,
    pub(crate) endings: Endings<J>,
    pub(crate) keyed: Option<Keyed>,
    /// Per-key buckets in a store that is awaited (Redis, PostgreSQL, …).
    pub(crate) store: Option<Arc<dyn BucketStore>>,
    /// Hashes a store's keys for their share of the queue.
    pub(crate) key_hasher: RandomState,
    pub(crate) in_flight: InFlight,
    /// Finished attempts for the adaptive drain (only when adaptive).
    pub(crate) feedback: Option<Feedback>,
    /// Jobs waiting for another attempt (only with a retry policy).
    pub(crate) retries: Option<Retries<J>>,
    /// The journal jobs are recorded in (only with one).
    #[cfg(feature = "journal")]
    pub(crate) journal: Option<crate::journal::journaling::Journaling<J>>,
    /// The user's drain hook, asked before each emission and told of ends.
    pub(crate) hook: Option<Arc<dyn DrainHook>>,
    /// A job's cost in units of the drain's rate (`None`: one each).
    pub(crate) cost: Option<CostFn<J>>,
    /// The mean cost of the jobs emitted lately (an f64), for the wait a
    /// full queue answers with.
    mean_cost_bits: AtomicU64,
    rate_bits: AtomicU64,
    /// The highest rate now (at most `cfg.max_rate`; lowered by
    /// [`set_limits`](Self::set_limits)).
    limit_bits: AtomicU64,
    /// The latency budget now in ns (`u64::MAX` for a fixed capacity;
    /// changed by [`set_limits`](Self::set_limits) within what the ring holds).
    budget_ns: AtomicU64,
    paused: AtomicBool,
    /// Serialises rate changes against close.
    control: Mutex<()>,
    /// When closing: the drain's deadline in clock ns; `u64::MAX` while open.
    closing_ns: AtomicU64,
    /// Closing for good: leftovers go to the sink even with a journal.
    pub(crate) retiring: AtomicBool,
    pub(crate) handles: AtomicUsize,
    done: watch::Sender<bool>,
    leftovers: Mutex<Vec<J>>,
    /// Fired at a closing drain's deadline: deliveries still running stop.
    pub(crate) stop: Stop,
    /// The jobs of deliveries stopped so, for the drain to hand off.
    pub(crate) stopped: Mutex<Vec<Entry<J>>>,
    /// How long deliveries take lately.
    pub(crate) slowest: Slowest,
}

/// The parts a `Shared` is made of, from the builder.
pub(crate) struct Parts<J> {
    pub(crate) cfg: Config,
    /// Deliveries run in the drain task (`Dispatch::Inline`): the ledger's
    /// delivery counts have one writer.
    pub(crate) inline: bool,
    pub(crate) admission: Admission<J>,
    pub(crate) endings: Endings<J>,
    pub(crate) keyed: Option<KeyedBuckets<u64, Prehashed>>,
    pub(crate) store: Option<Arc<dyn BucketStore>>,
    pub(crate) in_flight: InFlight,
    pub(crate) feedback: Option<Feedback>,
    pub(crate) retries: Option<Retries<J>>,
    #[cfg(feature = "journal")]
    pub(crate) journal: Option<crate::journal::journaling::Journaling<J>>,
    /// Labels on every metric beside `throttle`.
    pub(crate) labels: Vec<(String, String)>,
    /// Whether the metric series may be shared (published as increments).
    pub(crate) summed: bool,
    /// Where the estimate of a delivery's time starts, ns.
    pub(crate) slowest_seed: u64,
    pub(crate) hook: Option<Arc<dyn DrainHook>>,
    pub(crate) cost: Option<CostFn<J>>,
    pub(crate) rate: f64,
}

/// What a job costs the drain, in units of its rate.
pub(crate) type CostFn<J> = Arc<dyn Fn(&J) -> u32 + Send + Sync>;

impl<J> Shared<J> {
    pub(crate) fn new(parts: Parts<J>) -> Self {
        let on_end = parts.hook.clone().map(|hook| {
            Box::new(move |id, outcome| hook.job_ended(id, outcome))
                as Box<dyn Fn(u64, _) + Send + Sync>
        });
        let ledger = Ledger::new(
            &parts.cfg.name,
            parts.cfg.overflow,
            &parts.labels,
            parts.summed,
            on_end,
            parts.inline,
        );
        Shared {
            admission: parts.admission,
            clock: Clock::new(),
            ledger,
            endings: parts.endings,
            keyed: parts.keyed.map(|table| Keyed {
                table,
                hasher: RandomState::new(),
            }),
            store: parts.store,
            key_hasher: RandomState::new(),
            in_flight: parts.in_flight,
            feedback: parts.feedback,
            retries: parts.retries,
            #[cfg(feature = "journal")]
            journal: parts.journal,
            hook: parts.hook,
            cost: parts.cost,
            mean_cost_bits: AtomicU64::new(0f64.to_bits()),
            rate_bits: AtomicU64::new(parts.rate.to_bits()),
            limit_bits: AtomicU64::new(parts.cfg.max_rate.to_bits()),
            budget_ns: AtomicU64::new(parts.cfg.budget.map_or(u64::MAX, nanos)),
            cfg: parts.cfg,
            paused: AtomicBool::new(false),
            control: Mutex::new(()),
            closing_ns: AtomicU64::new(u64::MAX),
            retiring: AtomicBool::new(false),
            handles: AtomicUsize::new(1),
            done: watch::Sender::new(false),
            leftovers: Mutex::new(Vec::new()),
            stop: Stop::default(),
            stopped: Mutex::new(Vec::new()),
            slowest: Slowest::seeded(parts.slowest_seed),
        }
    }

    pub(crate) fn rate(&self) -> f64 {
        f64::from_bits(self.rate_bits.load(Ordering::Relaxed))
    }

    /// The highest rate now.
    pub(crate) fn limit(&self) -> f64 {
        f64::from_bits(self.limit_bits.load(Ordering::Relaxed))
    }

    /// The latency budget now, when the bound follows the rate.
    pub(crate) fn budget(&self) -> Option<Duration> {
        match self.budget_ns.load(Ordering::Relaxed) {
            u64::MAX => None,
            ns => Some(Duration::from_nanos(ns)),
        }
    }

    /// The admission bound the configuration gives at `rate`.
    pub(crate) fn capacity_at(&self, rate: f64) -> usize {
        match self.budget() {
            Some(budget) => usize::try_from(bound_for(budget, rate))
                .unwrap_or(usize::MAX)
                .min(self.admission.ring_capacity()),
            None => self.cfg.fixed_capacity,
        }
    }

    pub(crate) fn set_rate(&self, rate: f64) -> Result<f64, RateError> {
        if !(rate.is_finite() && rate > 0.0) {
            return Err(RateError::Invalid(rate));
        }
        let _guard = self.control.lock().unwrap_or_else(|p| p.into_inner());
        let max_rate = self.limit();
        if rate > max_rate {
            return Err(RateError::AboveMax { rate, max_rate });
        }
        if self.admission.is_closed() {
            return Err(RateError::Closed);
        }
        let old = self.apply_rate(rate);
        tracing::info!(throttle = %self.cfg.name, old, new = rate, "drain rate changed");
        Ok(old)
    }

    /// Under the control lock: the new rate, the bound it gives, and the
    /// drain told. Returns the old rate.
    fn apply_rate(&self, rate: f64) -> f64 {
        let old = f64::from_bits(self.rate_bits.swap(rate.to_bits(), Ordering::Relaxed));
        self.admission.set_bound(self.capacity_at(rate));
        self.admission.wake_drain();
        old
    }

    /// A new ceiling and budget on a running throttle: applies them with
    /// `rate` (at most `ceiling`) when the ring holds a full `budget` at
    /// `ceiling`, else refuses with the highest ceiling it holds
    /// (`AboveMax`; nothing changes).
    /// Whether [`set_limits`](Self::set_limits) would take `ceiling` and
    /// `budget` now (the budget that applies, if any), changing nothing.
    pub(crate) fn check_limits(
        &self,
        ceiling: f64,
        budget: Option<Duration>,
    ) -> Result<Option<Duration>, RateError> {
        if self.admission.is_closed() {
            return Err(RateError::Closed);
        }
        let budget = budget.filter(|_| self.budget().is_some());
        let ring = self.admission.ring_capacity() as u64;
        let holds = |c: f64| budget.is_none_or(|b| bound_for(b, c) <= ring);
        if ceiling > self.cfg.max_rate || !holds(ceiling) {
            let by_ring = budget.map_or(f64::INFINITY, |b| ring as f64 / b.as_secs_f64());
            return Err(RateError::AboveMax {
                rate: ceiling,
                max_rate: self.cfg.max_rate.min(by_ring),
            });
        }
        Ok(budget)
    }

    pub(crate) fn set_limits(
        &self,
        ceiling: f64,
        budget: Option<Duration>,
        rate: f64,
    ) -> Result<(), RateError> {
        let _guard = self.control.lock().unwrap_or_else(|p| p.into_inner());
        let budget = self.check_limits(ceiling, budget)?;
        let rate = rate.min(ceiling);
        self.limit_bits.store(ceiling.to_bits(), Ordering::Relaxed);
        if let Some(b) = budget {
            self.budget_ns.store(nanos(b), Ordering::Relaxed);
        }
        let old = self.apply_rate(rate);
        tracing::info!(throttle = %self.cfg.name, old, new = rate, ceiling, ?budget, "limits changed");
        Ok(())
    }

    pub(crate) fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Acquire)
    }

    pub(crate) fn set_paused(&self, paused: bool) {
        if self.paused.swap(paused, Ordering::AcqRel) != paused {
            tracing::info!(throttle = %self.cfg.name, paused, "emission paused state changed");
            self.admission.wake_drain();
        }
    }

    /// Stops admission; the drain keeps emitting until `grace` has passed
    /// (or an earlier close's deadline), then hands off what remains.
    pub(crate) fn begin_close(&self, grace: Duration) {
        let deadline = self.clock.precise().saturating_add(nanos(grace));
        let _guard = self.control.lock().unwrap_or_else(|p| p.into_inner());
        let first = !self.admission.is_closed();
        self.closing_ns.fetch_min(deadline, Ordering::AcqRel);
        self.admission.close();
        if first {
            // An empty throttle closing (a destination going idle, which
            // thousands may do a second) is not news.
            match self.admission.depth() {
                0 => tracing::debug!(throttle = %self.cfg.name, ?grace, "shutdown started"),
                depth => {
                    tracing::info!(throttle = %self.cfg.name, ?grace, depth, "shutdown started")
                }
            }
        }
    }

    /// The drain's deadline when closing.
    pub(crate) fn closing_deadline(&self) -> Option<u64> {
        let ns = self.closing_ns.load(Ordering::Acquire);
        (ns != u64::MAX).then_some(ns)
    }

    /// Stamps a job for the ring: its id, its admission time (the real clock
    /// when it has a deadline or is the first after empty, else the coarse
    /// copy) and its deadline.
    #[inline]
    pub(crate) fn entry(&self, id: u64, job: J, first: bool, terms: Terms) -> Entry<J> {
        let wait = self.cfg.max_queue_wait_ns;
        let until = terms.until;
        let admitted_ns = if first || wait.is_some() || until.is_some() {
            self.clock.precise()
        } else {
            self.clock.coarse()
        };
        let by_wait = wait.map_or(u64::MAX, |w| admitted_ns.saturating_add(w));
        Entry {
            job,
            id,
            admitted_ns,
            deadline_ns: by_wait.min(until.unwrap_or(u64::MAX)),
            key: crate::admission::holders::NO_KEY,
            attempt: self.first_attempt(terms.made),
        }
    }

    /// What a job submitted with `deadline` after `made` attempts is
    /// stamped with.
    #[inline]
    pub(crate) fn terms(&self, deadline: Option<tokio::time::Instant>, made: u32) -> Terms {
        Terms {
            until: deadline.map(|d| self.clock.ns(d)),
            made,
        }
    }

    /// The number of the first attempt of a job that made `made` before it
    /// was submitted: the next, or, past the retry policy's attempts, its
    /// last (one more try, as a recovered job gets).
    #[inline]
    pub(crate) fn first_attempt(&self, made: u32) -> u32 {
        if made == 0 {
            return 1;
        }
        let next = made.saturating_add(1);
        match &self.retries {
            Some(r) => next.min(r.policy.max_attempts().max(1)),
            None => next,
        }
    }

    /// The time until the queue as it stands has drained (with costs,
    /// each queued job taken at the mean cost of those emitted lately).
    pub(crate) fn queue_wait(&self) -> Duration {
        secs(self.admission.depth() as f64 / self.job_rate())
    }

    /// Jobs a second the drain emits now: its rate, or with costs its
    /// rate over the mean cost of the jobs emitted lately.
    fn job_rate(&self) -> f64 {
        let mean = f64::from_bits(self.mean_cost_bits.load(Ordering::Relaxed)).max(1.0);
        self.rate() / mean
    }

    /// A job of `units` was emitted: the mean cost moves an eighth of the
    /// way toward it, the first taken as it is (only the drain writes it).
    pub(crate) fn note_cost(&self, units: u32) {
        let mean = f64::from_bits(self.mean_cost_bits.load(Ordering::Relaxed));
        let units = f64::from(units);
        let next = if mean == 0.0 {
            units
        } else {
            mean + (units - mean) / 8.0
        };
        self.mean_cost_bits.store(next.to_bits(), Ordering::Relaxed);
    }

    /// The queue's `RateLimit` state.
    pub(crate) fn queue_limit(&self) -> RateLimit {
        RateLimit::queue(
            self.admission.depth(),
            self.admission.bound(),
            self.job_rate(),
        )
    }

    /// Counts a refusal and builds it, with the queue's state for `Overloaded`.
    #[inline]
    pub(crate) fn refuse(&self, job: J, reason: Reason) -> Rejected<J> {
        let nth = self.count_refusal(reason);
        match reason {
            Reason::Overloaded => Rejected::queue(
                job,
                self.admission.depth(),
                self.admission.bound(),
                self.job_rate(),
                nth,
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

    /// Counts it producer-locally; the first since a publish wakes the drain
    /// to publish it, and after the drain is done it is published at once.
    /// Returns the refusal's number among its reason's (its jitter's seed).
    #[inline]
    fn count_refusal(&self, reason: Reason) -> u64 {
        let refused = self.ledger.refused(reason);
        if refused.first {
            self.admission.wake_drain();
        }
        if reason == Reason::Closed && self.is_done() {
            self.ledger.publish_refusals();
        }
        refused.nth
    }

    fn gauges(&self) -> Gauges {
        let rate = self.rate();
        Gauges {
            depth: self.admission.depth(),
            bound: self.admission.bound(),
            capacity: self.capacity_at(rate),
            ring_capacity: self.admission.ring_capacity(),
            rate,
            admitted: self.admission.admitted(),
            retry_wait: self.retries.as_ref().map_or(0, |r| r.len() as u64),
            paused: self.is_paused(),
            closed: self.admission.is_closed(),
            keyed: self
                .keyed
                .as_ref()
                .map(|k| (k.table.len(), k.table.evictions())),
        }
    }

    /// Publishes the gauges and the derived counters.
    pub(crate) fn publish(&self) {
        self.ledger.publish(&self.gauges());
    }

    /// A snapshot of the counts; the metrics are published from the same
    /// reading, so they agree with it.
    pub(crate) fn stats(&self) -> Stats {
        self.ledger.publish_snapshot(&self.gauges())
    }

    /// The drain's last act: publishes, stores what shutdown hands back, marks done.
    pub(crate) fn mark_done(&self, returned: Vec<J>) {
        self.publish();
        self.ledger.withdraw();
        *self.leftovers.lock().unwrap_or_else(|p| p.into_inner()) = returned;
        self.done.send_replace(true);
    }

    /// Waits for the drain to finish, then takes the leftovers (the first caller gets them).
    pub(crate) async fn wait_done(&self) -> Vec<J> {
        let mut rx = self.done.subscribe();
        // The sender lives in `self`, so this only ends when done is true.
        let _ = rx.wait_for(|done| *done).await;
        self.take_leftovers()
    }

    /// Takes the leftovers without waiting (the drain has finished).
    pub(crate) fn take_leftovers(&self) -> Vec<J> {
        std::mem::take(&mut *self.leftovers.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub(crate) fn is_done(&self) -> bool {
        *self.done.borrow()
    }
}

/// What the journal records of a job's end, whoever ends it (the drain,
/// an admission that refused it, a shutdown).
impl<J: 'static> Shared<J> {
    /// Job `id` ended for good (not into the dead-letter sink).
    #[inline]
    pub(crate) fn ended(&self, _id: u64) {
        #[cfg(feature = "journal")]
        if let Some(j) = &self.journal {
            j.journal.end(_id);
        }
    }

    /// Job `id` failed attempt `made` and waits for another: the journal
    /// records the count, so a restart goes on from the next attempt.
    #[inline]
    pub(crate) fn retrying(&self, _id: u64, _made: u32, _after: Duration, _job: &J) {
        #[cfg(feature = "journal")]
        if let Some(j) = &self.journal {
            j.journal
                .retried(_id, _made, _after, |out| j.encode_record(_job, out));
        }
    }

    /// Job `id` went to the dead-letter sink: its end is recorded once the
    /// sink has stored it durably (after the sink's `flush`).
    #[inline]
    pub(crate) fn dead_lettered(&self, _id: u64) {
        #[cfg(feature = "journal")]
        if let Some(j) = &self.journal {
            j.dead_lettered(_id, self.endings.sink.as_ref());
        }
    }

    /// A job given up on: to the sink (`taken`) or to its hook.
    #[inline]
    pub(crate) fn gone(&self, id: u64, taken: bool) {
        if taken {
            self.dead_lettered(id);
        } else {
            self.ended(id);
        }
    }

    /// Whether shutdown leaves unfinished jobs in the journal for the next
    /// start instead of handing them off.
    pub(crate) fn keeps_leftovers(&self) -> bool {
        #[cfg(feature = "journal")]
        if self.journal.is_some() {
            // Retired for good with a sink: the sink takes them (their
            // records end once it has stored them).
            let retiring = self.retiring.load(std::sync::atomic::Ordering::Acquire);
            return !(retiring && self.endings.sink.is_some());
        }
        false
    }

    /// Whether dead-lettered jobs wait for the sink's flush before their
    /// records end (a sink that cannot write yet, retried meanwhile).
    pub(crate) fn dead_ends_pending(&self) -> bool {
        #[cfg(feature = "journal")]
        if let Some(j) = &self.journal {
            return j.dead_ends_pending();
        }
        false
    }

    /// Shutdown's last step: the dead-lettered jobs' ends if the sink's
    /// flush (`flushed`) stored them, else they stay in the journal; then
    /// everything written and `fsync`ed.
    pub(crate) async fn close_journal(&self, _flushed: bool) {
        #[cfg(feature = "journal")]
        if let Some(j) = &self.journal {
            j.close(_flushed).await;
        }
    }
}
