//! Fan-out: a bounded set of throttles keyed by destination, made on demand
//! from one template, none able to starve the others.
//!
//! Each destination has its own ring (its latency budget × its own rate),
//! its own pacing, its own AIMD when the template is adaptive, and its own
//! circuit breaker ([`BreakerConfig`]). What they share:
//!
//! - **an in-flight budget** ([`max_in_flight`](DestinationsBuilder::max_in_flight)):
//!   every delivery takes a place in it *and* in its destination's cap (the
//!   template's `max_in_flight`), so a dead receiver holds at most its cap;
//! - **a bound on jobs held** ([`max_jobs`](DestinationsBuilder::max_jobs)):
//!   queued, waiting for a retry or in flight, across all destinations. At
//!   the bound every new job is refused (503); from three quarters of it on,
//!   only destinations holding less than an equal share
//!   (`max_jobs / (destinations holding jobs + 1)`) are admitted, so the
//!   destinations with the largest queues get the 503s and the last quarter
//!   stays for the others.
//!
//! **Idle destinations cost nothing but a record.** A destination's throttle
//! (ring, drain task, metrics handles) exists only while it has work: once
//! its drain has found nothing queued, waiting or in flight for
//! [`idle_after`](DestinationsBuilder::idle_after) (1 s) it hands the
//! throttle back and the task ends; no timer runs for it. The record keeps
//! its overrides, its breaker, its learned rate and its counts (about 560
//! bytes of heap with its map entry, measured by `tests/idle_cost.rs`). At [`max_destinations`](DestinationsBuilder::max_destinations) a
//! new destination retires the record idle longest that was not named in
//! the configuration and whose breaker is closed; if there is none, it is
//! refused.
//!
//! **Breaker.** While a destination's breaker is open its queued jobs wait
//! (they are neither failed nor charged an attempt); once its queue is full,
//! new jobs are refused with a `Retry-After` of at least the cool-down left.
//!
//! **Metrics** carry a `destination` label: the destination's name for those
//! named in the configuration ([`destination`](DestinationsBuilder::destination)),
//! `_other` for all the rest, summed (each throttle publishes increments
//! from what it published last, and takes its gauges back out when it ends).
//! A named destination shows its capacity and drain rate from the start
//! and while idle (the bound and rate it would start with), so its series
//! exist before its first job and `depth / capacity` never divides by zero.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use dripfeed::destinations::{DestinationConfig, Destinations};
//! use dripfeed::{Delivery, Reason, Throttle};
//! use std::time::Duration;
//! let set = Destinations::builder(
//!         Throttle::builder().drain_rate(100.0).latency_budget(Duration::from_secs(1)).max_in_flight(4),
//!     )
//!     .max_in_flight(16)
//!     .destination("slow", DestinationConfig::default().rate(5.0).ceiling(5.0))
//!     .build(|name: &str| {
//!         let _url = format!("https://{name}.example/hook"); // one client per destination
//!         |_: &u32, _| async { Delivery::Done }
//!     })?;
//! for job in 0..5 {
//!     set.try_submit("slow", job)?; // 5/s × 1 s: five fit
//! }
//! let refused = set.try_submit("slow", 99).unwrap_err();
//! assert_eq!(refused.reason(), Reason::Overloaded);
//! assert!(set.try_submit("fast", 1).is_ok(), "another destination is not held up");
//! tokio::time::sleep(Duration::from_secs(2)).await;
//! assert_eq!(set.stats("slow").unwrap().delivered(), 5);
//! assert_eq!(set.stats("fast").unwrap().delivered(), 1);
//! # Ok(())
//! # }
//! ```

mod breaker;
mod change;
mod config;
mod dest;
mod drivers;
mod gate;
#[cfg(feature = "journal")]
mod journaled;
mod member;
mod stats;
mod tally;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use metrics::{Gauge, gauge};

pub use breaker::{BreakerConfig, BreakerState};
pub use config::{DefineError, DestinationConfig, DestinationError};
pub use drivers::Drivers;
pub use stats::DestinationStats;

use crate::accounting::metrics::DESTINATIONS;
use crate::{
    Admitted, BuildError, Downstream, Drain, DrainHook, InFlightBudget, Reason, Rejected, Settings,
    Submission, Throttle, ThrottleBuilder,
};
use dest::Dest;
use tally::SetTally;

/// Builds and spawns a destination's throttle from its builder, with the
/// downstream made for its name.
type Factory<J> =
    dyn Fn(ThrottleBuilder<J>, &str) -> Result<(Throttle<J>, Drain<J>), BuildError> + Send + Sync;

/// Nanoseconds in `d`, saturating.
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The label of every destination not named in the configuration.
///
/// ```
/// use dripfeed::destinations::{DestinationConfig, OTHER};
/// assert_eq!(OTHER, "_other");
/// // A named destination can be summed there too, to keep a scrape small.
/// assert!(!DestinationConfig::default().own_series(false).has_own_series());
/// ```
pub const OTHER: &str = "_other";

/// Builds a [`Destinations`] set from a template [`ThrottleBuilder`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use dripfeed::destinations::{DestinationConfig, Destinations, DestinationsBuilder};
/// use dripfeed::{Delivery, Throttle};
/// let template = Throttle::builder().drain_rate(50.0).max_rate(100.0);
/// let builder: DestinationsBuilder<u32> = Destinations::builder(template)
///     .max_destinations(1_000)
///     .destination("partner", DestinationConfig::default().rate(5.0));
/// assert_eq!(builder.validate()?, 100.0, "the highest rate a destination may have");
/// let set = builder.build(|_name: &str| |_: &u32, _| async { Delivery::Done })?;
/// assert!(set.contains("partner"), "named destinations exist from the start");
/// # Ok(())
/// # }
/// ```
pub struct DestinationsBuilder<J> {
    template: ThrottleBuilder<J>,
    max_in_flight: usize,
    max_jobs: usize,
    max_destinations: usize,
    breaker: Option<BreakerConfig>,
    named: Vec<(String, DestinationConfig)>,
    idle_after: Duration,
    /// Driver tasks for the drains (0: a task each).
    drivers: usize,
    hook: Option<Arc<dyn DrainHook>>,
    #[cfg(feature = "journal")]
    journal: Option<journaled::Recovery<J>>,
    #[cfg(feature = "journal")]
    on_recovered: Option<Box<journaled::OnRecovered<J>>>,
}

/// A set of throttles keyed by destination (see the [module](self) docs).
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use dripfeed::destinations::Destinations;
/// use dripfeed::{Delivery, Throttle};
/// use std::time::Duration;
/// let set = Destinations::builder(Throttle::builder().drain_rate(10.0))
///     .build(|_name: &str| |_: &u32, _| async { Delivery::Done })?;
/// set.try_submit("a.example", 1)?;
/// set.try_submit("b.example", 2)?;
/// assert_eq!((set.len(), set.active()), (2, 2));
/// tokio::time::sleep(Duration::from_secs(2)).await; // delivered, then idle
/// assert_eq!(set.active(), 0, "idle destinations hold no throttle");
/// assert_eq!(set.stats("b.example").map(|s| s.delivered()), Some(1));
/// # Ok(())
/// # }
/// ```
pub struct Destinations<J> {
    inner: Arc<Inner<J>>,
}

impl<J> Clone for Destinations<J> {
    fn clone(&self) -> Self {
        Destinations {
            inner: self.inner.clone(),
        }
    }
}

pub(crate) struct Inner<J> {
    pub(crate) name: String,
    pub(crate) template: ThrottleBuilder<J>,
    pub(crate) settings: Settings,
    /// The highest rate any destination may have.
    pub(crate) max_rate: f64,
    pub(crate) factory: Box<Factory<J>>,
    pub(crate) in_flight: InFlightBudget,
    pub(crate) tally: Arc<SetTally>,
    pub(crate) max_jobs: usize,
    pub(crate) max_destinations: usize,
    pub(crate) breaker: Option<BreakerConfig>,
    pub(crate) idle_after: Duration,
    /// The user's hook, told of every destination's events.
    pub(crate) hook: Option<Arc<dyn DrainHook>>,
    table: Mutex<HashMap<Arc<str>, Arc<Dest<J>>>>,
    closed: AtomicBool,
    pub(crate) known: Gauge,
    pub(crate) active: Gauge,
    #[cfg(feature = "journal")]
    pub(crate) journal: Option<journaled::SetJournal<J>>,
}

impl<J: Send + Sync + 'static> Destinations<J> {
    /// A builder: every destination's throttle is made from `template`
    /// (its `max_in_flight` is the per-destination cap).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let template = Throttle::builder().drain_rate(100.0).max_in_flight(2);
    /// let set = Destinations::builder(template)
    ///     .build(|_: &str| |_: &u32, _| std::future::pending::<Delivery>())?; // hangs
    /// for job in 0..5 {
    ///     set.try_submit("a", job)?;
    /// }
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// assert_eq!(set.stats("a").unwrap().in_flight(), 2, "the template's cap, per destination");
    /// # Ok(())
    /// # }
    /// ```
    pub fn builder(template: ThrottleBuilder<J>) -> DestinationsBuilder<J> {
        DestinationsBuilder {
            template,
            max_in_flight: 256,
            max_jobs: 1_000_000,
            max_destinations: 10_000,
            breaker: Some(BreakerConfig::default()),
            named: Vec::new(),
            idle_after: Duration::from_secs(1),
            drivers: 0,
            hook: None,
            #[cfg(feature = "journal")]
            journal: None,
            #[cfg(feature = "journal")]
            on_recovered: None,
        }
    }
}

impl<J: Send + Sync + 'static> DestinationsBuilder<J> {
    /// Deliveries running at once across all destinations (default 256).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let set = Destinations::builder(Throttle::builder().drain_rate(100.0).max_in_flight(2))
    ///     .max_in_flight(3)
    ///     .build(|_: &str| |_: &u32, _| std::future::pending::<Delivery>())?; // hangs
    /// for job in 0..4 {
    ///     set.try_submit("a", job)?;
    ///     set.try_submit("b", job)?;
    /// }
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// let running: u64 = set.all_stats().iter().map(|s| s.in_flight()).sum();
    /// assert_eq!(running, 3, "2 + 2 by the destinations' caps, 3 by the set's");
    /// # Ok(())
    /// # }
    /// ```
    pub fn max_in_flight(mut self, deliveries: usize) -> Self {
        self.max_in_flight = deliveries;
        self
    }

    /// Jobs held at once across all destinations (default 1,000,000).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Reason, Throttle};
    /// let set = Destinations::builder(Throttle::builder().drain_rate(1.0).capacity(10))
    ///     .max_jobs(2)
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// set.try_submit("a", 1)?;
    /// set.try_submit("b", 2)?;
    /// assert_eq!(set.try_submit("c", 3).unwrap_err().reason(), Reason::Overloaded);
    /// assert_eq!(set.held(), 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn max_jobs(mut self, jobs: usize) -> Self {
        self.max_jobs = jobs;
        self
    }

    /// Destinations known at once (default 10,000).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let set = Destinations::builder(Throttle::builder().drain_rate(10.0))
    ///     .max_destinations(1)
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// set.try_submit("a", 1)?;
    /// assert!(set.try_submit("b", 2).is_err(), "a holds a job: it stays");
    /// tokio::time::sleep(Duration::from_secs(2)).await; // a delivered, then idle
    /// set.try_submit("b", 3)?;
    /// assert!(!set.contains("a") && set.contains("b"), "a's record was retired for b");
    /// # Ok(())
    /// # }
    /// ```
    pub fn max_destinations(mut self, destinations: usize) -> Self {
        self.max_destinations = destinations;
        self
    }

    /// The circuit breaker every destination has (default: [`BreakerConfig::default`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::{BreakerConfig, BreakerState, Destinations};
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let set = Destinations::builder(Throttle::builder().drain_rate(100.0))
    ///     .breaker(BreakerConfig::default().trip_after(1))
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Failed })?;
    /// for job in 0..3 {
    ///     set.try_submit("down", job)?;
    /// }
    /// tokio::time::sleep(Duration::from_millis(100)).await;
    /// let down = set.stats("down").unwrap();
    /// assert_eq!((down.breaker(), down.failed(), down.depth()), (BreakerState::Open, 1, 2));
    /// # Ok(())
    /// # }
    /// ```
    pub fn breaker(mut self, cfg: BreakerConfig) -> Self {
        self.breaker = Some(cfg);
        self
    }

    /// Runs the active destinations' drains on `tasks` driver tasks (one
    /// scheduler for many drains) instead of a task each (`0`, the
    /// default). Each drain keeps its next emission time as a tokio timer,
    /// and a driver polls only the drains woken: with thousands of
    /// destinations active at once, a few tasks instead of thousands, each
    /// drain still one emitter deciding in order at its own rate. Two per
    /// core is plenty.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let set = Destinations::builder(Throttle::builder().drain_rate(10.0).capacity(10))
    ///     .drivers(1)
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// for d in 0..100 {
    ///     set.try_submit(&format!("d{d}"), d)?;
    /// }
    /// let tasks = tokio::runtime::Handle::current().metrics().num_alive_tasks();
    /// assert!(tasks <= 2, "one driver for 100 drains: {tasks}");
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// let delivered: u64 = set.all_stats().iter().map(|s| s.delivered()).sum();
    /// assert_eq!(delivered, 100);
    /// # Ok(())
    /// # }
    /// ```
    pub fn drivers(mut self, tasks: usize) -> Self {
        self.drivers = tasks;
        self
    }

    /// How long a destination with nothing queued, waiting or in flight
    /// keeps its throttle before handing it back (default 1 s). A job in
    /// that time finds the throttle as it was, so a destination with
    /// steady sparse traffic is not rebuilt for every job and its AIMD
    /// keeps its latency window; after it, the destination holds no
    /// throttle, task or timer. `Duration::ZERO` hands it back at once.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let set = Destinations::builder(Throttle::builder().drain_rate(10.0))
    ///     .idle_after(Duration::from_secs(5))
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// set.try_submit("a", 1)?;
    /// tokio::time::sleep(Duration::from_secs(2)).await;
    /// assert_eq!(set.active(), 1, "delivered, and kept for 5 s");
    /// tokio::time::sleep(Duration::from_secs(5)).await;
    /// assert_eq!(set.active(), 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn idle_after(mut self, linger: Duration) -> Self {
        self.idle_after = linger;
        self
    }

    /// A hook told of every destination's attempts, retries and job ends
    /// (with the job's id), and asked before each emission once the
    /// destination's breaker lets it go (see [`DrainHook`]); idleness is
    /// the set's own business. A template's own `drain_hook` is replaced by
    /// the set's for each destination: give it here.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, DrainHook, Outcome, Throttle};
    /// use std::sync::{Arc, Mutex};
    /// #[derive(Default)]
    /// struct Ends(Mutex<Vec<(u64, Outcome)>>);
    /// impl DrainHook for Ends {
    ///     fn job_ended(&self, id: u64, outcome: Outcome) {
    ///         self.0.lock().unwrap().push((id, outcome));
    ///     }
    /// }
    /// let ends = Arc::new(Ends::default());
    /// let set = Destinations::builder(Throttle::builder().drain_rate(10.0))
    ///     .drain_hook(ends.clone())
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// let id = set.try_submit("a", 1)?.id();
    /// tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    /// assert_eq!(*ends.0.lock().unwrap(), vec![(id, Outcome::Delivered)]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn drain_hook(mut self, hook: impl DrainHook) -> Self {
        self.hook = Some(Arc::new(hook));
        self
    }

    /// No circuit breaker.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::{BreakerState, Destinations};
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let set = Destinations::builder(Throttle::builder().drain_rate(100.0))
    ///     .no_breaker()
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Failed })?;
    /// for job in 0..10 {
    ///     set.try_submit("down", job)?;
    /// }
    /// tokio::time::sleep(Duration::from_millis(500)).await;
    /// let down = set.stats("down").unwrap();
    /// assert_eq!((down.failed(), down.breaker()), (10, BreakerState::Closed), "every job tried");
    /// # Ok(())
    /// # }
    /// ```
    pub fn no_breaker(mut self) -> Self {
        self.breaker = None;
        self
    }

    /// Names a destination: it gets its own metrics series and is never
    /// retired; `cfg` overrides the template for it.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::{DestinationConfig, Destinations};
    /// use dripfeed::{Delivery, Throttle};
    /// let set = Destinations::builder(Throttle::builder().drain_rate(100.0))
    ///     .destination("partner", DestinationConfig::default().rate(5.0))
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// let partner = set.stats("partner").unwrap(); // known before its first job
    /// assert!(partner.is_named());
    /// assert_eq!((partner.drain_rate(), partner.capacity()), (5.0, 5));
    /// # Ok(())
    /// # }
    /// ```
    pub fn destination(mut self, name: impl Into<String>, cfg: DestinationConfig) -> Self {
        self.named.push((name.into(), cfg));
        self
    }

    /// Checks the template, the limits and every named destination's
    /// overrides as [`build`](Self::build) does, without building anything
    /// (no runtime needed: a configuration check can call it). Returns the
    /// highest rate any destination may have.
    ///
    /// ```
    /// use dripfeed::destinations::{DestinationConfig, DestinationError, Destinations};
    /// use dripfeed::Throttle;
    /// let ok = Destinations::<u32>::builder(Throttle::builder().drain_rate(10.0).max_rate(50.0))
    ///     .destination("a", DestinationConfig::default().ceiling(20.0));
    /// assert_eq!(ok.validate(), Ok(50.0));
    /// let too_fast = Destinations::<u32>::builder(Throttle::builder().drain_rate(10.0))
    ///     .destination("a", DestinationConfig::default().rate(99.0));
    /// assert!(matches!(too_fast.validate(), Err(DestinationError::AboveMax { .. })));
    /// ```
    pub fn validate(&self) -> Result<f64, DestinationError> {
        self.template.validate()?;
        let settings = self.template.settings();
        if let Some((what, instead)) = unshareable(&settings) {
            return Err(DestinationError::Template { what, instead });
        }
        for (what, n) in [
            ("max_in_flight", self.max_in_flight),
            ("max_jobs", self.max_jobs),
            ("max_destinations", self.max_destinations),
        ] {
            if n == 0 {
                return Err(DestinationError::ZeroLimit { what });
            }
        }
        if u32::try_from(self.max_in_flight).is_err() {
            return Err(DestinationError::ZeroLimit {
                what: "max_in_flight",
            });
        }
        if let Some(b) = &self.breaker {
            b.validate().map_err(DestinationError::Breaker)?;
        }
        let max_rate = settings
            .max_rate
            .or(settings.adaptive.as_ref().map(|a| a.ceiling()))
            .or(settings.drain_rate)
            .unwrap_or(1.0);
        for (_, cfg) in &self.named {
            cfg.validate(max_rate)?;
            fits_template(&settings, cfg)?;
        }
        Ok(max_rate)
    }

    /// Builds the set; `downstream` makes a destination's downstream from
    /// its name each time the destination becomes active. Needs a tokio
    /// runtime (drain tasks are spawned on it).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Throttle};
    /// use std::sync::{Arc, Mutex};
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// let seen = log.clone();
    /// let set = Destinations::builder(Throttle::builder().drain_rate(10.0))
    ///     .build(move |name: &str| {
    ///         let (name, seen) = (name.to_owned(), seen.clone());
    ///         move |job: &u32, _| {
    ///             seen.lock().unwrap().push(format!("{name}:{job}"));
    ///             async { Delivery::Done }
    ///         }
    ///     })?;
    /// set.try_submit("a", 1)?;
    /// set.try_submit("b", 2)?;
    /// tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    /// let mut seen = log.lock().unwrap().clone();
    /// seen.sort();
    /// assert_eq!(seen, ["a:1", "b:2"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn build<D: Downstream<J>>(
        self,
        downstream: impl Fn(&str) -> D + Send + Sync + 'static,
    ) -> Result<Destinations<J>, DestinationError> {
        let max_rate = self.validate()?;
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| DestinationError::Build(BuildError::NoRuntime))?;
        let drivers = (self.drivers > 0).then(|| drivers::Drivers::start(self.drivers, &runtime));
        let settings = self.template.settings();
        let name = settings.name.clone();
        #[cfg(feature = "journal")]
        let on_recovered = self.on_recovered;
        #[cfg(feature = "journal")]
        let (journal, recovered) = match self.journal {
            Some(r) => {
                let sole = match &self.named[..] {
                    [(only, _)] => Some(only.as_str()),
                    _ => None,
                };
                let (j, groups) = r.sort(sole);
                (Some(j), groups)
            }
            None => (None, Vec::new()),
        };
        let inner = Inner {
            known: gauge!(DESTINATIONS, "throttle" => name.clone(), "state" => "known"),
            active: gauge!(DESTINATIONS, "throttle" => name.clone(), "state" => "active"),
            name,
            template: self.template,
            settings,
            max_rate,
            factory: Box::new(move |b: ThrottleBuilder<J>, name: &str| match &drivers {
                None => b.build(downstream(name)),
                Some(drivers) => {
                    let (throttle, drain) = b.build_unspawned(downstream(name))?;
                    let (drain, shared) = drain.into_parts();
                    Ok((throttle, Drain::driven(drivers.run(drain), shared)))
                }
            }),
            in_flight: InFlightBudget::new(self.max_in_flight),
            tally: Arc::new(SetTally::default()),
            max_jobs: self.max_jobs,
            max_destinations: self.max_destinations.max(self.named.len()),
            breaker: self.breaker,
            idle_after: self.idle_after,
            hook: self.hook,
            table: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
            #[cfg(feature = "journal")]
            journal,
        };
        let inner = Arc::new(inner);
        {
            let mut table = inner.lock();
            for (name, cfg) in self.named {
                let dest = Dest::new(&inner, &name, true, cfg);
                table.insert(dest.name.clone(), Arc::new(dest));
            }
            inner.known.set(table.len() as f64);
        }
        // Jobs an earlier run left go back to their destinations (made if
        // no longer named, past the bound if need be: they hold jobs).
        #[cfg(feature = "journal")]
        for (name, jobs) in recovered {
            let dest = {
                let mut table = inner.lock();
                let d = table
                    .entry(Arc::from(name.as_str()))
                    .or_insert_with(|| {
                        Arc::new(Dest::new(
                            &inner,
                            &name,
                            false,
                            DestinationConfig::default(),
                        ))
                    })
                    .clone();
                inner.known.set(table.len() as f64);
                d
            };
            dest.touch();
            if let Some(seen) = &on_recovered {
                for (id, job) in &jobs {
                    seen(&name, *id, job);
                }
            }
            dest.recover(&inner, jobs);
        }
        Ok(Destinations { inner })
    }
}

/// A template setting the set cannot pass on to each destination: the
/// setting's name and what to use instead.
fn unshareable(s: &Settings) -> Option<(&'static str, &'static str)> {
    if s.journal {
        return Some((
            "journal",
            "give the journal to the set (DestinationsBuilder::journal)",
        ));
    }
    if s.per_key {
        return Some((
            "per_key",
            "each destination's throttle would have its own table, emptied when it goes idle; \
             give the template key_store(Arc::new(KeyedBuckets::<String>::new(..))) so every \
             destination charges one table",
        ));
    }
    None
}

/// A budget override on a template with a fixed capacity would give the
/// destination's throttle both: refused, as the builder refuses them.
fn fits_template(s: &Settings, cfg: &DestinationConfig) -> Result<(), DestinationError> {
    match (s.capacity, cfg.budget_override()) {
        (Some(_), Some(_)) => Err(DestinationError::Build(BuildError::Conflict {
            first: "capacity",
            second: "latency_budget",
        })),
        _ => Ok(()),
    }
}

impl<J> Inner<J> {
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Arc<Dest<J>>>> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

impl<J: Send + Sync + 'static> Destinations<J> {
    /// Queues a job for `destination` now, or hands it back, as
    /// [`Throttle::try_submit`] does on the destination's own throttle: 503
    /// (`Overloaded`) when the destination's queue or the set's bound is
    /// full, or the set holds its most destinations; `Closed` after
    /// shutdown. The destination is made from the template the first time
    /// it is named.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Reason, Throttle};
    /// let set = Destinations::builder(Throttle::builder().drain_rate(1.0).capacity(100))
    ///     .max_jobs(8)
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// let mut flood = 0;
    /// while set.try_submit("flood", flood).is_ok() {
    ///     flood += 1;
    /// }
    /// assert_eq!(flood, 6, "from 3/4 of the set's bound, only small queues get in");
    /// assert!(set.try_submit("quiet", 1).is_ok());
    /// assert_eq!(set.try_submit("flood", 7).unwrap_err().reason(), Reason::Overloaded);
    /// # Ok(())
    /// # }
    /// ```
    pub fn try_submit<'k>(
        &self,
        destination: &str,
        submission: impl Into<Submission<'k, J>>,
    ) -> Result<Admitted, Rejected<J>> {
        let (job, how) = submission.into().into_parts();
        let (d, job) = self.dest_for(destination, job)?;
        d.try_submit(&self.inner, job, |t, j| t.try_submit(how.with_job(j)))
    }

    /// The record for a job's destination, or the job refused: `Closed`
    /// after shutdown, 503 when the set is full.
    #[allow(clippy::type_complexity)]
    fn dest_for(&self, destination: &str, job: J) -> Result<(Arc<Dest<J>>, J), Rejected<J>> {
        match self.dest(destination) {
            Ok(d) => Ok((d, job)),
            Err(DestinationError::Closed) => Err(Rejected::new(job, Reason::Closed, None, None)),
            Err(_) => Err(Rejected::new(
                job,
                Reason::Overloaded,
                Some(Duration::from_secs(1)),
                None,
            )),
        }
    }

    /// Admits a job for `destination` as [`Throttle::submit`] does on its
    /// throttle: waiting for room, and for the set's journal and key store.
    /// A key is charged in the template's
    /// [`key_store`](ThrottleBuilder::key_store): one store for every
    /// destination, so a tenant's quota holds whichever receivers its
    /// webhooks go to.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let set = Destinations::builder(Throttle::builder().drain_rate(10.0).capacity(1))
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// let start = tokio::time::Instant::now();
    /// for job in 0..4 {
    ///     set.submit("partner", job).await?;
    /// }
    /// assert!(start.elapsed() >= Duration::from_millis(200), "held back to 10/s");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn submit<'k>(
        &self,
        destination: &str,
        submission: impl Into<Submission<'k, J>>,
    ) -> Result<Admitted, Rejected<J>> {
        self.submit_waiting(destination, submission.into(), None)
            .await
    }

    /// Admits a job for `destination` as [`Throttle::submit_timeout`] does
    /// on its throttle: waiting at most `wait` for room (zero: the overflow
    /// policy decides at once), and for the set's journal (an `Ok` survives
    /// a crash: answer a 202 with it) and key store (429 `OverQuota` when
    /// the key is over its quota; a queue that refuses gives the charge
    /// back).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::keyed::{BucketStore, KeyedBuckets, Quota};
    /// use dripfeed::{Delivery, Reason, Submission, Throttle};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// let tenants: Arc<dyn BucketStore> = Arc::new(KeyedBuckets::<String>::new(1000, Quota::per_second(1.0).burst(2.0)?)?);
    /// let set = Destinations::builder(Throttle::builder().drain_rate(100.0).key_store(tenants))
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// let now = Duration::ZERO;
    /// let acme = |job| Submission::new(job).key("acme", 1.0);
    /// set.submit_timeout("a", acme(1), now).await?;
    /// set.submit_timeout("b", acme(2), now).await?;
    /// let refused = set.submit_timeout("c", acme(3), now).await.unwrap_err();
    /// assert_eq!(refused.reason(), Reason::OverQuota, "one quota across destinations");
    /// let globex = Submission::new(4).key("globex", 1.0);
    /// assert!(set.submit_timeout("c", globex, now).await.is_ok());
    /// // Again under an earlier id (a dead letter redriven), for its receiver.
    /// let again = set.submit_timeout("partner", Submission::new(7).again(42), now).await?;
    /// assert_eq!(again.id(), 42);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn submit_timeout<'k>(
        &self,
        destination: &str,
        submission: impl Into<Submission<'k, J>>,
        wait: Duration,
    ) -> Result<Admitted, Rejected<J>> {
        self.submit_waiting(destination, submission.into(), Some(wait))
            .await
    }

    /// [`submit`](Self::submit) (`wait` `None`) or
    /// [`submit_timeout`](Self::submit_timeout).
    async fn submit_waiting(
        &self,
        destination: &str,
        submission: Submission<'_, J>,
        wait: Option<Duration>,
    ) -> Result<Admitted, Rejected<J>> {
        let (job, how) = submission.into_parts();
        let (d, job) = self.dest_for(destination, job)?;
        d.admit_with(&self.inner, job, |t, j| {
            let s = how.with_job(j);
            async move {
                match wait {
                    None => t.submit(s).await,
                    Some(wait) => t.submit_timeout(s, wait).await,
                }
            }
        })
        .await
    }

    /// How long the jobs queued across the set take to drain at their
    /// destinations' current rates (a wait hint for a refusal made outside
    /// the set, such as a byte budget's 503); zero when nothing is queued.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let set = Destinations::builder(Throttle::builder().drain_rate(10.0).capacity(100))
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// for job in 0..20 {
    ///     set.try_submit("a", job)?;
    /// }
    /// let wait = set.retry_after(); // about 20 queued at 10/s, less what already went
    /// assert!(wait > Duration::from_secs(1) && wait <= Duration::from_secs(2));
    /// # Ok(())
    /// # }
    /// ```
    pub fn retry_after(&self) -> Duration {
        let (depth, rate) = self
            .active_stats()
            .iter()
            .fold((0u64, 0.0f64), |(d, r), s| {
                (d + s.depth(), r + s.drain_rate())
            });
        if depth == 0 || rate <= 0.0 {
            return Duration::ZERO;
        }
        Duration::try_from_secs_f64(depth as f64 / rate).unwrap_or(Duration::MAX)
    }

    /// One destination's state and counts, if the set knows it.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Throttle};
    /// let set = Destinations::builder(Throttle::builder().drain_rate(10.0))
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// set.try_submit("a", 1)?;
    /// assert_eq!(set.stats("a").map(|s| s.accepted()), Some(1));
    /// assert!(set.stats("never-seen").is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub fn stats(&self, destination: &str) -> Option<DestinationStats> {
        let d = self.inner.lock().get(destination).cloned()?;
        Some(d.stats(&self.inner))
    }

    /// Every destination the set knows: named ones first (in name order),
    /// then the rest by name.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::{DestinationConfig, Destinations};
    /// use dripfeed::{Delivery, Throttle};
    /// let set = Destinations::builder(Throttle::builder().drain_rate(10.0))
    ///     .destination("z", DestinationConfig::default())
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// set.try_submit("b", 1)?;
    /// set.try_submit("a", 2)?;
    /// let names: Vec<_> = set.all_stats().iter().map(|s| s.name().to_owned()).collect();
    /// assert_eq!(names, ["z", "a", "b"], "named first");
    /// # Ok(())
    /// # }
    /// ```
    pub fn all_stats(&self) -> Vec<DestinationStats> {
        let dests: Vec<_> = self.inner.lock().values().cloned().collect();
        let mut all: Vec<_> = dests.iter().map(|d| d.stats(&self.inner)).collect();
        all.sort_by(|a, b| b.named.cmp(&a.named).then_with(|| a.name.cmp(&b.name)));
        all
    }

    /// The (at most) `k` destinations holding the most jobs (queued,
    /// waiting for a retry or in flight), most first, each with how many:
    /// what to watch among many destinations without a series for each.
    /// One pass over the set, O(n log k); destinations holding none are
    /// left out.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Throttle};
    /// let set = Destinations::builder(Throttle::builder().drain_rate(1.0).capacity(10))
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// for (name, jobs) in [("a", 1), ("b", 3), ("c", 2)] {
    ///     for job in 0..jobs {
    ///         set.try_submit(name, job)?;
    ///     }
    /// }
    /// let top = set.busiest(2);
    /// assert_eq!(top, vec![("b".to_string(), 3), ("c".to_string(), 2)]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn busiest(&self, k: usize) -> Vec<(String, u64)> {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let table = self.inner.lock();
        // At most one entry a destination, whatever `k` asks.
        let room = k.min(table.len()).saturating_add(1);
        let mut top: BinaryHeap<Reverse<(u64, Arc<str>)>> = BinaryHeap::with_capacity(room);
        for d in table.values() {
            let held = d.held();
            if held == 0 || k == 0 {
                continue;
            }
            if top.len() < k {
                top.push(Reverse((held, d.name.clone())));
            } else if top.peek().is_some_and(|Reverse((least, _))| held > *least) {
                top.pop();
                top.push(Reverse((held, d.name.clone())));
            }
        }
        let mut out: Vec<_> = top
            .into_iter()
            .map(|Reverse((held, name))| (name.to_string(), held))
            .collect();
        out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        out
    }

    /// The stats of the destinations with a throttle now (work queued,
    /// waiting or in flight), by name: with many destinations mostly
    /// idle, far less than [`all_stats`](Self::all_stats). Reading them
    /// also has each throttle publish its gauges.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::{DestinationConfig, Destinations};
    /// use dripfeed::{Delivery, Throttle};
    /// let set = Destinations::builder(Throttle::builder().drain_rate(1.0).capacity(10))
    ///     .destination("idle", DestinationConfig::default())
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// set.try_submit("busy", 1)?;
    /// let active: Vec<_> = set.active_stats().into_iter().map(|s| s.name().to_owned()).collect();
    /// assert_eq!(active, ["busy"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn active_stats(&self) -> Vec<DestinationStats> {
        let dests: Vec<_> = self
            .inner
            .lock()
            .values()
            .filter(|d| d.is_active())
            .cloned()
            .collect();
        let mut all: Vec<_> = dests.iter().map(|d| d.stats(&self.inner)).collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    /// Whether the set knows `destination`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Throttle};
    /// let set = Destinations::builder(Throttle::builder().drain_rate(10.0))
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// assert!(!set.contains("a"));
    /// set.try_submit("a", 1)?; // made on first use
    /// assert!(set.contains("a"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn contains(&self, destination: &str) -> bool {
        self.inner.lock().contains_key(destination)
    }

    /// Destinations known.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Throttle};
    /// let set = Destinations::builder(Throttle::builder().drain_rate(10.0))
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// for (name, job) in [("a", 1), ("b", 2), ("a", 3)] {
    ///     set.try_submit(name, job)?;
    /// }
    /// assert_eq!(set.len(), 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn len(&self) -> usize {
        self.inner.lock().len()
    }

    /// Whether no destination is known.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Throttle};
    /// let set = Destinations::builder(Throttle::builder().drain_rate(10.0))
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// assert!(set.is_empty(), "none named, none used yet");
    /// set.try_submit("a", 1)?;
    /// assert!(!set.is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether [`shutdown`](Self::shutdown) has begun: every submission
    /// is refused with [`Reason::Closed`] from then
    /// on, so a caller that admits work in several steps (a record written,
    /// then submitted) can refuse it before its first step.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Throttle};
    /// let set = Destinations::builder(Throttle::builder().drain_rate(10.0).capacity(10))
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// assert!(!set.is_closed());
    /// set.shutdown(Duration::from_secs(1)).await;
    /// assert!(set.is_closed());
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Destinations with a throttle now (work queued, waiting or in flight).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let set = Destinations::builder(Throttle::builder().drain_rate(10.0))
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// set.try_submit("a", 1)?;
    /// assert_eq!(set.active(), 1);
    /// tokio::time::sleep(Duration::from_secs(2)).await; // delivered, then idle for 1 s
    /// assert_eq!((set.active(), set.len()), (0, 1), "known, but holds no throttle");
    /// # Ok(())
    /// # }
    /// ```
    pub fn active(&self) -> usize {
        let dests: Vec<_> = self.inner.lock().values().cloned().collect();
        dests.iter().filter(|d| d.is_active()).count()
    }

    /// Jobs held across the set (queued, waiting for a retry, in flight).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let set = Destinations::builder(Throttle::builder().drain_rate(10.0))
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// set.try_submit("a", 1)?;
    /// set.try_submit("a", 2)?;
    /// set.try_submit("b", 3)?;
    /// assert_eq!(set.held(), 3);
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// assert_eq!(set.held(), 0, "delivered");
    /// # Ok(())
    /// # }
    /// ```
    pub fn held(&self) -> usize {
        self.inner.tally.held()
    }

    /// The set's name (its metrics' `throttle` label, from the template).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Throttle};
    /// let set = Destinations::builder(Throttle::builder().name("webhooks").drain_rate(10.0))
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// assert_eq!(set.name(), "webhooks");
    /// # Ok(())
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Stops admission everywhere, lets every destination drain for up to
    /// `grace`, and waits for them. Returns the final stats of every
    /// destination and the jobs handed back, with their destination.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Reason, Throttle};
    /// use std::time::Duration;
    /// let set = Destinations::builder(Throttle::builder().drain_rate(1.0).capacity(10))
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// for job in 0..3 {
    ///     set.try_submit("a", job)?;
    /// }
    /// let (stats, returned) = set.shutdown(Duration::from_millis(1500)).await;
    /// assert_eq!(stats[0].delivered(), 2);
    /// assert_eq!(returned, vec![("a".to_string(), 2)]);
    /// assert_eq!(set.try_submit("a", 9).unwrap_err().reason(), Reason::Closed);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn shutdown(&self, grace: Duration) -> (Vec<DestinationStats>, Vec<(String, J)>) {
        self.inner.closed.store(true, Ordering::Release);
        let dests: Vec<_> = self.inner.lock().values().cloned().collect();
        let waits = dests.iter().map(|d| d.shutdown(&self.inner, grace));
        let returned = futures_util::future::join_all(waits).await;
        let returned = returned.into_iter().flatten().collect();
        #[cfg(feature = "journal")]
        if let Some(j) = &self.inner.journal {
            j.journal.flush().await; // the members' ends, written and fsynced
        }
        (self.all_stats(), returned)
    }
}
