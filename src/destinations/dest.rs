//! One destination's record: its overrides, breaker, counts and, while it
//! has work, its throttle.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use super::config::{DestinationConfig, DestinationError};
use super::gate::Gate;
use super::member::Member;
use super::stats::{DestinationStats, Totals};
use super::tally::Tally;
use super::{Inner, OTHER};
use crate::drain::slowest::faded;
use crate::rate::AimdConfig;
use crate::{Admitted, BuildError, Drain, RateError, Reason, Rejected, Throttle, ThrottleBuilder};

/// Tries at making a throttle for a job racing retiring ones.
const RACES: usize = 3;

/// A throttle's answer: final, or the job back for the next throttle.
enum Settled<J> {
    Done(Result<Admitted, Rejected<J>>),
    Again(J),
}

/// A destination's throttle slot, held ([`Dest::hold_slot`]): no throttle
/// starts or stops while it lives.
pub(crate) struct Held<'a, J>(MutexGuard<'a, Option<Box<Live<J>>>>);

/// A destination's throttle while it has work.
struct Live<J> {
    throttle: Throttle<J>,
    drain: Drain<J>,
}

pub(crate) struct Dest<J> {
    pub(crate) name: Arc<str>,
    named: bool,
    /// Taken out of the set ([`Destinations::remove`]): it makes no
    /// throttle again, so an admission racing the removal is refused
    /// rather than left in a throttle nobody owns.
    ///
    /// [`Destinations::remove`]: super::Destinations::remove
    retired: AtomicBool,
    cfg: Mutex<DestinationConfig>,
    /// Boxed: an idle destination holds a pointer, not the slot.
    live: Mutex<Option<Box<Live<J>>>>,
    tally: Arc<Tally>,
    /// Its breaker and the breaker's series: made with it when it has
    /// series of its own (shown from the start), else at its first
    /// throttle (the many summed into `_other` hold none while idle).
    gate: OnceLock<Arc<Gate>>,
    /// The rate an adaptive destination had when it went idle: an
    /// `f64`'s bits, [`UNLEARNED`] for none.
    learned: AtomicU64,
    /// What its throttles counted, summed at each one's end (none until
    /// its first ends: an idle destination that never had work holds a
    /// pointer, not the counts).
    totals: Mutex<Option<Box<Totals>>>,
    accepted: AtomicU64,
    refused: AtomicU64,
    /// Throttles made for it (one per spell of work).
    activations: AtomicU64,
    /// When it was last named by a submission, ns since the process's first.
    last_active: AtomicU64,
    /// What its deliveries took lately as its last throttle went idle, ns,
    /// and when (ns since the process's first): its next throttle's
    /// closing drain goes on from it, faded by the time between.
    slowest: [AtomicU64; 2],
    /// A named destination's capacity and rate gauges while it is idle
    /// (see [`Resting`]), when it has its own series.
    resting: Mutex<Option<Box<Resting>>>,
}

/// What an idle named destination shows in its series: the bound and the
/// rate it would start at, so a dashboard's `depth / capacity` never
/// divides by zero and a configured destination has its series from the
/// start. Its series is summed (each throttle publishes increments and
/// takes them back when it ends), so the resting values are added while
/// it has no throttle and taken back out when one starts.
struct Resting {
    capacity: metrics::Gauge,
    rate: metrics::Gauge,
    /// What is added now, if anything.
    shown: Option<(f64, f64)>,
}

impl Resting {
    /// The resting gauges of `label` in the set's series.
    fn of<J>(inner: &Inner<J>, label: &str) -> Resting {
        let mut labels = inner.settings.labels.clone();
        labels.push(("destination".to_owned(), label.to_owned()));
        let (capacity, rate) = crate::accounting::metrics::resting(&inner.settings.name, &labels);
        Resting {
            capacity,
            rate,
            shown: None,
        }
    }

    /// Shows `now` (capacity, rate), or nothing.
    fn show(&mut self, now: Option<(f64, f64)>) {
        let (was_cap, was_rate) = self.shown.unwrap_or((0.0, 0.0));
        let (cap, rate) = now.unwrap_or((0.0, 0.0));
        if cap != was_cap {
            self.capacity.increment(cap - was_cap);
        }
        if rate != was_rate {
            self.rate.increment(rate - was_rate);
        }
        self.shown = now;
    }
}

/// The template's AIMD settings with the destination's ceiling (and the
/// floor no higher).
fn narrowed(aimd: &AimdConfig, ceiling: f64) -> Result<crate::rate::Aimd, BuildError> {
    let cfg = aimd.clone().with_ceiling(ceiling);
    let cfg = if cfg.floor() > ceiling {
        cfg.with_floor(ceiling)
    } else {
        cfg
    };
    cfg.build().map_err(|_| BuildError::InvalidRate {
        what: "ceiling",
        value: ceiling,
    })
}

/// [`Dest::learned`]'s none: a NaN no rate is.
const UNLEARNED: u64 = u64::MAX;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn since_start() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    let start = *START.get_or_init(Instant::now);
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

impl<J: Send + Sync + 'static> Dest<J> {
    pub(crate) fn new(inner: &Inner<J>, name: &str, named: bool, cfg: DestinationConfig) -> Self {
        let own = named && cfg.has_own_series();
        let label = if own { name } else { OTHER };
        let resting = own.then(|| Box::new(Resting::of(inner, label)));
        let dest = Dest {
            name: Arc::from(name),
            named,
            retired: AtomicBool::new(false),
            cfg: Mutex::new(cfg),
            live: Mutex::new(None),
            tally: Arc::new(Tally::new(inner.tally.clone())),
            gate: OnceLock::new(),
            learned: AtomicU64::new(UNLEARNED),
            totals: Mutex::new(None),
            accepted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            activations: AtomicU64::new(0),
            last_active: AtomicU64::new(0),
            slowest: [AtomicU64::new(0), AtomicU64::new(0)],
            resting: Mutex::new(resting),
        };
        if own {
            dest.gate(inner);
        }
        dest.rest(inner, Some(&cfg));
        dest
    }

    /// Its gate, made now if it has none yet.
    fn gate(&self, inner: &Inner<J>) -> &Arc<Gate> {
        self.gate.get_or_init(|| {
            let cfg = *lock(&self.cfg);
            Arc::new(Gate::new(&inner.name, self.label(&cfg), inner.breaker))
        })
    }

    /// Its breaker's state (closed while it has no gate).
    fn breaker_state(&self) -> super::BreakerState {
        self.gate
            .get()
            .map_or(super::BreakerState::Closed, |g| g.state())
    }

    /// The bound it would have idle, at the rate it would start at.
    fn idle_capacity(&self, inner: &Inner<J>, cfg: &DestinationConfig) -> u64 {
        let s = &inner.settings;
        if let Some(fixed) = s.capacity {
            return fixed as u64;
        }
        let budget = cfg
            .budget_override()
            .or(s.latency_budget)
            .unwrap_or(Duration::from_secs(1));
        crate::drain::shared::bound_for(budget, self.start_rate(inner, cfg))
    }

    /// Shows its resting bound and rate (a named destination without a
    /// throttle), as `cfg` (its own when `None`) gives them.
    fn rest(&self, inner: &Inner<J>, cfg: Option<&DestinationConfig>) {
        let cfg = cfg.copied().unwrap_or_else(|| *lock(&self.cfg));
        let now = (
            self.idle_capacity(inner, &cfg) as f64,
            self.start_rate(inner, &cfg),
        );
        let mut resting = lock(&self.resting);
        // Under the lock, as `retire` takes it: a destination taken out
        // of the set never shows again.
        if let Some(resting) = &mut *resting
            && !self.is_retired()
        {
            resting.show(Some(now));
        }
    }

    /// Takes its resting bound and rate out of its series (a throttle
    /// starts, or it is taken out of the set).
    fn unrest(&self) {
        if let Some(resting) = &mut *lock(&self.resting) {
            resting.show(None);
        }
    }

    /// The rate it had when it last went idle, if it learned one.
    fn learned(&self) -> Option<f64> {
        match self.learned.load(Ordering::Relaxed) {
            UNLEARNED => None,
            bits => Some(f64::from_bits(bits)),
        }
    }

    fn learn(&self, rate: Option<f64>) {
        let bits = rate.map_or(UNLEARNED, f64::to_bits);
        self.learned.store(bits, Ordering::Relaxed);
    }

    pub(crate) fn touch(&self) {
        self.last_active.store(since_start(), Ordering::Relaxed);
    }

    pub(crate) fn last_active(&self) -> u64 {
        self.last_active.load(Ordering::Relaxed)
    }

    /// Jobs it holds (queued, waiting for a retry, in flight).
    pub(crate) fn held(&self) -> u64 {
        self.tally.held() as u64
    }

    pub(crate) fn is_active(&self) -> bool {
        lock(&self.live).is_some()
    }

    /// Whether it was named (by the builder or [`Destinations::define`]):
    /// its own metric labels, never retired for another.
    ///
    /// [`Destinations::define`]: super::Destinations::define
    pub(crate) fn is_named(&self) -> bool {
        self.named
    }

    /// The `destination` label of its series under `cfg`: its name when
    /// named and given its own series, else [`OTHER`].
    fn label(&self, cfg: &DestinationConfig) -> &str {
        match self.named && cfg.has_own_series() {
            true => &self.name,
            false => OTHER,
        }
    }

    /// Marks it taken out of the set: from now on it makes no throttle.
    pub(crate) fn retire(&self) {
        self.retired.store(true, Ordering::Release);
        self.unrest();
    }

    fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Acquire)
    }

    /// Whether it holds nothing and has no throttle (its breaker aside).
    pub(crate) fn is_empty_idle(&self) -> bool {
        self.tally.held() == 0 && !self.is_active()
    }

    /// Whether a full set may drop this record for a new destination.
    pub(crate) fn retirable(&self) -> bool {
        !self.named
            && self.tally.held() == 0
            && self.breaker_state() == super::BreakerState::Closed
            && !self.is_active()
    }

    /// The rate it starts at when next active.
    fn start_rate(&self, inner: &Inner<J>, cfg: &DestinationConfig) -> f64 {
        let s = &inner.settings;
        let ceiling = cfg.ceiling_override().unwrap_or(inner.max_rate);
        let floor = s.adaptive.as_ref().map(|a| a.floor());
        let base = self
            .learned()
            .or(cfg.rate_override())
            .or(s.drain_rate)
            .or(floor)
            .unwrap_or(ceiling);
        match floor {
            Some(floor) => base.clamp(floor.min(ceiling), ceiling),
            None => base.min(ceiling),
        }
    }

    /// The template with this destination's overrides and membership.
    fn builder(
        self: &Arc<Self>,
        inner: &Arc<Inner<J>>,
        recovered: Vec<(u64, J)>,
    ) -> Result<ThrottleBuilder<J>, DestinationError> {
        let cfg = *lock(&self.cfg);
        let ceiling = cfg.ceiling_override().unwrap_or(inner.max_rate);
        let mut b = inner.template.template().max_rate(ceiling);
        if let Some(aimd) = &inner.settings.adaptive {
            b = b.adaptive(narrowed(aimd, ceiling)?);
        }
        b = b.drain_rate(self.start_rate(inner, &cfg));
        if let Some(budget) = cfg.budget_override() {
            b = b.latency_budget(budget);
        }
        if let Some(n) = cfg.in_flight_override() {
            b = b.max_in_flight(n);
        }
        let idle = since_start().saturating_sub(self.slowest[1].load(Ordering::Relaxed));
        b = b.seed_slowest(faded(self.slowest[0].load(Ordering::Relaxed), idle));
        let label = self.label(&cfg);
        // Weak: the set holds the destination that holds the throttle
        // that holds the hook.
        let (weak, set) = (Arc::downgrade(self), Arc::downgrade(inner));
        let member = Member {
            destination: self.name.clone(),
            gate: self.gate(inner).clone(),
            tally: self.tally.clone(),
            on_idle: Box::new(move || {
                if let (Some(d), Some(set)) = (weak.upgrade(), set.upgrade()) {
                    d.go_idle(&set);
                }
            }),
            idle_after: inner.idle_after,
            outer: inner.hook.clone(),
        };
        b = b
            .metric_label("destination", label)
            .summed_series()
            .shared_in_flight(&inner.in_flight)
            .drain_hook(member);
        #[cfg(feature = "journal")]
        if let Some(j) = &inner.journal {
            b = (j.attach)(b, &self.name, recovered);
        }
        #[cfg(not(feature = "journal"))]
        drop(recovered);
        Ok(b)
    }

    /// Its throttle, made if it has none.
    fn throttle(self: &Arc<Self>, inner: &Arc<Inner<J>>) -> Result<Throttle<J>, DestinationError> {
        let mut live = lock(&self.live);
        if let Some(l) = &*live {
            return Ok(l.throttle.clone());
        }
        if inner.is_closed() || self.is_retired() {
            return Err(DestinationError::Closed);
        }
        self.start(inner, &mut live, Vec::new())
    }

    /// Makes its throttle, with the jobs recovered for it.
    fn start(
        self: &Arc<Self>,
        inner: &Arc<Inner<J>>,
        live: &mut Option<Box<Live<J>>>,
        recovered: Vec<(u64, J)>,
    ) -> Result<Throttle<J>, DestinationError> {
        let b = self.builder(inner, recovered)?;
        let (throttle, drain) = (inner.factory)(b, &self.name)?;
        self.unrest();
        inner.active.increment(1.0);
        self.activations.fetch_add(1, Ordering::Relaxed);
        *live = Some(Box::new(Live {
            throttle: throttle.clone(),
            drain,
        }));
        Ok(throttle)
    }

    /// Takes back the jobs an earlier run left for it in the set's journal:
    /// they are held (past the set's bound if need be) and delivered first.
    #[cfg(feature = "journal")]
    pub(crate) fn recover(self: &Arc<Self>, inner: &Arc<Inner<J>>, jobs: Vec<(u64, J)>) {
        let n = jobs.len();
        self.tally.hold_recovered(n);
        // At build, once per destination: it has no throttle yet.
        let mut live = lock(&self.live);
        if let Err(e) = self.start(inner, &mut live, jobs) {
            tracing::error!(destination = %self.name, jobs = n, error = %e, "cannot start a destination for its recovered jobs; they stay in the journal");
            (0..n).for_each(|_| self.tally.finished());
        }
    }

    /// Called by its drain when nothing is queued, waiting or in flight:
    /// keeps the counts and the learned rate, closes the throttle (its task
    /// ends) and holds none until the next job.
    fn go_idle(&self, inner: &Inner<J>) {
        let mut live = lock(&self.live);
        if self.tally.held() > 0 {
            return; // a job is on its way in
        }
        let Some(l) = live.take() else {
            return;
        };
        let stats = l.throttle.stats();
        self.slowest[0].store(l.throttle.slowest_now(), Ordering::Relaxed);
        self.slowest[1].store(since_start(), Ordering::Relaxed);
        lock(&self.totals)
            .get_or_insert_with(Box::default)
            .absorb(&stats);
        self.learn(Some(stats.drain_rate()));
        l.throttle.begin_shutdown(Duration::from_secs(30));
        self.rest(inner, None);
        drop(live);
        inner.active.decrement(1.0);
    }

    /// Queues `job` now through `push` (a throttle's admission that never
    /// waits), or hands it back.
    pub(crate) fn try_submit(
        self: &Arc<Self>,
        inner: &Arc<Inner<J>>,
        job: J,
        push: impl Fn(&Throttle<J>, J) -> Result<Admitted, Rejected<J>>,
    ) -> Result<Admitted, Rejected<J>> {
        let mut job = self.hold(inner, job)?;
        for _ in 0..RACES {
            let (throttle, j) = self.throttle_for(inner, job)?;
            match self.settle(inner, push(&throttle, j)) {
                Settled::Done(result) => return result,
                Settled::Again(j) => job = j,
            }
        }
        Err(self.raced(job))
    }

    /// Like [`try_submit`](Self::try_submit), through `push` (a throttle's
    /// awaited admission: durable, keyed): the job goes to the next
    /// throttle if the one it found was retiring.
    pub(crate) async fn admit_with<F, Fut>(
        self: &Arc<Self>,
        inner: &Arc<Inner<J>>,
        job: J,
        push: F,
    ) -> Result<Admitted, Rejected<J>>
    where
        F: Fn(Throttle<J>, J) -> Fut,
        Fut: std::future::Future<Output = Result<Admitted, Rejected<J>>>,
    {
        let mut job = self.hold(inner, job)?;
        for _ in 0..RACES {
            let (throttle, j) = self.throttle_for(inner, job)?;
            // Dropped while `push` awaits (its caller gone), the job was not
            // queued: the place it held in the set is given back.
            let held = Unheld(Some(&self.tally));
            let answer = push(throttle, j).await;
            held.disarm();
            match self.settle(inner, answer) {
                Settled::Done(result) => return result,
                Settled::Again(j) => job = j,
            }
        }
        Err(self.raced(job))
    }

    /// Counts the job against the set's bound, or refuses it.
    fn hold(&self, inner: &Inner<J>, job: J) -> Result<J, Rejected<J>> {
        if self.tally.try_hold(inner.max_jobs) {
            return Ok(job);
        }
        self.refused.fetch_add(1, Ordering::Relaxed);
        let wait = self.queue_wait().max(Duration::from_secs(1));
        Err(Rejected::new(job, Reason::Overloaded, Some(wait), None))
    }

    /// Its throttle for a held job, or the job handed back.
    fn throttle_for(
        self: &Arc<Self>,
        inner: &Arc<Inner<J>>,
        job: J,
    ) -> Result<(Throttle<J>, J), Rejected<J>> {
        match self.throttle(inner) {
            Ok(t) => Ok((t, job)),
            Err(e) => {
                let reason = match e {
                    DestinationError::Closed => Reason::Closed,
                    _ => Reason::Invalid,
                };
                Err(self.unheld(Rejected::new(job, reason, None, None)))
            }
        }
    }

    /// What a throttle answered: a throttle retired between the lookup and
    /// the push refuses as closed, and the job goes to the next one.
    fn settle(&self, inner: &Inner<J>, answer: Result<Admitted, Rejected<J>>) -> Settled<J> {
        match answer {
            Ok(admitted) => {
                self.accepted.fetch_add(1, Ordering::Relaxed);
                Settled::Done(Ok(admitted))
            }
            Err(r) if r.reason() == Reason::Closed && !inner.is_closed() && !self.is_retired() => {
                Settled::Again(r.into_job())
            }
            Err(r) => Settled::Done(Err(self.unheld(self.breaker_hint(r)))),
        }
    }

    /// Lost the race with retiring throttles [`RACES`] times in a row.
    fn raced(&self, job: J) -> Rejected<J> {
        let wait = Some(Duration::from_secs(1));
        self.unheld(Rejected::new(job, Reason::Overloaded, wait, None))
    }

    /// A held job that was refused: no longer held, counted as refused.
    fn unheld(&self, r: Rejected<J>) -> Rejected<J> {
        self.tally.finished();
        self.refused.fetch_add(1, Ordering::Relaxed);
        r
    }

    /// A full queue behind an open breaker: wait at least the cool-down left.
    fn breaker_hint(&self, r: Rejected<J>) -> Rejected<J> {
        let left = self.gate.get().map_or(Duration::ZERO, |g| g.remaining());
        if r.reason() != Reason::Overloaded || left.is_zero() {
            return r;
        }
        let hint = r.retry_after().unwrap_or_default() + left;
        let limit = r.rate_limit();
        Rejected::new(r.into_job(), Reason::Overloaded, Some(hint), limit)
    }

    fn queue_wait(&self) -> Duration {
        lock(&self.live)
            .as_ref()
            .map_or(Duration::ZERO, |l| l.throttle.retry_after())
    }

    /// New overrides. An active destination applies them at once (its
    /// rate, ceiling and budget) when its ring holds a full budget at the
    /// ceiling, else refuses them with `BeyondRing`; an idle one takes
    /// them at its next activation (its ring is sized then).
    pub(crate) fn configure(
        &self,
        inner: &Inner<J>,
        cfg: DestinationConfig,
    ) -> Result<(), DestinationError> {
        let live = self.hold_slot();
        self.check_configure(inner, &cfg, &live)?;
        self.configure_held(inner, cfg, &live);
        Ok(())
    }

    /// Its throttle's slot, held: no throttle starts or stops meanwhile.
    pub(crate) fn hold_slot(&self) -> Held<'_, J> {
        Held(lock(&self.live))
    }

    /// Whether [`configure`](Self::configure) would take `cfg` now, with
    /// its throttle's slot held (`live`), changing nothing.
    pub(crate) fn check_configure(
        &self,
        inner: &Inner<J>,
        cfg: &DestinationConfig,
        live: &Held<'_, J>,
    ) -> Result<(), DestinationError> {
        let Some(l) = &*live.0 else {
            return Ok(());
        };
        let ceiling = cfg.ceiling_override().unwrap_or(inner.max_rate);
        let budget = cfg.budget_override().or(inner.settings.latency_budget);
        l.throttle
            .can_set_limits(ceiling, budget)
            .map_err(|e| match e {
                RateError::AboveMax { rate, max_rate } => DestinationError::BeyondRing {
                    rate,
                    ring_rate: max_rate,
                },
                RateError::Closed => DestinationError::Closed,
                _ => DestinationError::InvalidRate {
                    what: "ceiling",
                    value: ceiling,
                },
            })
    }

    /// Applies `cfg`, checked by [`check_configure`](Self::check_configure)
    /// under the same hold (so it cannot be refused now).
    pub(crate) fn configure_held(
        &self,
        inner: &Inner<J>,
        cfg: DestinationConfig,
        live: &Held<'_, J>,
    ) {
        if let Some(l) = &*live.0 {
            let ceiling = cfg.ceiling_override().unwrap_or(inner.max_rate);
            let budget = cfg.budget_override().or(inner.settings.latency_budget);
            let rate = cfg
                .rate_override()
                .unwrap_or_else(|| l.throttle.drain_rate());
            if let Err(e) = l.throttle.set_limits(ceiling, budget, rate) {
                tracing::error!(destination = %self.name, error = %e, "limits checked under the same hold were refused");
            }
        }
        let was = std::mem::replace(&mut *lock(&self.cfg), cfg);
        self.learn(None);
        if self.label(&was) != self.label(&cfg) {
            // Its series move: the breaker's at once, the resting gauges
            // (shown again below while idle), a throttle's from its next
            // spell of work.
            let label = self.label(&cfg);
            match self.gate.get() {
                Some(gate) => gate.relabel(&inner.name, label),
                // Series of its own from now: shown from now.
                None if label != OTHER => {
                    self.gate(inner);
                }
                None => {}
            }
            let mut resting = lock(&self.resting);
            if let Some(old) = &mut *resting {
                old.show(None);
            }
            *resting = (label != OTHER).then(|| Box::new(Resting::of(inner, label)));
        }
        if live.0.is_none() {
            self.rest(inner, Some(&cfg));
        }
    }

    pub(crate) fn stats(&self, inner: &Inner<J>) -> DestinationStats {
        let live = lock(&self.live);
        let mut totals = lock(&self.totals).as_deref().cloned().unwrap_or_default();
        let (depth, in_flight, rate, capacity) = match &*live {
            Some(l) => {
                let s = l.throttle.stats();
                totals.absorb(&s);
                (s.depth(), s.in_flight(), s.drain_rate(), s.capacity())
            }
            None => {
                let cfg = *lock(&self.cfg);
                let rate = self.start_rate(inner, &cfg);
                (0, 0, rate, self.idle_capacity(inner, &cfg))
            }
        };
        DestinationStats {
            name: self.name.to_string(),
            named: self.named,
            active: live.is_some(),
            depth,
            in_flight,
            held: self.tally.held() as u64,
            rate,
            capacity,
            accepted: self.accepted.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            activations: self.activations.load(Ordering::Relaxed),
            totals,
            breaker: self.breaker_state(),
            opened: self.gate.get().map_or(0, |g| g.opened()),
        }
    }

    /// Shuts its throttle down (if it has one) and returns what it handed back.
    pub(crate) async fn shutdown(&self, inner: &Inner<J>, grace: Duration) -> Vec<(String, J)> {
        self.close(inner, grace, false).await
    }

    /// Shuts its throttle down (if it has one); `retire`: for good, what
    /// remains goes to the dead-letter sink even with the set's journal.
    /// Returns what it handed back.
    pub(crate) async fn close(
        &self,
        inner: &Inner<J>,
        grace: Duration,
        retire: bool,
    ) -> Vec<(String, J)> {
        let Some(l) = lock(&self.live).take() else {
            return Vec::new();
        };
        inner.active.decrement(1.0);
        if retire {
            l.throttle.retire(grace);
        }
        let report = l.throttle.shutdown(grace).await;
        lock(&self.totals)
            .get_or_insert_with(Box::default)
            .absorb(&report.stats);
        // The task's end lets go of what it holds (the set's journal among them).
        drop(l.throttle);
        l.drain.join().await;
        let name = self.name.to_string();
        report
            .returned
            .into_iter()
            .map(|j| (name.clone(), j))
            .collect()
    }
}

/// Gives a held place of the set back if dropped before [`disarm`](Self::disarm).
struct Unheld<'a>(Option<&'a Tally>);

impl Unheld<'_> {
    /// The admission ran to its end: [`settle`](Dest::settle) accounts for it.
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for Unheld<'_> {
    fn drop(&mut self) {
        if let Some(tally) = self.0.take() {
            tally.finished();
        }
    }
}
