//! Every metric name, described once.
//!
//! Each throttle registers its handles when it is built, labelled
//! `throttle = <name>`; nothing is ever labelled by key. Gauges are published
//! by the drain on its wakes, not written by producers, and
//! `leaky_bucket_admitted_total` is derived by the drain (jobs that left the
//! ring plus those in it), so the admission path touches no metric at all.
//! Refusals are counted per producer thread and published with the gauges,
//! when `stats()` is read, and after close.
//!
//! Install any `metrics` recorder (e.g. `metrics-exporter-prometheus`)
//! *before* building a throttle: handles bind to the recorder present at
//! build time.

use metrics::{
    Counter, Gauge, Histogram, Label, Unit, counter, describe_counter, describe_gauge,
    describe_histogram, gauge, histogram,
};

use crate::accounting::outcome::Outcome;
use crate::admission::overflow::Overflow;
use crate::admission::reason::Reason;

/// Jobs waiting in the ring (gauge).
pub const QUEUE_DEPTH: &str = "leaky_bucket_queue_depth";
/// The current admission bound (gauge).
pub const QUEUE_CAPACITY: &str = "leaky_bucket_queue_capacity";
/// The current drain rate, jobs per second (gauge).
pub const DRAIN_RATE: &str = "leaky_bucket_drain_rate";
/// Jobs admitted into the ring (counter).
pub const ADMITTED: &str = "leaky_bucket_admitted_total";
/// Terminal outcomes, label `outcome` (counter).
pub const JOBS: &str = "leaky_bucket_jobs_total";
/// Deliveries running (gauge).
pub const IN_FLIGHT: &str = "leaky_bucket_in_flight";
/// Time from admission to emission, seconds (histogram).
pub const QUEUE_WAIT: &str = "leaky_bucket_queue_wait_seconds";
/// Jobs handed to the downstream (counter).
pub const EMITTED: &str = "leaky_bucket_emitted_total";
/// Overflow events, label `policy` (counter).
pub const OVERFLOW: &str = "leaky_bucket_overflow_total";
/// Refusals, label `reason` (counter).
pub const REJECTED: &str = "leaky_bucket_rejected_total";
/// Jobs past their deadline (counter).
pub const EXPIRED: &str = "leaky_bucket_expired_total";
/// Downstream latency, seconds (histogram).
pub const DELIVERY: &str = "leaky_bucket_delivery_seconds";
/// Failed deliveries (counter).
pub const DELIVERY_FAILURES: &str = "leaky_bucket_delivery_failures_total";
/// Live per-key buckets (gauge).
pub const KEYED_BUCKETS: &str = "leaky_bucket_keyed_buckets";
/// Buckets evicted from a full table (counter).
pub const KEYED_EVICTIONS: &str = "leaky_bucket_keyed_evictions_total";
/// Deliveries to be tried again: each one that asked for a retry and got
/// one (counter).
pub const RETRIES: &str = "leaky_bucket_retries_total";
/// Jobs waiting outside the ring for another attempt (gauge).
pub const RETRY_WAIT: &str = "leaky_bucket_retry_wait";
/// Failed calls to the fleet's shared store, e.g. Redis (counter).
pub const GLOBAL_ERRORS: &str = "leaky_bucket_global_errors_total";
/// Redis round trips by `purpose` (`queue_admit`, `queue_claim`,
/// `queue_ack`, `queue_retry`, `queue_upkeep`, `queue_wait`,
/// `queue_status`, `queue_dead_letters`, `permits`, `quota`,
/// `dead_letters`, and the relay's `destinations`: its fleet's destination
/// changes), unlabelled otherwise (counter).
pub const REDIS_ROUND_TRIPS: &str = "dripfeed_redis_round_trips_total";
/// 1 while the fleet limit is unreachable and the configured failure mode
/// applies (fail-open local share or fail-closed pause), else 0 (gauge).
pub const GLOBAL_FALLBACK: &str = "leaky_bucket_global_fallback";
/// Jobs found unfinished in the journal at start and queued again, ahead
/// of new ones (counter).
pub const RECOVERED: &str = "leaky_bucket_recovered_total";
/// Bytes in the journal's segment files (gauge, unlabelled: one per journal
/// directory, and a process has one).
pub const JOURNAL_BYTES: &str = "leaky_bucket_journal_bytes";
/// Records lost in damaged regions of journal segments found at open: the
/// records after each region are kept and the damaged segment is set aside
/// (counter, unlabelled like the journal's bytes).
pub const JOURNAL_SKIPPED: &str = "leaky_bucket_journal_skipped_records_total";
/// The journal's `fsync`s of records: its group commits (one per batch that
/// holds a durable admission or a flush), the copies compaction makes and
/// the rewrite of coming back after a failure; not those of a new segment,
/// a roll or a directory (counter, unlabelled like the journal's bytes).
/// The same count as `JournalStats::fsyncs`.
pub const JOURNAL_SYNCS: &str = "leaky_bucket_journal_syncs_total";

/// Destinations whose circuit breaker is not closed (open or probing),
/// label `destination` (gauge; unnamed destinations are summed under
/// `destination="_other"`).
pub const BREAKER_OPEN: &str = "leaky_bucket_breaker_open";
/// Times a destination's breaker opened, label `destination` (counter).
pub const BREAKER_OPENED: &str = "leaky_bucket_breaker_opened_total";
/// Destinations a set knows, and of them those with a throttle (work
/// queued or in flight), label `state` = `known` or `active` (gauge).
pub const DESTINATIONS: &str = "leaky_bucket_destinations";

/// Describes every metric to the installed recorder. Building a throttle
/// calls it; call it yourself if you install a recorder later.
///
/// ```
/// dripfeed::metrics::describe(); // a no-op without a recorder
/// assert_eq!(dripfeed::metrics::QUEUE_DEPTH, "leaky_bucket_queue_depth");
/// ```
pub fn describe() {
    describe_gauge!(QUEUE_DEPTH, Unit::Count, "Jobs waiting in the ring.");
    describe_gauge!(QUEUE_CAPACITY, Unit::Count, "Current admission bound.");
    describe_gauge!(DRAIN_RATE, "Current drain rate, jobs per second.");
    describe_counter!(ADMITTED, Unit::Count, "Jobs admitted into the ring.");
    describe_counter!(JOBS, Unit::Count, "Jobs by terminal outcome.");
    describe_gauge!(IN_FLIGHT, Unit::Count, "Deliveries running.");
    describe_histogram!(
        QUEUE_WAIT,
        Unit::Seconds,
        "Time from admission to emission."
    );
    describe_counter!(EMITTED, Unit::Count, "Jobs handed to the downstream.");
    describe_counter!(OVERFLOW, Unit::Count, "Overflow events by policy.");
    describe_counter!(REJECTED, Unit::Count, "Refused submissions by reason.");
    describe_counter!(EXPIRED, Unit::Count, "Jobs found past their deadline.");
    describe_histogram!(DELIVERY, Unit::Seconds, "Downstream delivery latency.");
    describe_counter!(DELIVERY_FAILURES, Unit::Count, "Failed deliveries.");
    describe_counter!(
        RETRIES,
        Unit::Count,
        "Deliveries scheduled for another attempt."
    );
    describe_gauge!(
        RETRY_WAIT,
        Unit::Count,
        "Jobs waiting outside the ring for another attempt."
    );
    describe_gauge!(KEYED_BUCKETS, Unit::Count, "Live per-key buckets.");
    describe_counter!(
        KEYED_EVICTIONS,
        Unit::Count,
        "Per-key buckets evicted from a full table."
    );
    describe_counter!(
        GLOBAL_ERRORS,
        Unit::Count,
        "Failed calls to the fleet's shared store."
    );
    describe_counter!(
        REDIS_ROUND_TRIPS,
        Unit::Count,
        "Redis round trips by what they were for."
    );
    describe_gauge!(
        GLOBAL_FALLBACK,
        "1 while the fleet limit is unreachable and the failure mode applies."
    );
    describe_counter!(
        RECOVERED,
        Unit::Count,
        "Jobs recovered from the journal at start."
    );
    describe_gauge!(
        BREAKER_OPEN,
        Unit::Count,
        "Destinations whose circuit breaker is open or probing."
    );
    describe_counter!(
        BREAKER_OPENED,
        Unit::Count,
        "Times a destination's circuit breaker opened."
    );
    describe_gauge!(
        DESTINATIONS,
        Unit::Count,
        "Destinations known to a set, and those active."
    );
    describe_gauge!(
        JOURNAL_BYTES,
        Unit::Bytes,
        "Bytes in the journal's segment files."
    );
    describe_counter!(
        JOURNAL_SKIPPED,
        Unit::Count,
        "Journal records lost in damaged segment regions at open."
    );
    describe_counter!(
        JOURNAL_SYNCS,
        Unit::Count,
        "The journal's fsyncs (group commits)."
    );
}

/// One throttle's pre-registered handles.
pub(crate) struct Metrics {
    pub(crate) depth: Gauge,
    pub(crate) capacity: Gauge,
    pub(crate) rate: Gauge,
    pub(crate) in_flight: Gauge,
    pub(crate) admitted: Counter,
    pub(crate) emitted: Counter,
    pub(crate) jobs: [Counter; 9],
    pub(crate) overflow: [Counter; 3],
    /// The fixed reasons' counters; an unavailable cause gets its own when first published.
    pub(crate) rejected: Vec<(Reason, Counter)>,
    /// The labels every handle carries.
    base: Vec<Label>,
    pub(crate) expired: Counter,
    pub(crate) queue_wait: Histogram,
    pub(crate) delivery: Histogram,
    pub(crate) delivery_failures: Counter,
    pub(crate) keyed_buckets: Gauge,
    pub(crate) keyed_evictions: Counter,
    pub(crate) retries: Counter,
    pub(crate) retry_wait: Gauge,
}

/// [`describe`], once per recorder: each throttle and destination record
/// calls it, and a recorder keeps every description it is given (the
/// Prometheus exporter appends each to a log), so describing again for
/// each of 100,000 destinations would cost memory for nothing.
pub(crate) fn describe_once() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static DESCRIBED: AtomicUsize = AtomicUsize::new(0);
    // The recorder in force, by address: one installed later is described too.
    let at = metrics::with_recorder(|r| std::ptr::from_ref(r).cast::<()>() as usize);
    if DESCRIBED.swap(at, Ordering::Relaxed) != at {
        describe();
    }
}

/// The capacity and drain-rate gauges of the series `throttle = name`
/// with `labels`: the ones a throttle of that series publishes, for a
/// destination set to show an idle named destination's bound and rate
/// while it has no throttle.
pub(crate) fn resting(name: &str, labels: &[(String, String)]) -> (Gauge, Gauge) {
    describe_once();
    let mut base = vec![Label::new("throttle", name.to_owned())];
    base.extend(labels.iter().map(|(k, v)| Label::new(k.clone(), v.clone())));
    (
        gauge!(QUEUE_CAPACITY, base.clone()),
        gauge!(DRAIN_RATE, base),
    )
}

impl Metrics {
    /// Handles labelled `throttle = name` and the builder's `labels`.
    pub(crate) fn register(name: &str, labels: &[(String, String)]) -> Self {
        describe_once();
        let mut base = vec![Label::new("throttle", name.to_owned())];
        base.extend(labels.iter().map(|(k, v)| Label::new(k.clone(), v.clone())));
        let with = |key: &'static str, value: &'static str| {
            let mut labels = base.clone();
            labels.push(Label::new(key, value));
            labels
        };
        let b = || base.clone();
        Metrics {
            depth: gauge!(QUEUE_DEPTH, b()),
            capacity: gauge!(QUEUE_CAPACITY, b()),
            rate: gauge!(DRAIN_RATE, b()),
            in_flight: gauge!(IN_FLIGHT, b()),
            admitted: counter!(ADMITTED, b()),
            emitted: counter!(EMITTED, b()),
            jobs: Outcome::ALL.map(|o| counter!(JOBS, with("outcome", o.as_str()))),
            overflow: Overflow::ALL.map(|p| counter!(OVERFLOW, with("policy", p.as_str()))),
            rejected: [
                Reason::Overloaded,
                Reason::OverQuota,
                Reason::Closed,
                Reason::Invalid,
            ]
            .into_iter()
            .map(|r| (r, counter!(REJECTED, with("reason", r.as_str()))))
            .collect(),
            expired: counter!(EXPIRED, b()),
            queue_wait: histogram!(QUEUE_WAIT, b()),
            delivery: histogram!(DELIVERY, b()),
            delivery_failures: counter!(DELIVERY_FAILURES, b()),
            keyed_buckets: gauge!(KEYED_BUCKETS, b()),
            keyed_evictions: counter!(KEYED_EVICTIONS, b()),
            retries: counter!(RETRIES, b()),
            retry_wait: gauge!(RETRY_WAIT, b()),
            base,
        }
    }

    /// The refusal counter for `reason`.
    pub(crate) fn rejected(&self, reason: Reason) -> Counter {
        match self.rejected.iter().find(|(r, _)| *r == reason) {
            Some((_, c)) => c.clone(),
            None => {
                let mut labels = self.base.clone();
                labels.push(Label::new("reason", reason.as_str()));
                counter!(REJECTED, labels)
            }
        }
    }
}
