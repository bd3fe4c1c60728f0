//! [`ThrottleBuilder`]: configuration and its validation.

use std::sync::Arc;
use std::time::Duration;

use crate::admission::{Admission, Entry, MAX_CAPACITY, Withdrawal};
use crate::destinations::gate::Gate;
use crate::destinations::tally::Tally;
use crate::downstream::Downstream;
use crate::drain::dispatch::Dispatch;
use crate::drain::task::{DrainParts, DrainTask};
use crate::drain::{Drain, DrainFuture};
use crate::endings::{Endings, Hook};
use crate::error::BuildError;
use crate::feedback::Feedback;
use crate::inflight::InFlight;
use crate::keyed::{BucketStore, KeyedBuckets, Quota};
use crate::overflow::{DeadLetterSink, Overflow};
use crate::permits::PermitSource;
use crate::rate::Aimd;
use crate::retries::Retries;
use crate::retry::RetryPolicy;
use crate::shared::{Config, Parts, Shared, bound_for};
use crate::throttle::Throttle;

/// A template's settings, as a set reads them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    pub(crate) rate: Option<f64>,
    pub(crate) max_rate: Option<f64>,
    /// Floor and ceiling when adaptive.
    pub(crate) adaptive: Option<(f64, f64)>,
    /// The latency budget when the bound follows the rate (`None` for a
    /// fixed capacity).
    pub(crate) budget: Option<Duration>,
}

/// The largest ring, in bytes, the builder agrees to allocate.
const MAX_RING_BYTES: u64 = 4 << 30;

/// Configures and builds a [`Throttle`].
///
/// Only the drain rate is required. The capacity comes from the latency
/// budget (default 1 s): a job at the back of a full queue waits
/// `capacity / rate`, so `capacity = ceil(latency_budget × rate)`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use dripfeed::{BuildError, Delivery, Overflow, Throttle};
/// use std::time::Duration;
/// let (throttle, _drain) = Throttle::builder()
///     .name("webhooks")
///     .drain_rate(200.0)
///     .max_rate(400.0)
///     .latency_budget(Duration::from_secs(2))
///     .overflow(Overflow::HeadDrop)
///     .on_evicted(|job: u64| eprintln!("evicted {job}"))
///     .max_in_flight(32)
///     .build(|_: &u64, _| async { Delivery::Done })
///     .unwrap();
/// assert_eq!(throttle.capacity(), 400);
/// assert_eq!(throttle.stats().ring_capacity(), 800); // sized for max_rate
///
/// let err = Throttle::<u64>::builder().drain_rate(0.0).validate().unwrap_err();
/// assert_eq!(err, BuildError::InvalidRate { what: "drain rate", value: 0.0 });
/// # }
/// ```
pub struct ThrottleBuilder<J> {
    name: String,
    rate: Option<f64>,
    max_rate: Option<f64>,
    budget: Option<Duration>,
    capacity: Option<usize>,
    overflow: Overflow,
    sink: Option<Arc<dyn DeadLetterSink<J>>>,
    max_in_flight: usize,
    max_queue_wait: Option<Duration>,
    deliver_timeout: Duration,
    shutdown_grace: Duration,
    on_evicted: Option<Hook<J>>,
    on_expired: Option<Hook<J>>,
    on_failed: Option<Hook<J>>,
    adaptive: Option<Aimd>,
    per_key: Option<(usize, Quota)>,
    key_store: Option<Arc<dyn BucketStore>>,
    permits: Option<Arc<dyn PermitSource>>,
    withdrawal: Option<Withdrawal<J>>,
    retry: Option<RetryPolicy>,
    dispatch: Dispatch,
    /// Set when a [`Destinations`](crate::destinations::Destinations) set builds it.
    member: Option<Member>,
    #[cfg(feature = "journal")]
    journal: Option<crate::journaled::Journaling<J>>,
    #[cfg(feature = "journal")]
    recovered: Vec<(u64, J)>,
}

/// What a destination's throttle takes from its set.
pub(crate) struct Member {
    /// The `destination` label of its metrics.
    pub(crate) label: String,
    pub(crate) tally: Arc<Tally>,
    pub(crate) gate: Arc<Gate>,
    /// The set's in-flight budget; `max_in_flight` is the cap inside it.
    pub(crate) in_flight: InFlight,
    /// Called by the drain when nothing has been queued, waiting or in
    /// flight for `idle_after`.
    pub(crate) on_idle: Arc<dyn Fn() + Send + Sync>,
    pub(crate) idle_after: Duration,
}

impl<J: Send + Sync + 'static> Throttle<J> {
    /// A builder; set at least the drain rate.
    pub fn builder() -> ThrottleBuilder<J> {
        ThrottleBuilder::new()
    }
}

impl<J: Send + Sync + 'static> Default for ThrottleBuilder<J> {
    fn default() -> Self {
        Self::new()
    }
}

impl<J: Send + Sync + 'static> ThrottleBuilder<J> {
    /// A builder with the defaults: name `"default"`, latency budget 1 s,
    /// tail-drop, 64 deliveries in flight, no queue deadline, deliveries
    /// timing out after 30 s, 30 s shutdown grace when the last handle drops.
    pub fn new() -> Self {
        ThrottleBuilder {
            name: "default".to_owned(),
            rate: None,
            max_rate: None,
            budget: None,
            capacity: None,
            overflow: Overflow::TailDrop,
            sink: None,
            max_in_flight: 64,
            max_queue_wait: None,
            deliver_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(30),
            on_evicted: None,
            on_expired: None,
            on_failed: None,
            adaptive: None,
            per_key: None,
            key_store: None,
            permits: None,
            withdrawal: None,
            retry: None,
            dispatch: Dispatch::Inline,
            member: None,
            #[cfg(feature = "journal")]
            journal: None,
            #[cfg(feature = "journal")]
            recovered: Vec::new(),
        }
    }

    /// The name used as the `throttle` label of every metric.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The drain rate, jobs per second (required; finite and > 0).
    pub fn drain_rate(mut self, jobs_per_second: f64) -> Self {
        self.rate = Some(jobs_per_second);
        self
    }

    /// The highest rate `set_drain_rate` may ever set (default: the drain
    /// rate, or the AIMD ceiling when adaptive). The ring is allocated for it.
    pub fn max_rate(mut self, jobs_per_second: f64) -> Self {
        self.max_rate = Some(jobs_per_second);
        self
    }

    /// The worst queueing delay accepted: the admission bound is
    /// `ceil(budget × current rate)`, at least 1. Replaces a `capacity`.
    pub fn latency_budget(mut self, budget: Duration) -> Self {
        self.budget = Some(budget);
        self.capacity = None;
        self
    }

    /// A fixed admission bound, whatever the rate. Replaces a `latency_budget`.
    pub fn capacity(mut self, jobs: usize) -> Self {
        self.capacity = Some(jobs);
        self.budget = None;
        self
    }

    /// What happens at the bound (default [`Overflow::TailDrop`]).
    pub fn overflow(mut self, policy: Overflow) -> Self {
        self.overflow = policy;
        self
    }

    /// Where jobs that must not be lost go: overflow under
    /// [`Overflow::DeadLetter`], expired jobs, failed deliveries, shutdown
    /// leftovers.
    pub fn dead_letter(mut self, sink: impl DeadLetterSink<J>) -> Self {
        self.sink = Some(Arc::new(sink));
        self
    }

    /// The most deliveries running at once (default 64); when all are
    /// running, the drain waits.
    pub fn max_in_flight(mut self, deliveries: usize) -> Self {
        self.max_in_flight = deliveries;
        self
    }

    /// A deadline for every job: one found waiting longer when drained is
    /// expired (to the sink, else `on_expired`) and takes no pacing slot.
    pub fn max_queue_wait(mut self, wait: Duration) -> Self {
        self.max_queue_wait = Some(wait);
        self
    }

    /// How long a delivery may run before it counts as failed (default 30 s).
    pub fn deliver_timeout(mut self, timeout: Duration) -> Self {
        self.deliver_timeout = timeout;
        self
    }

    /// How long the queue keeps draining when the last handle is dropped (default 30 s).
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// Receives jobs evicted by [`Overflow::HeadDrop`]. Without it they are dropped (and counted).
    pub fn on_evicted(mut self, hook: impl Fn(J) + Send + Sync + 'static) -> Self {
        self.on_evicted = Some(Arc::new(hook));
        self
    }

    /// Receives expired jobs the sink did not take. Without it they are dropped (and counted).
    pub fn on_expired(mut self, hook: impl Fn(J) + Send + Sync + 'static) -> Self {
        self.on_expired = Some(Arc::new(hook));
        self
    }

    /// Receives jobs whose delivery failed for good and the sink did not
    /// take. Without it they are dropped (and counted).
    pub fn on_failed(mut self, hook: impl Fn(J) + Send + Sync + 'static) -> Self {
        self.on_failed = Some(Arc::new(hook));
        self
    }

    /// Makes the drain rate follow the downstream: every interval the
    /// [`Aimd`] controller looks at the last seconds of delivery latency
    /// (p99), failures, timeouts and "slow down" answers
    /// ([`Delivery::Retry`](crate::Delivery::Retry) with a hint) and sets the
    /// rate within its floor and ceiling. The admission bound follows the rate.
    /// Without an explicit `drain_rate` the drain starts at the floor.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// use dripfeed::rate::AimdConfig;
    /// use std::time::Duration;
    /// let aimd = AimdConfig::default().with_floor(20.0).with_ceiling(200.0).build().unwrap();
    /// let (throttle, _drain) = Throttle::builder()
    ///     .adaptive(aimd)
    ///     .latency_budget(Duration::from_secs(2))
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// assert_eq!(throttle.drain_rate(), 20.0);      // starts at the floor
    /// assert_eq!(throttle.capacity(), 40);          // 2 s × 20/s, and follows the rate
    /// assert_eq!(throttle.stats().ring_capacity(), 400); // allocated for the ceiling
    /// # }
    /// ```
    pub fn adaptive(mut self, aimd: Aimd) -> Self {
        self.adaptive = Some(aimd);
        self
    }

    /// Gives every key its own reverse leaky bucket (see
    /// [`try_submit_keyed`](Throttle::try_submit_keyed)): `quota` is the
    /// default size and drain rate, and at most `max_keys` buckets are live
    /// at once (a full table evicts a drained bucket, else the one that
    /// empties soonest), so memory stays bounded whatever keys arrive.
    ///
    /// The table answers synchronously, so
    /// [`try_submit_keyed`](Throttle::try_submit_keyed) never waits; to
    /// share buckets between processes use
    /// [`key_store`](Self::key_store) instead (the later call wins).
    pub fn per_key(mut self, max_keys: usize, quota: Quota) -> Self {
        self.per_key = Some((max_keys, quota));
        self.key_store = None;
        self
    }

    /// Gives every key its own reverse leaky bucket held in `store` (any
    /// [`BucketStore`]: `global::RedisBuckets` or `global::PgBuckets` for a
    /// fleet, a `KeyedBuckets<String>`, your own), admitted through with
    /// [`submit_keyed`](Throttle::submit_keyed), which awaits the store.
    /// Replaces [`per_key`](Self::per_key) (the later call wins). Keep a
    /// clone of the `Arc` to set quota overrides or read debts.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::{Delivery, Throttle};
    /// use dripfeed::keyed::{BucketStore, KeyedBuckets, Quota};
    /// use std::sync::Arc;
    /// let tenants: Arc<dyn BucketStore> =
    ///     Arc::new(KeyedBuckets::<String>::new(1_000, Quota::new(1.0, 1.0)?)?);
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .key_store(tenants.clone())
    ///     .build(|_: &u32, _| async { Delivery::Done })?;
    /// tenants.set_quota("vip", Quota::new(2.0, 1.0)?).await?;
    /// throttle.submit_keyed("vip", 1.0, 1).await?;
    /// throttle.submit_keyed("vip", 1.0, 2).await?;
    /// assert!(throttle.submit_keyed("guest", 1.0, 3).await.is_ok());
    /// assert!(throttle.submit_keyed("guest", 1.0, 4).await.is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn key_store(mut self, store: Arc<dyn BucketStore>) -> Self {
        self.key_store = Some(store);
        self.per_key = None;
        self
    }

    /// Takes one permit per emission from a source shared with other
    /// processes (see [`global`](crate::global)), so a fleet shares one
    /// limit. The local drain rate still caps this process.
    pub fn permits(mut self, source: impl PermitSource) -> Self {
        self.permits = Some(Arc::new(source));
        self
    }

    /// For [`Slots`](crate::Slots): tail-drop, waiters that can be
    /// withdrawn while queued, and a ring with room for withdrawn waiters
    /// not yet skipped.
    pub(crate) fn for_slots(mut self, withdrawal: Withdrawal<J>) -> Self {
        self.overflow = Overflow::TailDrop;
        self.withdrawal = Some(withdrawal);
        self
    }

    /// Retries deliveries that answered [`Delivery::Retry`](crate::Delivery::Retry),
    /// timed out or panicked (not [`Delivery::Failed`](crate::Delivery::Failed)),
    /// up to the policy's attempts, after exponential backoff with full jitter
    /// (or the downstream's `Retry-After` hint). A retried job waits outside
    /// the ring and takes a pacing slot like a new one, ahead of new ones.
    /// Delivery is at least once: the downstream may see a job again, with
    /// the same [`Attempt::id`](crate::Attempt::id) and a higher number.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Attempt, Delivery, RetryPolicy, Throttle};
    /// use std::time::Duration;
    /// let flaky = |_: &u32, attempt: Attempt| async move {
    ///     if attempt.number() < 3 { Delivery::Retry { after: None } } else { Delivery::Done }
    /// };
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(100.0)
    ///     .retries(RetryPolicy::new(5))
    ///     .build(flaky)
    ///     .unwrap();
    /// throttle.try_submit(1).unwrap();
    /// tokio::time::sleep(Duration::from_secs(2)).await;
    /// let stats = throttle.stats();
    /// assert_eq!((stats.delivered(), stats.retried(), stats.emitted()), (1, 2, 3));
    /// # }
    /// ```
    pub fn retries(mut self, policy: RetryPolicy) -> Self {
        self.retry = Some(policy);
        self
    }

    /// How deliveries run (default [`Dispatch::Inline`]: polled by the drain
    /// task, no task per delivery). Choose [`Dispatch::Spawn`] when
    /// `deliver` does CPU work between its awaits.
    pub fn dispatch(mut self, mode: Dispatch) -> Self {
        self.dispatch = mode;
        self
    }

    /// A copy of the settings, for a set's destinations: everything but a
    /// journal, recovered jobs and set membership.
    pub(crate) fn template(&self) -> Self {
        ThrottleBuilder {
            name: self.name.clone(),
            rate: self.rate,
            max_rate: self.max_rate,
            budget: self.budget,
            capacity: self.capacity,
            overflow: self.overflow,
            sink: self.sink.clone(),
            max_in_flight: self.max_in_flight,
            max_queue_wait: self.max_queue_wait,
            deliver_timeout: self.deliver_timeout,
            shutdown_grace: self.shutdown_grace,
            on_evicted: self.on_evicted.clone(),
            on_expired: self.on_expired.clone(),
            on_failed: self.on_failed.clone(),
            adaptive: self.adaptive.clone(),
            per_key: self.per_key,
            key_store: self.key_store.clone(),
            permits: self.permits.clone(),
            withdrawal: self.withdrawal,
            retry: self.retry,
            dispatch: self.dispatch,
            member: None,
            #[cfg(feature = "journal")]
            journal: None,
            #[cfg(feature = "journal")]
            recovered: Vec::new(),
        }
    }

    /// The latency budget the bound follows: `None` with a fixed
    /// capacity, else the one given (1 s by default).
    fn bound_budget(&self) -> Option<Duration> {
        match self.capacity {
            Some(_) => None,
            None => Some(self.budget.unwrap_or(Duration::from_secs(1))),
        }
    }

    /// The name it was given.
    pub(crate) fn template_name(&self) -> String {
        self.name.clone()
    }

    /// The settings a set reads from its template.
    pub(crate) fn settings(&self) -> Settings {
        Settings {
            rate: self.rate,
            max_rate: self.max_rate,
            adaptive: self
                .adaptive
                .as_ref()
                .map(|a| (a.config().floor(), a.config().ceiling())),
            budget: self.bound_budget(),
        }
    }

    /// Makes it a member of a set.
    pub(crate) fn member(mut self, member: Member) -> Self {
        self.member = Some(member);
        self
    }

    /// Narrows the adaptive ceiling (a destination's override).
    pub(crate) fn adaptive_ceiling(mut self, ceiling: f64) -> Result<Self, BuildError> {
        if let Some(aimd) = self.adaptive.take() {
            let cfg = aimd.config().clone().with_ceiling(ceiling);
            let floor = cfg.floor();
            let cfg = if floor > ceiling {
                cfg.with_floor(ceiling)
            } else {
                cfg
            };
            self.adaptive = Some(cfg.build().map_err(|_| BuildError::InvalidRate {
                what: "ceiling",
                value: ceiling,
            })?);
        }
        Ok(self)
    }

    /// Checks the configuration without building anything.
    pub fn validate(&self) -> Result<(), BuildError> {
        self.check().map(|_| ())
    }

    fn check(&self) -> Result<(f64, f64, usize, usize), BuildError> {
        let bounds = self
            .adaptive
            .as_ref()
            .map(|a| (a.config().floor(), a.config().ceiling()));
        let rate = match (self.rate, bounds) {
            (Some(rate), _) => rate,
            (None, Some((floor, _))) => floor,
            (None, None) => return Err(BuildError::MissingRate),
        };
        positive("drain rate", rate)?;
        let max_rate = self
            .max_rate
            .unwrap_or(bounds.map_or(rate, |(_, ceiling)| ceiling.max(rate)));
        positive("max rate", max_rate)?;
        if rate > max_rate {
            return Err(BuildError::RateAboveMax { rate, max_rate });
        }
        if let Some((floor, ceiling)) = bounds {
            if ceiling > max_rate {
                return Err(BuildError::RateAboveMax {
                    rate: ceiling,
                    max_rate,
                });
            }
            if rate < floor || rate > ceiling {
                return Err(BuildError::RateOutsideAdaptive {
                    rate,
                    floor,
                    ceiling,
                });
            }
        }
        let (bound, ring) = match (self.capacity, self.budget) {
            (Some(0), _) => return Err(BuildError::ZeroCapacity { what: "capacity" }),
            (Some(c), _) => (c as u64, c as u64),
            (None, budget) => {
                let budget = budget.unwrap_or(Duration::from_secs(1));
                if budget.is_zero() {
                    return Err(BuildError::ZeroDuration {
                        what: "latency budget",
                    });
                }
                (bound_for(budget, rate), bound_for(budget, max_rate))
            }
        };
        let slot = std::mem::size_of::<Entry<J>>() as u64 + 8;
        if ring > MAX_CAPACITY as u64 || ring.saturating_mul(slot) > MAX_RING_BYTES {
            let max = (MAX_CAPACITY as u64).min(MAX_RING_BYTES / slot);
            return Err(BuildError::CapacityTooLarge {
                capacity: ring,
                max,
            });
        }
        if self.max_in_flight == 0 || u32::try_from(self.max_in_flight).is_err() {
            return Err(BuildError::InvalidInFlight(self.max_in_flight));
        }
        for (what, d) in [
            ("max queue wait", self.max_queue_wait),
            ("deliver timeout", Some(self.deliver_timeout)),
        ] {
            if d.is_some_and(|d| d.is_zero()) {
                return Err(BuildError::ZeroDuration { what });
            }
        }
        if let Some(policy) = &self.retry {
            policy.is_valid().map_err(BuildError::InvalidRetry)?;
        }
        if self.overflow == Overflow::DeadLetter && self.sink.is_none() {
            return Err(BuildError::MissingSink);
        }
        // Both fit in usize: ring <= MAX_CAPACITY and bound <= ring.
        Ok((rate, max_rate, bound as usize, ring as usize))
    }

    /// Builds the throttle and spawns its drain task on the current tokio
    /// runtime. The [`Drain`] handle may be dropped; the task runs on.
    pub fn build(
        self,
        downstream: impl Downstream<J>,
    ) -> Result<(Throttle<J>, Drain<J>), BuildError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| BuildError::NoRuntime)?;
        let (throttle, future) = self.build_unspawned(downstream)?;
        let shared = throttle.shared.clone();
        let handle = runtime.spawn(future.into_inner());
        Ok((throttle, Drain::new(handle, shared)))
    }

    /// Builds the throttle and returns its drain future for the caller to
    /// spawn (or await). Nothing is emitted until it runs.
    pub fn build_unspawned(
        self,
        downstream: impl Downstream<J>,
    ) -> Result<(Throttle<J>, DrainFuture<J>), BuildError> {
        self.build_shared(Arc::new(downstream))
    }

    /// Builds and spawns with a downstream already shared (a set's destinations).
    pub(crate) fn build_spawned(
        self,
        downstream: Arc<dyn Downstream<J>>,
    ) -> Result<(Throttle<J>, Drain<J>), BuildError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| BuildError::NoRuntime)?;
        let (throttle, future) = self.build_shared(downstream)?;
        let shared = throttle.shared.clone();
        let handle = runtime.spawn(future.into_inner());
        Ok((throttle, Drain::new(handle, shared)))
    }

    fn build_shared(
        self,
        downstream: Arc<dyn Downstream<J>>,
    ) -> Result<(Throttle<J>, DrainFuture<J>), BuildError> {
        let (rate, max_rate, bound, ring) = self.check()?;
        let budget = self.bound_budget();
        // Withdrawn waiters keep their entry in the ring (not their place)
        // until they are skipped or purged: give them as much room again.
        let ring = match self.withdrawal {
            Some(_) => ring.saturating_mul(2).min(MAX_CAPACITY),
            None => ring,
        };
        let keyed = match self.per_key {
            Some((max_keys, quota)) => {
                Some(KeyedBuckets::new(max_keys, quota).map_err(BuildError::Keyed)?)
            }
            None => None,
        };
        let retries = self.retry.map(|p| Retries::new(p, ring));
        // Recovered jobs wait with the retries, due at once, ahead of new
        // ones; they never count against the admission bound.
        #[cfg(feature = "journal")]
        let (retries, recovered) = match self.recovered.len() {
            0 => (retries, Vec::new()),
            n => {
                let r = retries.unwrap_or_else(|| Retries::new(RetryPolicy::new(1), ring));
                (Some(r.with_room(n)), self.recovered)
            }
        };
        let cfg = Config {
            budget,
            fixed_capacity: bound,
            max_rate,
            overflow: self.overflow,
            max_queue_wait_ns: self
                .max_queue_wait
                .map(|w| u64::try_from(w.as_nanos()).unwrap_or(u64::MAX)),
            deliver_timeout: self.deliver_timeout,
            shutdown_grace: self.shutdown_grace,
            name: self.name.clone(),
        };
        let shared = Arc::new(Shared::new(Parts {
            cfg,
            admission: Admission::new(ring, bound, self.withdrawal),
            endings: Endings {
                name: self.name,
                sink: self.sink,
                on_evicted: self.on_evicted,
                on_expired: self.on_expired,
                on_failed: self.on_failed,
            },
            keyed,
            store: self.key_store,
            in_flight: match &self.member {
                Some(m) => InFlight::within(self.max_in_flight as u32, &m.in_flight),
                None => InFlight::new(self.max_in_flight as u32),
            },
            series: self
                .member
                .as_ref()
                .map(|m| (m.label.clone(), m.tally.clone())),
            gate: self.member.as_ref().map(|m| m.gate.clone()),
            feedback: self.adaptive.as_ref().map(|_| Feedback::new()),
            retries,
            #[cfg(feature = "journal")]
            journal: self.journal,
            rate,
        }));
        #[cfg(feature = "journal")]
        crate::journaled::requeue(&shared, recovered);
        let task = DrainTask::new(
            shared.clone(),
            downstream,
            DrainParts {
                adaptive: self.adaptive,
                permits: self.permits,
                report_deliveries: self.withdrawal.is_none(),
                dispatch: self.dispatch,
                idle_after: self
                    .member
                    .as_ref()
                    .map_or(Duration::ZERO, |m| m.idle_after),
                on_idle: self.member.map(|m| m.on_idle),
            },
        );
        let future = DrainFuture::new(Box::pin(task.run()), shared.clone());
        Ok((Throttle { shared }, future))
    }
}

#[cfg(feature = "journal")]
impl<J: crate::journal::JobCodec + Send + Sync + 'static> ThrottleBuilder<J> {
    /// Records every admitted job in `journal` and its end, and queues what
    /// an earlier run left unfinished there ahead of new jobs, with the ids
    /// they had (feature `journal`).
    ///
    /// With a journal, [`Throttle::submit`] answers once the job's record
    /// is as durable as the journal's [`Durability`](crate::journal::Durability)
    /// says (fsynced by default), and refuses with `Unavailable` (503) when
    /// the journal is full or cannot write. `try_submit` sends the record
    /// without waiting for it. Shutdown leaves unfinished jobs in the
    /// journal (counted [`Outcome::Kept`](crate::Outcome::Kept)) instead of
    /// handing them to the sink or back. A recovered job that no longer
    /// decodes is logged and dropped from the journal.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::journal::Journal;
    /// use dripfeed::{Delivery, Outcome, Throttle};
    /// use std::time::Duration;
    /// let dir = std::env::temp_dir().join(format!("dripfeed-doc-builder-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let (throttle, drain) = Throttle::builder()
    ///     .drain_rate(1000.0)
    ///     .journal(Journal::open(&dir)?)
    ///     .build(|_: &String, _| async { Delivery::Done })?;
    /// throttle.pause();
    /// let first = throttle.submit("a".to_string()).await?;
    /// let report = throttle.shutdown(Duration::ZERO).await;
    /// assert_eq!(report.stats.outcome(Outcome::Kept), 1); // left for the next start
    /// drop(throttle);
    /// drain.join().await;
    ///
    /// let ids = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    /// let seen = ids.clone();
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(1000.0)
    ///     .journal(Journal::open(&dir)?)
    ///     .build(move |_: &String, attempt: dripfeed::Attempt| {
    ///         seen.lock().unwrap().push(attempt.id());
    ///         async { Delivery::Done }
    ///     })?;
    /// // shutdown waits while the recovered job is delivered
    /// let report = throttle.shutdown(Duration::from_secs(5)).await;
    /// assert_eq!(report.stats.delivered(), 1);
    /// assert_eq!(*ids.lock().unwrap(), vec![first.id()]); // the same id
    /// # drop(throttle);
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn journal(mut self, journal: crate::journal::Journal) -> Self {
        self.recovered = journal
            .take_recovered()
            .into_iter()
            .filter_map(|(id, bytes)| {
                crate::journaled::decode_or_end(&journal, id, &bytes, J::decode).map(|j| (id, j))
            })
            .collect();
        self.journal = Some(crate::journaled::Journaling::new(journal, |job, out| {
            job.encode(out)
        }));
        self
    }
}

#[cfg(feature = "journal")]
impl<J: Send + Sync + 'static> ThrottleBuilder<J> {
    /// A set member's journal (the set's, its records tagged with the
    /// destination) and the jobs recovered for it.
    pub(crate) fn journaled(
        mut self,
        journaling: crate::journaled::Journaling<J>,
        recovered: Vec<(u64, J)>,
    ) -> Self {
        self.journal = Some(journaling);
        self.recovered = recovered;
        self
    }
}

impl<J> ThrottleBuilder<J> {
    /// A setting a set's template cannot pass on to each destination: the
    /// setting's name and what to use instead.
    pub(crate) fn unshareable(&self) -> Option<(&'static str, &'static str)> {
        #[cfg(feature = "journal")]
        if self.journal.is_some() {
            return Some((
                "journal",
                "give the journal to the set (DestinationsBuilder::journal)",
            ));
        }
        if self.per_key.is_some() {
            return Some((
                "per_key",
                "each destination's throttle would have its own table, emptied when it goes idle; \
                 give the template key_store(Arc::new(KeyedBuckets::<String>::new(..))) so every \
                 destination charges one table",
            ));
        }
        None
    }
}

fn positive(what: &'static str, value: f64) -> Result<(), BuildError> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(BuildError::InvalidRate { what, value })
    }
}
