//! [`ThrottleBuilder`]: configuration and its validation.

use std::sync::Arc;
use std::time::Duration;

use crate::accounting::dead_letter::DeadLetterSink;
use crate::accounting::endings::{Endings, Hook};
use crate::admission::overflow::Overflow;
use crate::admission::{Admission, Entry, MAX_CAPACITY, Withdrawal};
use crate::drain::dispatch::Dispatch;
use crate::drain::downstream::Downstream;
use crate::drain::fair::DeliveryOrder;
use crate::drain::feedback::Feedback;
use crate::drain::hook::DrainHook;
use crate::drain::retry_policy::RetryPolicy;
use crate::drain::retry_queue::Retries;
use crate::drain::shared::{Config, CostFn, Parts, Shared, bound_for};
use crate::drain::task::{DrainParts, drain_task};
use crate::drain::{Drain, DrainFuture};
use crate::error::BuildError;
use crate::handle::settings::Settings;
use crate::handle::throttle::Throttle;
use crate::keyed::{BucketStore, KeyedBuckets, Prehashed, Quota};
use crate::limits::in_flight::{InFlight, InFlightBudget};
use crate::limits::permits::PermitSource;
use crate::rate::Aimd;

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
    order: DeliveryOrder,
    cost: Option<CostFn<J>>,
    hook: Option<Arc<dyn DrainHook>>,
    shared_in_flight: Option<InFlightBudget>,
    labels: Vec<(String, String)>,
    summed: bool,
    /// What deliveries took lately, as a throttle before this one (of the
    /// same destination) left it, ns: a closing drain starts from it.
    slowest_seed: u64,
    #[cfg(feature = "journal")]
    journal: Option<crate::journal::journaling::Journaling<J>>,
    #[cfg(feature = "journal")]
    recovered: Vec<(u64, J)>,
}

impl<J: Send + Sync + 'static> Throttle<J> {
    /// A builder; set at least the drain rate.
    ///
    /// ```
    /// use dripfeed::{BuildError, Throttle};
    /// assert_eq!(Throttle::<u32>::builder().validate(), Err(BuildError::MissingRate));
    /// assert!(Throttle::<u32>::builder().drain_rate(5.0).validate().is_ok());
    /// ```
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
    ///
    /// ```
    /// use dripfeed::ThrottleBuilder;
    /// use std::time::Duration;
    /// let s = ThrottleBuilder::<u32>::new().settings();
    /// assert_eq!((s.name.as_str(), s.max_in_flight), ("default", 64));
    /// assert_eq!(s.latency_budget, Some(Duration::from_secs(1)));
    /// ```
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
            order: DeliveryOrder::Fifo,
            cost: None,
            hook: None,
            shared_in_flight: None,
            labels: Vec::new(),
            summed: false,
            slowest_seed: 0,
            #[cfg(feature = "journal")]
            journal: None,
            #[cfg(feature = "journal")]
            recovered: Vec::new(),
        }
    }

    /// The name used as the `throttle` label of every metric.
    ///
    /// ```
    /// use dripfeed::Throttle;
    /// assert_eq!(Throttle::<u32>::builder().name("webhooks").settings().name, "webhooks");
    /// assert_eq!(Throttle::<u32>::builder().settings().name, "default");
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The drain rate, jobs per second (required; finite and > 0).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0) // one job every 100 ms
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// for job in 0..3 {
    ///     throttle.try_submit(job).unwrap();
    /// }
    /// tokio::time::sleep(Duration::from_millis(150)).await;
    /// assert_eq!(throttle.stats().delivered(), 2, "at 0 and 100 ms; the third at 200 ms");
    /// # }
    /// ```
    pub fn drain_rate(mut self, jobs_per_second: f64) -> Self {
        self.rate = Some(jobs_per_second);
        self
    }

    /// The highest rate `set_drain_rate` may ever set (default: the drain
    /// rate, or the AIMD ceiling when adaptive). The ring is allocated for it.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .max_rate(20.0)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// assert_eq!(throttle.set_drain_rate(20.0), Ok(10.0));
    /// assert!(throttle.set_drain_rate(30.0).is_err(), "above max_rate");
    /// # }
    /// ```
    pub fn max_rate(mut self, jobs_per_second: f64) -> Self {
        self.max_rate = Some(jobs_per_second);
        self
    }

    /// The worst queueing delay accepted: the admission bound is
    /// `ceil(budget × current rate)`, at least 1. Give this or a
    /// [`capacity`](Self::capacity), not both (that is
    /// [`BuildError::Conflict`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .latency_budget(Duration::from_millis(2500))
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// assert_eq!(throttle.capacity(), 25, "2.5 s × 10/s");
    /// # }
    /// ```
    pub fn latency_budget(mut self, budget: Duration) -> Self {
        self.budget = Some(budget);
        self
    }

    /// A fixed admission bound, whatever the rate. Give this or a
    /// [`latency_budget`](Self::latency_budget), not both.
    ///
    /// ```
    /// use dripfeed::{BuildError, Throttle};
    /// use std::time::Duration;
    /// let both = Throttle::<u32>::builder()
    ///     .drain_rate(10.0)
    ///     .capacity(60)
    ///     .latency_budget(Duration::from_secs(1));
    /// let err = both.validate().unwrap_err();
    /// assert_eq!(err, BuildError::Conflict { first: "capacity", second: "latency_budget" });
    /// ```
    pub fn capacity(mut self, jobs: usize) -> Self {
        self.capacity = Some(jobs);
        self
    }

    /// What happens at the bound (default [`Overflow::TailDrop`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Outcome, Overflow, Throttle};
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(1.0)
    ///     .capacity(2)
    ///     .overflow(Overflow::HeadDrop) // the newest job wins
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// for job in 0..3 {
    ///     assert!(throttle.try_submit(job).is_ok());
    /// }
    /// let stats = throttle.stats();
    /// assert_eq!((stats.depth(), stats.outcome(Outcome::Evicted)), (2, 1));
    /// # }
    /// ```
    pub fn overflow(mut self, policy: Overflow) -> Self {
        self.overflow = policy;
        self
    }

    /// Where jobs that must not be lost go: overflow under
    /// [`Overflow::DeadLetter`], expired jobs, failed deliveries, shutdown
    /// leftovers.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{ChannelSink, DeadLetterReason, Delivery, Throttle};
    /// let (sink, mut letters) = ChannelSink::new(100).unwrap();
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .dead_letter(sink)
    ///     .build(|_: &u32, _| async { Delivery::Failed })
    ///     .unwrap();
    /// throttle.try_submit(7).unwrap();
    /// let letter = letters.recv().await.unwrap();
    /// assert_eq!((letter.job, letter.why), (7, DeadLetterReason::Failed { attempts: 1 }));
    /// # }
    /// ```
    pub fn dead_letter(mut self, sink: impl DeadLetterSink<J>) -> Self {
        self.sink = Some(Arc::new(sink));
        self
    }

    /// The most deliveries running at once (default 64); when all are
    /// running, the drain waits.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(100.0)
    ///     .max_in_flight(2)
    ///     .build(|_: &u32, _| std::future::pending::<Delivery>()) // never answers
    ///     .unwrap();
    /// for job in 0..5 {
    ///     throttle.try_submit(job).unwrap();
    /// }
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// assert_eq!((throttle.stats().in_flight(), throttle.depth()), (2, 3));
    /// # }
    /// ```
    pub fn max_in_flight(mut self, deliveries: usize) -> Self {
        self.max_in_flight = deliveries;
        self
    }

    /// A deadline for every job: one found waiting longer when drained is
    /// expired (to the sink, else `on_expired`) and takes no pacing slot.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(1.0)
    ///     .capacity(10)
    ///     .max_queue_wait(Duration::from_millis(1500))
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// for job in 0..3 {
    ///     throttle.try_submit(job).unwrap(); // due at 0, 1 and 2 s
    /// }
    /// tokio::time::sleep(Duration::from_secs(3)).await;
    /// let stats = throttle.stats();
    /// assert_eq!((stats.delivered(), stats.expired()), (2, 1));
    /// # }
    /// ```
    pub fn max_queue_wait(mut self, wait: Duration) -> Self {
        self.max_queue_wait = Some(wait);
        self
    }

    /// How long a delivery may run before it counts as failed (default 30 s).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Outcome, Throttle};
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .deliver_timeout(Duration::from_millis(100))
    ///     .build(|_: &u32, _| std::future::pending::<Delivery>()) // hangs
    ///     .unwrap();
    /// throttle.try_submit(1).unwrap();
    /// tokio::time::sleep(Duration::from_millis(200)).await;
    /// assert_eq!(throttle.stats().outcome(Outcome::Failed), 1);
    /// # }
    /// ```
    pub fn deliver_timeout(mut self, timeout: Duration) -> Self {
        self.deliver_timeout = timeout;
        self
    }

    /// How long the queue keeps draining when the last handle is dropped (default 30 s).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let (throttle, drain) = Throttle::builder()
    ///     .drain_rate(1.0)
    ///     .capacity(10)
    ///     .shutdown_grace(Duration::from_millis(1500))
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// for job in 0..3 {
    ///     throttle.try_submit(job).unwrap();
    /// }
    /// drop(throttle); // the last handle: 1.5 s more of draining at 1/s
    /// let report = drain.join().await;
    /// assert_eq!((report.stats.delivered(), report.returned), (2, vec![2]));
    /// # }
    /// ```
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// Receives jobs evicted by [`Overflow::HeadDrop`]. Without it they are dropped (and counted).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Overflow, Throttle};
    /// use std::sync::{Arc, Mutex};
    /// let evicted = Arc::new(Mutex::new(Vec::new()));
    /// let seen = evicted.clone();
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(1.0)
    ///     .capacity(2)
    ///     .overflow(Overflow::HeadDrop)
    ///     .on_evicted(move |job: u32| seen.lock().unwrap().push(job))
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// for job in 0..4 {
    ///     throttle.try_submit(job).unwrap();
    /// }
    /// assert_eq!(*evicted.lock().unwrap(), [0, 1], "the oldest make room");
    /// # }
    /// ```
    pub fn on_evicted(mut self, hook: impl Fn(J) + Send + Sync + 'static) -> Self {
        self.on_evicted = Some(Arc::new(hook));
        self
    }

    /// Receives expired jobs the sink did not take. Without it they are dropped (and counted).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// use std::sync::{Arc, Mutex};
    /// use std::time::Duration;
    /// let expired = Arc::new(Mutex::new(Vec::new()));
    /// let seen = expired.clone();
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(1.0)
    ///     .capacity(10)
    ///     .max_queue_wait(Duration::from_millis(500))
    ///     .on_expired(move |job: u32| seen.lock().unwrap().push(job))
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// throttle.try_submit(1).unwrap(); // out at once
    /// throttle.try_submit(2).unwrap(); // due at 1 s: too late
    /// tokio::time::sleep(Duration::from_secs(2)).await;
    /// assert_eq!(*expired.lock().unwrap(), [2]);
    /// # }
    /// ```
    pub fn on_expired(mut self, hook: impl Fn(J) + Send + Sync + 'static) -> Self {
        self.on_expired = Some(Arc::new(hook));
        self
    }

    /// Receives jobs whose delivery failed for good and the sink did not
    /// take. Without it they are dropped (and counted).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// use std::sync::{Arc, Mutex};
    /// use std::time::Duration;
    /// let failed = Arc::new(Mutex::new(Vec::new()));
    /// let seen = failed.clone();
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .on_failed(move |job: u32| seen.lock().unwrap().push(job))
    ///     .build(|job: &u32, _| {
    ///         let answer = if *job == 2 { Delivery::Failed } else { Delivery::Done };
    ///         async move { answer }
    ///     })
    ///     .unwrap();
    /// for job in 1..=3 {
    ///     throttle.try_submit(job).unwrap();
    /// }
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// assert_eq!(*failed.lock().unwrap(), [2]);
    /// # }
    /// ```
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

    /// Gives every key its own reverse leaky bucket (a keyed
    /// [`Submission`](crate::Submission)): `quota` is the
    /// default size and drain rate, and at most `max_keys` buckets are live
    /// at once (a full table evicts a drained bucket, else the one that
    /// empties soonest), so memory stays bounded whatever keys arrive.
    ///
    /// The table answers synchronously, so a keyed
    /// [`try_submit`](Throttle::try_submit) never waits; to
    /// share buckets between processes use
    /// [`key_store`](Self::key_store) instead (the later call wins).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::keyed::Quota;
    /// use dripfeed::{Delivery, Reason, Submission, Throttle};
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(100.0)
    ///     .per_key(10_000, Quota::per_second(1.0).burst(2.0).unwrap())
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// let tenant = |name, job| Submission::new(job).key(name, 1.0);
    /// assert!(throttle.try_submit(tenant("acme", 1)).is_ok());
    /// assert!(throttle.try_submit(tenant("acme", 2)).is_ok());
    /// let over = throttle.try_submit(tenant("acme", 3)).unwrap_err();
    /// assert_eq!(over.reason(), Reason::OverQuota, "acme's burst of 2 is spent");
    /// assert!(throttle.try_submit(tenant("globex", 4)).is_ok(), "another key's is not");
    /// # }
    /// ```
    pub fn per_key(mut self, max_keys: usize, quota: Quota) -> Self {
        self.per_key = Some((max_keys, quota));
        self.key_store = None;
        self
    }

    /// Gives every key its own reverse leaky bucket held in `store` (any
    /// [`BucketStore`]: `global::RedisBuckets` or `global::PgBuckets` for a
    /// fleet, a `KeyedBuckets<String>`, your own), charged by a keyed
    /// [`submit_timeout`](Throttle::submit_timeout) or
    /// [`submit`](Throttle::submit), which await the store.
    /// Replaces [`per_key`](Self::per_key) (the later call wins). Keep a
    /// clone of the `Arc` to set quota overrides or read debts.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::{Delivery, Submission, Throttle};
    /// use dripfeed::keyed::{BucketStore, KeyedBuckets, Quota};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// let tenants: Arc<dyn BucketStore> =
    ///     Arc::new(KeyedBuckets::<String>::new(1_000, Quota::per_second(1.0).burst(1.0)?)?);
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .key_store(tenants.clone())
    ///     .build(|_: &u32, _| async { Delivery::Done })?;
    /// tenants.set_quota("vip", Quota::per_second(1.0).burst(2.0)?).await?;
    /// let charged = |tenant, job| Submission::new(job).key(tenant, 1.0);
    /// throttle.submit_timeout(charged("vip", 1), Duration::ZERO).await?;
    /// throttle.submit_timeout(charged("vip", 2), Duration::ZERO).await?;
    /// assert!(throttle.submit_timeout(charged("guest", 3), Duration::ZERO).await.is_ok());
    /// assert!(throttle.submit_timeout(charged("guest", 4), Duration::ZERO).await.is_err());
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
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Permit, PermitSource, Throttle};
    /// use std::time::Duration;
    /// /// A fleet limit with no permit left.
    /// struct Spent;
    /// #[async_trait::async_trait]
    /// impl PermitSource for Spent {
    ///     fn try_take(&self) -> Option<Permit<'_>> { None }
    ///     async fn ready(&self) { std::future::pending().await }
    /// }
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(100.0)
    ///     .permits(Spent)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// throttle.try_submit(1).unwrap();
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// assert_eq!((throttle.stats().emitted(), throttle.depth()), (0, 1), "no permit, no emission");
    /// # }
    /// ```
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
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Dispatch, Throttle};
    /// use std::collections::HashSet;
    /// use std::sync::{Arc, Mutex};
    /// let tasks = Arc::new(Mutex::new(HashSet::new()));
    /// let seen = tasks.clone();
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(100.0)
    ///     .dispatch(Dispatch::Spawn)
    ///     .build(move |_: &u32, _| {
    ///         seen.lock().unwrap().insert(tokio::task::try_id());
    ///         async { Delivery::Done }
    ///     })
    ///     .unwrap();
    /// for job in 0..3 {
    ///     throttle.try_submit(job).unwrap();
    /// }
    /// tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    /// assert_eq!(tasks.lock().unwrap().len(), 3, "a task per delivery");
    /// # }
    /// ```
    pub fn dispatch(mut self, mode: Dispatch) -> Self {
        self.dispatch = mode;
        self
    }

    /// The order queued jobs are emitted in (default
    /// [`DeliveryOrder::Fifo`]). [`DeliveryOrder::RoundRobinByKey`] emits
    /// one job of each key with jobs waiting in turn, so a cold key's job
    /// is not held behind a hot key's backlog; it costs a hash map of the
    /// keys with jobs queued, in the drain. The key is the one a job was
    /// admitted for (`per_key` or `key_store`): without either every job
    /// shares one turn, which is first in, first out. Not with
    /// [`Overflow::HeadDrop`] (a [`BuildError::Incompatible`]).
    ///
    /// ```
    /// use dripfeed::{BuildError, DeliveryOrder, Overflow, Throttle};
    /// let b = Throttle::<u32>::builder().drain_rate(10.0).delivery_order(DeliveryOrder::RoundRobinByKey);
    /// assert!(b.validate().is_ok());
    /// let both = b.overflow(Overflow::HeadDrop).validate();
    /// assert!(matches!(both, Err(BuildError::Incompatible { .. })));
    /// ```
    pub fn delivery_order(mut self, order: DeliveryOrder) -> Self {
        self.order = order;
        self
    }

    /// What each job costs the drain, in units of its rate: the drain
    /// emits units at `drain_rate`, so a job of cost 5 takes five units'
    /// time before the next goes out (an API limited in tokens or bytes
    /// per second, not requests: rate in tokens a second, each job its
    /// tokens). `cost` is called once per emission (each attempt), must
    /// be cheap and say the same of a job each time; 0 counts as 1. A
    /// full queue's `Retry-After` takes each queued job at the mean cost
    /// of those emitted lately. The queue's bound stays in jobs: with
    /// costs, size it with [`capacity`](Self::capacity) (the latency
    /// budget counts a job as one unit). A keyed job's cost in its key's
    /// budget is the one its [`Submission`](crate::Submission) gives;
    /// give the same number there.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::{Delivery, Throttle};
    /// use std::sync::{Arc, Mutex};
    /// use tokio::time::{Duration, Instant};
    ///
    /// let start = Instant::now();
    /// let times = Arc::new(Mutex::new(Vec::new()));
    /// let seen = times.clone();
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0) // 10 tokens a second
    ///     .capacity(100)
    ///     .cost_by(|tokens: &u32| *tokens)
    ///     .build(move |_: &u32, _| {
    ///         seen.lock().unwrap().push(start.elapsed());
    ///         async { Delivery::Done }
    ///     })?;
    /// for tokens in [5, 1, 1] {
    ///     throttle.try_submit(tokens)?;
    /// }
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// // 5 tokens take half a second of the drain; then 1 each.
    /// let ms: Vec<u128> = times.lock().unwrap().iter().map(|d| d.as_millis()).collect();
    /// assert_eq!(ms, [0, 500, 600]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn cost_by(mut self, cost: impl Fn(&J) -> u32 + Send + Sync + 'static) -> Self {
        self.cost = Some(Arc::new(cost));
        self
    }

    /// Asks `hook` before each emission and tells it of each ended
    /// attempt, each job's end and the drain's idleness (see
    /// [`DrainHook`]). One hook per throttle; the later call wins.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, DrainHook, Outcome, Throttle};
    /// use std::sync::{Arc, Mutex};
    /// #[derive(Default)]
    /// struct Ends(Mutex<Vec<Outcome>>);
    /// impl DrainHook for Ends {
    ///     fn job_ended(&self, _id: u64, outcome: Outcome) {
    ///         self.0.lock().unwrap().push(outcome);
    ///     }
    /// }
    /// let ends = Arc::new(Ends::default());
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .drain_hook(ends.clone())
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// throttle.try_submit(1).unwrap();
    /// tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    /// assert_eq!(*ends.0.lock().unwrap(), [Outcome::Delivered]);
    /// # }
    /// ```
    pub fn drain_hook(mut self, hook: impl DrainHook) -> Self {
        self.hook = Some(Arc::new(hook));
        self
    }

    /// Every delivery also takes a place in `budget`, which other throttles
    /// share; [`max_in_flight`](Self::max_in_flight) stays this throttle's
    /// own cap inside it (see [`InFlightBudget`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, InFlightBudget, Throttle};
    /// use std::time::Duration;
    /// let budget = InFlightBudget::new(1);
    /// let hangs = |_: &u32, _| std::future::pending::<Delivery>();
    /// let builder = Throttle::builder().drain_rate(10.0).shared_in_flight(&budget);
    /// let (a, _da) = builder.template().build(hangs).unwrap();
    /// let (b, _db) = builder.template().build(hangs).unwrap();
    /// a.try_submit(1).unwrap();
    /// tokio::time::sleep(Duration::from_millis(10)).await; // a's delivery takes the place
    /// b.try_submit(2).unwrap();
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// assert_eq!((a.stats().in_flight(), b.stats().in_flight()), (1, 0));
    /// assert_eq!(b.depth(), 1, "b waits for the shared place");
    /// # }
    /// ```
    pub fn shared_in_flight(mut self, budget: &InFlightBudget) -> Self {
        self.shared_in_flight = Some(budget.clone());
        self
    }

    /// Adds a label to every metric series of this throttle, beside
    /// `throttle` (the name). Keep the values few: one per series.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// let b = Throttle::builder().drain_rate(10.0).metric_label("region", "eu");
    /// assert_eq!(b.settings().labels, vec![("region".to_string(), "eu".to_string())]);
    /// let (_throttle, _drain) = b.build(|_: &u32, _| async { Delivery::Done }).unwrap();
    /// # }
    /// ```
    pub fn metric_label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.push((key.into(), value.into()));
        self
    }

    /// Lets several throttles publish into the same metric series (the
    /// same name and labels) at once, or one after another: each publishes
    /// its increments, and takes its gauges (depth, capacity, rate, in
    /// flight, retry wait) back out when it ends, so a series is the sum of
    /// the throttles behind it. Without it, two live throttles with the same
    /// series overwrite each other's gauges.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// let worker = Throttle::builder().name("workers").drain_rate(10.0).summed_series();
    /// let (a, _da) = worker.template().build(|_: &u32, _| async { Delivery::Done }).unwrap();
    /// let (b, _db) = worker.template().build(|_: &u32, _| async { Delivery::Done }).unwrap();
    /// a.pause();
    /// b.pause();
    /// a.try_submit(1).unwrap();
    /// b.try_submit(2).unwrap();
    /// // leaky_bucket_queue_depth{throttle="workers"} now reads 2
    /// assert_eq!(a.depth() + b.depth(), 2);
    /// # }
    /// ```
    pub fn summed_series(mut self) -> Self {
        self.summed = true;
        self
    }

    /// Starts the throttle's estimate of what a delivery takes (what a
    /// closing drain goes by) at `ns`: a destination's next throttle goes
    /// on from its last one's.
    pub(crate) fn seed_slowest(mut self, ns: u64) -> Self {
        self.slowest_seed = ns;
        self
    }

    /// A copy of every setting but the journal (a journal belongs to one
    /// throttle; see [`shared_journal`](Self::shared_journal) for throttles
    /// that share one), to build several throttles alike.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// let template = Throttle::builder().drain_rate(50.0).capacity(10);
    /// let (a, _da) = template.template().name("a").build(|_: &u32, _| async { Delivery::Done }).unwrap();
    /// let (b, _db) = template.template().name("b").build(|_: &u32, _| async { Delivery::Done }).unwrap();
    /// assert_eq!((a.capacity(), b.capacity()), (10, 10));
    /// assert_eq!((a.name(), b.name()), ("a", "b"));
    /// # }
    /// ```
    pub fn template(&self) -> Self {
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
            order: self.order,
            cost: self.cost.clone(),
            hook: self.hook.clone(),
            shared_in_flight: self.shared_in_flight.clone(),
            labels: self.labels.clone(),
            summed: self.summed,
            slowest_seed: self.slowest_seed,
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

    /// What this builder was told, read back.
    ///
    /// ```
    /// use dripfeed::Throttle;
    /// use std::time::Duration;
    /// let b = Throttle::<u32>::builder().drain_rate(20.0).latency_budget(Duration::from_secs(2));
    /// let s = b.settings();
    /// assert_eq!((s.drain_rate, s.latency_budget), (Some(20.0), Some(Duration::from_secs(2))));
    /// assert_eq!(Throttle::<u32>::builder().capacity(5).settings().latency_budget, None);
    /// ```
    pub fn settings(&self) -> Settings {
        Settings {
            name: self.name.clone(),
            drain_rate: self.rate,
            max_rate: self.max_rate,
            adaptive: self.adaptive.as_ref().map(|a| a.config().clone()),
            latency_budget: self.bound_budget(),
            capacity: self.capacity,
            max_in_flight: self.max_in_flight,
            per_key: self.per_key.is_some(),
            key_store: self.key_store.is_some(),
            permits: self.permits.is_some(),
            #[cfg(feature = "journal")]
            journal: self.journal.is_some(),
            #[cfg(not(feature = "journal"))]
            journal: false,
            labels: self.labels.clone(),
        }
    }

    /// Checks the configuration without building anything.
    ///
    /// ```
    /// use dripfeed::{BuildError, Throttle};
    /// use std::time::Duration;
    /// assert!(Throttle::<u32>::builder().drain_rate(10.0).validate().is_ok());
    /// let zero = Throttle::<u32>::builder().drain_rate(10.0).max_queue_wait(Duration::ZERO);
    /// assert_eq!(zero.validate(), Err(BuildError::ZeroDuration { what: "max queue wait" }));
    /// ```
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
            (Some(_), Some(_)) => {
                return Err(BuildError::Conflict {
                    first: "capacity",
                    second: "latency_budget",
                });
            }
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
        if self.withdrawal.is_some() && self.order == DeliveryOrder::RoundRobinByKey {
            return Err(BuildError::Incompatible {
                first: "delivery_order(RoundRobinByKey)",
                second: "Slots",
                why: "a waiter the drain holds per key could no longer be withdrawn when its caller gives up",
            });
        }
        if self.overflow == Overflow::HeadDrop && self.order == DeliveryOrder::RoundRobinByKey {
            return Err(BuildError::Incompatible {
                first: "delivery_order(RoundRobinByKey)",
                second: "overflow(HeadDrop)",
                why: "the jobs the drain holds per key are out of head-drop's reach; use TailDrop or DeadLetter",
            });
        }
        // Both fit in usize: ring <= MAX_CAPACITY and bound <= ring.
        Ok((rate, max_rate, bound as usize, ring as usize))
    }

    /// Builds the throttle and spawns its drain task on the current tokio
    /// runtime. The [`Drain`] handle may be dropped; the task runs on.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let (throttle, drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// drop(drain); // detached: the task runs on
    /// throttle.try_submit(1).unwrap();
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// assert_eq!(throttle.stats().delivered(), 1);
    /// # }
    /// ```
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
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let (throttle, drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .build_unspawned(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// throttle.try_submit(1).unwrap();
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// assert_eq!(throttle.stats().emitted(), 0, "not running yet");
    /// tokio::spawn(drain);
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// assert_eq!(throttle.stats().delivered(), 1);
    /// # }
    /// ```
    pub fn build_unspawned(
        self,
        downstream: impl Downstream<J>,
    ) -> Result<(Throttle<J>, DrainFuture<J>), BuildError> {
        self.build_shared(Arc::new(downstream))
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
                // Its keys are the throttle's seeded hashes of the user's.
                let table = KeyedBuckets::builder(max_keys, quota).hasher(Prehashed);
                Some(table.build().map_err(BuildError::Keyed)?)
            }
            None => None,
        };
        warn_burst_above_queue(&self.name, &self.per_key, &self.key_store, bound);
        let retries = self.retry.map(|p| Retries::new(p, ring));
        // Recovered jobs wait with the retries, due at once (or when their
        // retry was due), ahead of new ones; they never count against the
        // admission bound.
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
        // Deliveries polled by the drain task: their counts have one writer.
        let inline = self.dispatch == Dispatch::Inline;
        let shared = Arc::new(Shared::new(Parts {
            cfg,
            inline,
            admission: Admission::new(
                ring,
                bound,
                self.withdrawal,
                self.per_key.is_some() || self.key_store.is_some(),
            ),
            endings: Endings {
                name: self.name,
                sink: self.sink,
                on_evicted: self.on_evicted,
                on_expired: self.on_expired,
                on_failed: self.on_failed,
            },
            keyed,
            store: self.key_store,
            in_flight: match &self.shared_in_flight {
                Some(budget) => InFlight::within(self.max_in_flight as u32, budget, inline),
                None => InFlight::new(self.max_in_flight as u32, inline),
            },
            labels: self.labels,
            summed: self.summed,
            slowest_seed: self.slowest_seed,
            hook: self.hook,
            cost: self.cost,
            feedback: self.adaptive.as_ref().map(|_| Feedback::new()),
            retries,
            #[cfg(feature = "journal")]
            journal: self.journal,
            rate,
        }));
        #[cfg(feature = "journal")]
        crate::handle::durable::requeue(&shared, recovered);
        let task = drain_task(
            shared.clone(),
            downstream,
            DrainParts {
                adaptive: self.adaptive,
                permits: self.permits,
                report_deliveries: self.withdrawal.is_none(),
                dispatch: self.dispatch,
                order: self.order,
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
        // Every unfinished job is this throttle's, tagged or not (a
        // shared journal's records, opened by a single throttle, keep
        // their jobs).
        self.recovered = journal
            .take_recovered()
            .into_iter()
            .filter_map(|r| {
                crate::journal::journaling::decode_or_end(&journal, r.id, &r.job).map(|j| (r.id, j))
            })
            .collect();
        self.journal = Some(crate::journal::journaling::Journaling::new(journal, None));
        self
    }

    /// Records every admitted job in `journal`, which other throttles
    /// share, each record naming `tag` ahead of the job, and queues
    /// `recovered` (jobs of an earlier run with this tag, found with
    /// [`Journal::take_recovered`](crate::journal::Journal::take_recovered)
    /// and decoded) ahead of new ones, with their ids. Otherwise as
    /// [`journal`](Self::journal), except that this throttle's shutdown does
    /// not flush the journal: whoever shares it flushes it once
    /// ([`Journal::flush`](crate::journal::Journal::flush)) after every
    /// throttle on it has shut down.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::journal::{JobCodec, Journal};
    /// use dripfeed::{Attempt, Delivery, Throttle};
    /// use std::time::Duration;
    /// let dir = std::env::temp_dir().join(format!("dripfeed-doc-shared-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let journal = Journal::open(&dir)?;
    /// let (eu, d1) = Throttle::builder().drain_rate(10.0)
    ///     .shared_journal(journal.clone(), "eu", Vec::new())
    ///     .build(|_: &String, _| async { Delivery::Done })?;
    /// let (us, d2) = Throttle::builder().drain_rate(10.0)
    ///     .shared_journal(journal.clone(), "us", Vec::new())
    ///     .build(|_: &String, _| async { Delivery::Done })?;
    /// eu.pause();
    /// us.pause();
    /// let kept = eu.submit("to eu".to_string()).await?;
    /// us.submit("to us".to_string()).await?;
    /// eu.shutdown(Duration::ZERO).await;
    /// us.shutdown(Duration::ZERO).await;
    /// journal.flush().await;
    /// drop((eu, us, d1, d2, journal));
    ///
    /// // The next start gives each throttle the jobs of its tag.
    /// let journal = Journal::open(&dir)?;
    /// let mut for_eu = Vec::new();
    /// for r in journal.take_recovered() {
    ///     if r.tag.as_deref() == Some("eu") {
    ///         for_eu.push((r.id, String::decode(&r.job)?));
    ///     }
    /// }
    /// let (eu, _d) = Throttle::builder().drain_rate(10.0)
    ///     .shared_journal(journal.clone(), "eu", for_eu)
    ///     .build(move |job: &String, at: Attempt| {
    ///         assert_eq!((job.as_str(), at.id()), ("to eu", kept.id()));
    ///         async { Delivery::Done }
    ///     })?;
    /// assert_eq!(eu.shutdown(Duration::from_secs(5)).await.stats.delivered(), 1);
    /// # drop(eu);
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn shared_journal(
        mut self,
        journal: crate::journal::Journal,
        tag: &str,
        recovered: Vec<(u64, J)>,
    ) -> Self {
        self.recovered = recovered;
        self.journal = Some(crate::journal::journaling::Journaling::new(
            journal,
            Some(tag.into()),
        ));
        self
    }
}

/// A key's burst larger than the queue: the queue, not the quota, limits
/// that key's bursts, and a flooding key fills the queue to the point where
/// the fair-share rule refuses it. Legal, so a warning, not an error.
fn warn_burst_above_queue(
    name: &str,
    per_key: &Option<(usize, Quota)>,
    store: &Option<Arc<dyn BucketStore>>,
    capacity: usize,
) {
    let burst = match (per_key, store) {
        (Some((_, quota)), _) => quota.size(),
        (None, Some(store)) => store.default_quota().size(),
        (None, None) => return,
    };
    if burst > capacity as f64 {
        tracing::warn!(
            throttle = name,
            burst,
            capacity,
            "a key's burst is above the queue's capacity: a flooding key is held to its share of \
             the queue's last quarter, not to its quota"
        );
    }
}

fn positive(what: &'static str, value: f64) -> Result<(), BuildError> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(BuildError::InvalidRate { what, value })
    }
}
