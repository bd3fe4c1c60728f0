//! One destination's metrics on one relay of a fleet, under the library's
//! series names and the relay's labels (`throttle="webhook_relay"`,
//! `destination`), so one dashboard reads both engines. Each relay counts
//! what it did (its admissions, refusals, deliveries, dead letters and
//! retries): a sum over the relays of a fleet counts each webhook once.
//! Its own depth is what it has claimed and not yet sent; the fleet's
//! depth and bound are series of their own
//! (`dripfeed_relay_fleet_queue_depth`, `dripfeed_relay_fleet_queue_capacity`),
//! the same on every relay: read them with `max()`. The drain rate and the
//! capacity gauges show the destination's (the fleet's) from the start.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use dripfeed::metrics::{
    ADMITTED, DELIVERY, DELIVERY_FAILURES, DRAIN_RATE, EMITTED, IN_FLIGHT, JOBS, OVERFLOW,
    QUEUE_CAPACITY, QUEUE_DEPTH, QUEUE_WAIT, REJECTED, RETRIES,
};
use metrics::{Counter, Gauge, Histogram, Label};

use super::redis::queue::QueueCounts;
use crate::domain::limits::held;
use crate::queue::NAME;
use crate::telemetry::{FLEET_QUEUE_CAPACITY, FLEET_QUEUE_DEPTH, FLEET_RATE_LEADER};

/// Why a webhook was refused, as the library labels it (`reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The fleet's queue was full (tail-drop).
    Overloaded,
    /// Its tenant was over its quota.
    OverQuota,
    /// A store it needs was down (Redis, the quota store).
    StoreDown,
}

/// One destination's counts on this relay: the series it adds to (its
/// own, or `_other`'s with every destination that has none, so an idle
/// destination registers nothing of its own and a scrape stays small
/// however many there are), and what this relay reads of it.
pub(crate) struct Counts {
    series: Arc<Series>,
    /// Whether `series` are its own (labelled with its name).
    own: bool,
    /// Its claimed entries not yet sent, as last added to `depth`.
    depth_now: AtomicU64,
    /// What this relay reads of it, kept when its series change.
    here: Arc<Here>,
}

/// What this relay reads of one destination.
#[derive(Default)]
struct Here {
    in_flight_now: AtomicU64,
    /// Delivered by this relay (for the shutdown's summary).
    delivered_here: AtomicU64,
    /// The fleet's depth and counts as last read from Redis: what its
    /// state shows while Redis cannot be read (the last known, not zero).
    last_depth: AtomicU64,
    last_counts: Mutex<QueueCounts>,
}

/// The handles of one `destination` label: a destination's own, or
/// `_other`'s, which sums those without their own. Gauges that a sum
/// cannot give (the bound, the rate, the fleet's depth, the leader) are
/// a destination's own only.
pub(crate) struct Series {
    admitted: Counter,
    overloaded: Counter,
    over_quota: Counter,
    store_down: Counter,
    refused: Counter,
    /// Overflow of a full queue refusing the arriving webhook, under the
    /// policy in force (head-drop refuses too when every entry is claimed).
    full: Counter,
    head_drop: Counter,
    dead_letter: Counter,
    evicted: Counter,
    delivered: Counter,
    dead_lettered: Counter,
    /// Deliveries scheduled again.
    retries: Counter,
    emitted: Counter,
    /// Attempts that failed.
    failures: Counter,
    /// Each attempt's latency, seconds.
    latency: Histogram,
    /// How long each webhook waited in the fleet's queue before it was
    /// sent, seconds: from the time in its stream id (Redis's clock when
    /// it added the entry; a retry's return) to now on this relay's clock.
    queue_wait: Histogram,
    /// This relay's deliveries running.
    in_flight: Gauge,
    /// What this relay has claimed and not sent yet.
    depth: Gauge,
    shape: Option<Shape>,
}

/// A destination's own gauges.
struct Shape {
    capacity: Gauge,
    rate: Gauge,
    fleet_depth: Gauge,
    fleet_capacity: Gauge,
    leader: Gauge,
}

impl Series {
    /// The handles labelled `destination` = `label` (a destination's own
    /// when `own`, else [`OTHER`](dripfeed::destinations::OTHER)'s), a full
    /// queue doing as `policy` says.
    pub(crate) fn new(label: &str, own: bool, policy: dripfeed::Overflow) -> Series {
        let base = vec![
            Label::new("throttle", NAME),
            Label::new("destination", label.to_owned()),
        ];
        let with = |key: &'static str, value: &'static str| {
            let mut l = base.clone();
            l.push(Label::new(key, value));
            l
        };
        let b = || base.clone();
        let fleet = || vec![Label::new("destination", label.to_owned())];
        Series {
            admitted: metrics::counter!(ADMITTED, b()),
            overloaded: metrics::counter!(REJECTED, with("reason", "overloaded")),
            over_quota: metrics::counter!(REJECTED, with("reason", "over_quota")),
            store_down: metrics::counter!(REJECTED, with("reason", "store_down")),
            refused: metrics::counter!(JOBS, with("outcome", "refused")),
            full: metrics::counter!(
                OVERFLOW,
                with(
                    "policy",
                    match policy {
                        dripfeed::Overflow::HeadDrop => "head_drop",
                        dripfeed::Overflow::DeadLetter => "dead_letter",
                        _ => "tail_drop",
                    }
                )
            ),
            head_drop: metrics::counter!(OVERFLOW, with("policy", "head_drop")),
            dead_letter: metrics::counter!(OVERFLOW, with("policy", "dead_letter")),
            evicted: metrics::counter!(JOBS, with("outcome", "evicted")),
            delivered: metrics::counter!(JOBS, with("outcome", "delivered")),
            dead_lettered: metrics::counter!(JOBS, with("outcome", "dead_lettered")),
            retries: metrics::counter!(RETRIES, b()),
            emitted: metrics::counter!(EMITTED, b()),
            failures: metrics::counter!(DELIVERY_FAILURES, b()),
            latency: metrics::histogram!(DELIVERY, b()),
            queue_wait: metrics::histogram!(QUEUE_WAIT, b()),
            in_flight: metrics::gauge!(IN_FLIGHT, b()),
            depth: metrics::gauge!(QUEUE_DEPTH, b()),
            shape: own.then(|| Shape {
                capacity: metrics::gauge!(QUEUE_CAPACITY, b()),
                rate: metrics::gauge!(DRAIN_RATE, b()),
                fleet_depth: metrics::gauge!(FLEET_QUEUE_DEPTH, fleet()),
                fleet_capacity: metrics::gauge!(FLEET_QUEUE_CAPACITY, fleet()),
                leader: metrics::gauge!(FLEET_RATE_LEADER, fleet()),
            }),
        }
    }
}

impl Counts {
    /// The counts of a destination adding to `series`, its own when `own`.
    pub(crate) fn new(series: Arc<Series>, own: bool) -> Counts {
        Counts {
            series,
            own,
            depth_now: AtomicU64::new(0),
            here: Arc::default(),
        }
    }

    /// Whether its series are its own.
    pub(crate) fn own(&self) -> bool {
        self.own
    }

    /// The same destination adding to `series` instead (its `metrics`
    /// setting changed): what this relay reads of it carries over.
    pub(crate) fn moved_to(&self, series: Arc<Series>, own: bool) -> Counts {
        Counts {
            here: self.here.clone(),
            ..Counts::new(series, own)
        }
    }

    /// The destination's bound and rate (the fleet's), shown from the start.
    pub(crate) fn shape(&self, bound: u64, rate: f64) {
        if let Some(s) = &self.series.shape {
            s.capacity.set(bound as f64);
            s.fleet_capacity.set(bound as f64);
            s.rate.set(rate);
        }
    }

    /// The fleet's adaptive rate in force and the bound it gives with
    /// `budget`, and whether this relay decides the rate.
    pub(crate) fn rate_now(&self, rate: f64, budget: std::time::Duration, leading: bool) {
        self.shape(held(budget, rate) as u64, rate);
        if let Some(s) = &self.series.shape {
            s.leader.set(if leading { 1.0 } else { 0.0 });
        }
    }

    /// The fleet's depth, as last read.
    pub(crate) fn fleet_depth(&self, depth: u64) {
        self.here.last_depth.store(depth, Ordering::Relaxed);
        if let Some(s) = &self.series.shape {
            s.fleet_depth.set(depth as f64);
        }
    }

    /// The fleet's depth and counts: `read` from Redis (kept, and the
    /// depth shown), or where either could not be read, the last known.
    pub(crate) fn fleet_state(
        &self,
        depth: Option<u64>,
        counts: Option<QueueCounts>,
    ) -> (u64, QueueCounts) {
        let depth = match depth {
            Some(depth) => {
                self.fleet_depth(depth);
                depth
            }
            None => self.here.last_depth.load(Ordering::Relaxed),
        };
        let mut last = self
            .here
            .last_counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(counts) = counts {
            *last = counts;
        }
        (depth, *last)
    }

    /// One webhook admitted here.
    pub(crate) fn admitted(&self) {
        self.series.admitted.increment(1);
    }

    /// `n` dead letters admitted again here (a redrive).
    pub(crate) fn readmitted(&self, n: u64) {
        self.series.admitted.increment(n);
    }

    /// One webhook refused here.
    pub(crate) fn refused(&self, why: Refused) {
        self.series.refused.increment(1);
        match why {
            Refused::Overloaded => {
                self.series.overloaded.increment(1);
                self.series.full.increment(1);
            }
            Refused::OverQuota => self.series.over_quota.increment(1),
            Refused::StoreDown => self.series.store_down.increment(1),
        }
    }

    /// The oldest unclaimed webhook evicted by one admitted here
    /// (head-drop): it went to the dead letters.
    pub(crate) fn evicted(&self) {
        self.series.head_drop.increment(1);
        self.series.evicted.increment(1);
    }

    /// One webhook arriving here at a full queue sent to the dead letters
    /// (dead-letter).
    pub(crate) fn overflowed(&self) {
        self.series.dead_letter.increment(1);
        self.series.dead_lettered.increment(1);
    }

    /// One webhook delivered here.
    pub(crate) fn delivered(&self) {
        self.series.delivered.increment(1);
        self.here.delivered_here.fetch_add(1, Ordering::Relaxed);
    }

    /// `n` webhooks dead-lettered here.
    pub(crate) fn dead_lettered(&self, n: u64) {
        self.series.dead_lettered.increment(n);
    }

    /// A delivery starts here.
    pub(crate) fn started(&self) {
        self.series.emitted.increment(1);
        self.series.in_flight.increment(1.0);
        self.here.in_flight_now.fetch_add(1, Ordering::Relaxed);
    }

    /// A delivery ended here.
    pub(crate) fn ended(&self) {
        self.series.in_flight.decrement(1.0);
        self.here.in_flight_now.fetch_sub(1, Ordering::Relaxed);
    }

    /// One attempt took `took`; `failed` if it was not delivered.
    pub(crate) fn attempted(&self, took: std::time::Duration, failed: bool) {
        self.series.latency.record(took.as_secs_f64());
        if failed {
            self.series.failures.increment(1);
        }
    }

    /// One delivery scheduled again.
    pub(crate) fn retried(&self) {
        self.series.retries.increment(1);
    }

    /// One webhook sent `waited` after it entered the fleet's queue.
    pub(crate) fn waited(&self, waited: std::time::Duration) {
        self.series.queue_wait.record(waited.as_secs_f64());
    }

    /// What this relay has claimed of it and not sent yet is `n` (added
    /// as a change, so `_other` sums its destinations).
    pub(crate) fn depth(&self, n: u64) {
        let was = self.depth_now.swap(n, Ordering::Relaxed);
        match n.cmp(&was) {
            std::cmp::Ordering::Greater => self.series.depth.increment((n - was) as f64),
            std::cmp::Ordering::Less => self.series.depth.decrement((was - n) as f64),
            std::cmp::Ordering::Equal => {}
        }
    }

    /// This relay's deliveries running.
    pub(crate) fn in_flight_now(&self) -> u64 {
        self.here.in_flight_now.load(Ordering::Relaxed)
    }

    /// Delivered by this relay since it started.
    pub(crate) fn delivered_here(&self) -> u64 {
        self.here.delivered_here.load(Ordering::Relaxed)
    }
}
