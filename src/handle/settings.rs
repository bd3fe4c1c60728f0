//! [`Settings`]: what a [`ThrottleBuilder`](crate::ThrottleBuilder) was
//! told, read back, for code that makes throttles from a template (as the
//! `destinations` set does).

use std::time::Duration;

use crate::rate::AimdConfig;

/// A builder's settings, from
/// [`ThrottleBuilder::settings`](crate::ThrottleBuilder::settings).
///
/// ```
/// use dripfeed::Throttle;
/// use dripfeed::rate::AimdConfig;
/// let aimd = AimdConfig::default().with_floor(10.0).with_ceiling(50.0).build().unwrap();
/// let s = Throttle::<u32>::builder().name("api").adaptive(aimd).settings();
/// assert_eq!(s.name, "api");
/// assert_eq!(s.drain_rate, None, "adaptive: starts at the floor");
/// assert_eq!(s.adaptive.map(|a| (a.floor(), a.ceiling())), Some((10.0, 50.0)));
/// assert!(!s.per_key && !s.journal);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Settings {
    /// The `throttle` label.
    pub name: String,
    /// The drain rate given, if one was.
    pub drain_rate: Option<f64>,
    /// The highest rate given, if one was.
    pub max_rate: Option<f64>,
    /// The adaptive controller's settings, when adaptive.
    pub adaptive: Option<AimdConfig>,
    /// The latency budget the admission bound follows (1 s unless given);
    /// `None` with a fixed capacity.
    pub latency_budget: Option<Duration>,
    /// The fixed capacity, if one was given.
    pub capacity: Option<usize>,
    /// Deliveries at once (its own cap, inside a shared budget if any).
    pub max_in_flight: usize,
    /// Whether it has an in-memory per-key table (`per_key`).
    pub per_key: bool,
    /// Whether it has a per-key store (`key_store`).
    pub key_store: bool,
    /// Whether it takes fleet permits (`permits`).
    pub permits: bool,
    /// Whether it has a journal (`journal` or `shared_journal`).
    pub journal: bool,
    /// The labels added to its metrics (`metric_label`).
    pub labels: Vec<(String, String)>,
}
