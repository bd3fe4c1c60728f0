//! What a set reports for each destination.

use crate::{Outcome, Stats};

use super::breaker::BreakerState;

/// Counts a destination keeps across the throttles it is given while it has
/// work (it holds none while idle).
#[derive(Debug, Clone, Default)]
pub(crate) struct Totals {
    pub(crate) delivered: u64,
    pub(crate) failed: u64,
    pub(crate) dead_lettered: u64,
    pub(crate) expired: u64,
    pub(crate) evicted: u64,
    pub(crate) kept: u64,
}

impl Totals {
    /// Adds a throttle's final counts.
    pub(crate) fn absorb(&mut self, s: &Stats) {
        self.delivered += s.delivered();
        self.failed += s.outcome(Outcome::Failed);
        self.dead_lettered += s.outcome(Outcome::DeadLettered);
        self.expired += s.outcome(Outcome::Expired);
        self.evicted += s.outcome(Outcome::Evicted);
        self.kept += s.outcome(Outcome::Kept);
    }
}

/// One destination's state and counts.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use dripfeed::destinations::{BreakerState, Destinations};
/// use dripfeed::{Delivery, Throttle};
/// use std::time::Duration;
/// let set = Destinations::builder(Throttle::builder().drain_rate(10.0))
///     .build(|_name: &str| |_: &u32, _| async { Delivery::Done })?;
/// set.try_submit("a", 1)?;
/// tokio::time::sleep(Duration::from_secs(2)).await; // delivered, then idle for 1 s
/// let a = set.stats("a").unwrap();
/// assert_eq!((a.accepted(), a.delivered(), a.depth()), (1, 1, 0));
/// assert_eq!(a.breaker(), BreakerState::Closed);
/// assert!(!a.is_active(), "idle: it holds no throttle");
/// assert_eq!(a.activations(), 1);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct DestinationStats {
    pub(crate) name: String,
    pub(crate) named: bool,
    pub(crate) active: bool,
    pub(crate) depth: u64,
    pub(crate) in_flight: u64,
    pub(crate) held: u64,
    pub(crate) rate: f64,
    pub(crate) capacity: u64,
    pub(crate) accepted: u64,
    pub(crate) refused: u64,
    pub(crate) activations: u64,
    pub(crate) totals: Totals,
    pub(crate) breaker: BreakerState,
    pub(crate) opened: u64,
}

impl DestinationStats {
    /// The destination's name.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Throttle};
    /// let set = Destinations::builder(Throttle::builder().drain_rate(10.0))
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// set.try_submit("api.example", 1)?;
    /// assert_eq!(set.all_stats()[0].name(), "api.example");
    /// # Ok(())
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether it was named in the set's configuration (and has its own metrics series).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::{DestinationConfig, Destinations};
    /// use dripfeed::{Delivery, Throttle};
    /// let set = Destinations::builder(Throttle::builder().drain_rate(10.0))
    ///     .destination("partner", DestinationConfig::default())
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// set.try_submit("someone", 1)?;
    /// assert!(set.stats("partner").unwrap().is_named());
    /// assert!(!set.stats("someone").unwrap().is_named());
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_named(&self) -> bool {
        self.named
    }

    /// Whether it has a throttle now (work queued, waiting or in flight).
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
    /// assert!(set.stats("a").unwrap().is_active());
    /// tokio::time::sleep(Duration::from_secs(2)).await; // delivered, then idle for 1 s
    /// assert!(!set.stats("a").unwrap().is_active());
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// Jobs queued.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let set = Destinations::builder(Throttle::builder().drain_rate(1.0).capacity(10))
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// for job in 0..3 {
    ///     set.try_submit("a", job)?;
    /// }
    /// tokio::time::sleep(Duration::from_millis(500)).await;
    /// assert_eq!(set.stats("a").unwrap().depth(), 2, "one went at once");
    /// # Ok(())
    /// # }
    /// ```
    pub fn depth(&self) -> u64 {
        self.depth
    }

    /// Deliveries running.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let set = Destinations::builder(Throttle::builder().drain_rate(100.0).max_in_flight(2))
    ///     .build(|_: &str| |_: &u32, _| std::future::pending::<Delivery>())?; // hangs
    /// for job in 0..3 {
    ///     set.try_submit("a", job)?;
    /// }
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// let a = set.stats("a").unwrap();
    /// assert_eq!((a.in_flight(), a.depth()), (2, 1));
    /// # Ok(())
    /// # }
    /// ```
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// Jobs held against the set's bound: queued, waiting for a retry, in flight.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let set = Destinations::builder(Throttle::builder().drain_rate(100.0).max_in_flight(1))
    ///     .build(|_: &str| |_: &u32, _| std::future::pending::<Delivery>())?; // hangs
    /// for job in 0..3 {
    ///     set.try_submit("a", job)?;
    /// }
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// let a = set.stats("a").unwrap();
    /// assert_eq!((a.held(), a.in_flight(), a.depth()), (3, 1, 2));
    /// # Ok(())
    /// # }
    /// ```
    pub fn held(&self) -> u64 {
        self.held
    }

    /// The drain rate now, or the rate it will start at when next active.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::{DestinationConfig, Destinations};
    /// use dripfeed::{Delivery, Throttle};
    /// let set = Destinations::builder(Throttle::builder().drain_rate(10.0))
    ///     .destination("slow", DestinationConfig::default().rate(2.0))
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// set.try_submit("other", 1)?;
    /// assert_eq!(set.stats("slow").unwrap().drain_rate(), 2.0, "idle: the rate it will start at");
    /// assert_eq!(set.stats("other").unwrap().drain_rate(), 10.0, "the template's");
    /// # Ok(())
    /// # }
    /// ```
    pub fn drain_rate(&self) -> f64 {
        self.rate
    }

    /// The admission bound now; while idle, the bound it would start with
    /// (its budget × the rate it would start at).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::{DestinationConfig, Destinations};
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let config = DestinationConfig::default().rate(5.0).budget(Duration::from_secs(2));
    /// let set = Destinations::builder(Throttle::builder().drain_rate(10.0))
    ///     .destination("partner", config)
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// assert_eq!(set.stats("partner").unwrap().capacity(), 10, "idle: 2 s × 5/s");
    /// # Ok(())
    /// # }
    /// ```
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Jobs accepted.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Throttle};
    /// let set = Destinations::builder(Throttle::builder().drain_rate(1.0).capacity(2))
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// for job in 0..3 {
    ///     let _ = set.try_submit("a", job); // the third finds the queue full
    /// }
    /// assert_eq!(set.stats("a").unwrap().accepted(), 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn accepted(&self) -> u64 {
        self.accepted
    }

    /// Jobs refused (its queue full, the set's bound, or closed).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Throttle};
    /// let set = Destinations::builder(Throttle::builder().drain_rate(1.0).capacity(2))
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// for job in 0..3 {
    ///     let _ = set.try_submit("a", job); // the third finds the queue full
    /// }
    /// assert_eq!(set.stats("a").unwrap().refused(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Jobs delivered.
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
    /// tokio::time::sleep(Duration::from_secs(5)).await; // idle since: kept in its record
    /// assert_eq!(set.stats("a").unwrap().delivered(), 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn delivered(&self) -> u64 {
        self.totals.delivered
    }

    /// Jobs whose delivery failed for good (not taken by a dead-letter sink).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let set = Destinations::builder(Throttle::builder().drain_rate(10.0))
    ///     .build(|_: &str| |job: &u32, _| {
    ///         let answer = if *job == 2 { Delivery::Failed } else { Delivery::Done };
    ///         async move { answer }
    ///     })?;
    /// for job in 1..=3 {
    ///     set.try_submit("a", job)?;
    /// }
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// let a = set.stats("a").unwrap();
    /// assert_eq!((a.delivered(), a.failed()), (2, 1));
    /// # Ok(())
    /// # }
    /// ```
    pub fn failed(&self) -> u64 {
        self.totals.failed
    }

    /// Jobs handed to the dead-letter sink.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{ChannelSink, Delivery, Throttle};
    /// use std::time::Duration;
    /// let (sink, mut letters) = ChannelSink::new(10)?;
    /// let set = Destinations::builder(Throttle::builder().drain_rate(10.0).dead_letter(sink))
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Failed })?;
    /// set.try_submit("a", 7)?;
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// let a = set.stats("a").unwrap();
    /// assert_eq!((a.dead_lettered(), a.failed()), (1, 0), "the sink took it");
    /// assert_eq!(letters.recv().await.unwrap().job, 7);
    /// # Ok(())
    /// # }
    /// ```
    pub fn dead_lettered(&self) -> u64 {
        self.totals.dead_lettered
    }

    /// Jobs that expired in the queue.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let template = Throttle::builder()
    ///     .drain_rate(1.0)
    ///     .capacity(10)
    ///     .max_queue_wait(Duration::from_millis(500));
    /// let set = Destinations::builder(template)
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// set.try_submit("a", 1)?; // out at once
    /// set.try_submit("a", 2)?; // its turn at 1 s: too late
    /// tokio::time::sleep(Duration::from_secs(2)).await;
    /// assert_eq!(set.stats("a").unwrap().expired(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn expired(&self) -> u64 {
        self.totals.expired
    }

    /// Jobs evicted by head-drop.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Overflow, Throttle};
    /// let template = Throttle::builder().drain_rate(1.0).capacity(1).overflow(Overflow::HeadDrop);
    /// let set = Destinations::builder(template)
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// set.try_submit("a", 1)?;
    /// set.try_submit("a", 2)?; // takes the place of the first
    /// assert_eq!(set.stats("a").unwrap().evicted(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn evicted(&self) -> u64 {
        self.totals.evicted
    }

    /// Throttles made for it so far: one each time it became active after
    /// being idle (its ring, task and metrics handles are made then).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let set = Destinations::builder(Throttle::builder().drain_rate(10.0))
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// for job in 0..2 {
    ///     set.try_submit("a", job)?;
    ///     tokio::time::sleep(Duration::from_secs(2)).await; // delivered, then idle
    /// }
    /// assert_eq!(set.stats("a").unwrap().activations(), 2, "a throttle per spell of work");
    /// # Ok(())
    /// # }
    /// ```
    pub fn activations(&self) -> u64 {
        self.activations
    }

    /// Jobs left in the set's journal at shutdown for the next start.
    ///
    /// ```
    /// # #[cfg(feature = "journal")]
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::Destinations;
    /// use dripfeed::journal::Journal;
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let dir = std::env::temp_dir().join(format!("dripfeed-doc-kept-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let set = Destinations::builder(Throttle::builder().drain_rate(1.0).capacity(10))
    ///     .journal(Journal::open(&dir)?)
    ///     .build(|_: &str| |_: &String, _| async { Delivery::Done })?;
    /// for job in ["a", "b", "c"] {
    ///     set.try_submit("partner", job.to_string())?;
    /// }
    /// let (stats, _) = set.shutdown(Duration::ZERO).await;
    /// assert_eq!((stats[0].delivered(), stats[0].kept()), (0, 3), "left for the next start");
    /// # drop(set);
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok(())
    /// # }
    /// # #[cfg(not(feature = "journal"))]
    /// # fn main() {}
    /// ```
    pub fn kept(&self) -> u64 {
        self.totals.kept
    }

    /// The breaker's state.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::{BreakerConfig, BreakerState, Destinations};
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let set = Destinations::builder(Throttle::builder().drain_rate(100.0))
    ///     .breaker(BreakerConfig::default().trip_after(1))
    ///     .build(|name: &str| {
    ///         let up = name == "up";
    ///         move |_: &u32, _| async move { if up { Delivery::Done } else { Delivery::Failed } }
    ///     })?;
    /// set.try_submit("up", 1)?;
    /// set.try_submit("down", 2)?;
    /// tokio::time::sleep(Duration::from_millis(100)).await;
    /// assert_eq!(set.stats("up").unwrap().breaker(), BreakerState::Closed);
    /// assert_eq!(set.stats("down").unwrap().breaker(), BreakerState::Open);
    /// # Ok(())
    /// # }
    /// ```
    pub fn breaker(&self) -> BreakerState {
        self.breaker
    }

    /// Times its breaker opened.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::{BreakerConfig, Destinations};
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let breaker = BreakerConfig::default().trip_after(1).cool_down(Duration::from_secs(1), Duration::from_secs(1));
    /// let set = Destinations::builder(Throttle::builder().drain_rate(100.0))
    ///     .breaker(breaker)
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Failed })?;
    /// for job in 0..3 {
    ///     set.try_submit("down", job)?;
    /// }
    /// // Opens at once; after 1 s a probe fails and it opens again.
    /// tokio::time::sleep(Duration::from_millis(1500)).await;
    /// assert_eq!(set.stats("down").unwrap().breaker_opened(), 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn breaker_opened(&self) -> u64 {
        self.opened
    }
}
