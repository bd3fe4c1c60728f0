//! The ledger: every count a throttle keeps, recorded into its counters and
//! its metrics by one call per event, so the two cannot drift apart.
//!
//! Producers touch the ledger only when they refuse (see [`Refusals`]);
//! gauges and the derived counters (admitted, refused) are published by the
//! drain on its wakes, when `stats()` is read, and after close.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::accounting::metrics::Metrics;
use crate::accounting::outcome::{Outcome, Stats};
use crate::accounting::refusals::Refusals;
use crate::admission::overflow::Overflow;
use crate::admission::reason::Reason;

/// Something that happened to a job.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Event {
    /// Job `id` reached its terminal outcome.
    Finished(u64, Outcome),
    /// It was handed to the downstream; a first attempt carries its time in
    /// the queue. Recorded by the drain task only (its one writer).
    Emitted { waited: Option<Duration> },
    /// One attempt ended after `latency`.
    Attempted { latency: Duration, failed: bool },
    /// Its attempt is fully accounted (outcome or retry recorded): no longer in flight.
    Landed,
    /// It was found past its deadline.
    Expired,
    /// It was scheduled for another attempt.
    Retried,
}

/// A counted refusal.
pub(crate) struct Refused {
    /// Unique among this reason's refusals: a seed for the refusal's jitter.
    pub(crate) nth: u64,
    /// The first since the last publish: wake the drain to publish it.
    pub(crate) first: bool,
}

/// The state the gauges show, read by whoever publishes.
pub(crate) struct Gauges {
    pub(crate) depth: usize,
    pub(crate) bound: usize,
    pub(crate) capacity: usize,
    pub(crate) ring_capacity: usize,
    pub(crate) rate: f64,
    pub(crate) admitted: u64,
    pub(crate) retry_wait: u64,
    pub(crate) paused: bool,
    pub(crate) closed: bool,
    /// Live buckets and evictions of the per-key table, if any.
    pub(crate) keyed: Option<(usize, u64)>,
}

pub(crate) struct Ledger {
    name: String,
    /// The throttle's overflow policy. Under tail-drop every overflow
    /// event is an `Overloaded` refusal, so its count is read from those
    /// and the refusal path bumps one counter, not two.
    policy: Overflow,
    outcomes: [AtomicU64; 9],
    /// Written by the drain task alone (the only one that emits), so
    /// counted without a read-modify-write.
    emitted: AtomicU64,
    /// Attempts accounted: in flight is `emitted - landed`, one count per
    /// job instead of an increment and a decrement.
    landed: AtomicU64,
    /// Deliveries run in the drain task (`Dispatch::Inline`): `landed` and
    /// the delivered outcome have one writer, and are counted without a
    /// read-modify-write. Otherwise each spawned delivery counts its own.
    inline: bool,
    expired: AtomicU64,
    delivery_failures: AtomicU64,
    retried: AtomicU64,
    refusals: Refusals,
    /// A refusal was counted since the last publish.
    unpublished: AtomicBool,
    /// Inside an overflow episode (for its start and end events).
    overflowing: AtomicBool,
    metrics: Metrics,
    /// A summed series (other throttles may publish into it, at once or
    /// after this one): published as increments from what this throttle
    /// published last.
    shared_series: Option<Mutex<Published>>,
    /// Told of each terminal outcome (the drain hook's `job_ended`).
    on_end: Option<OnEnd>,
}

/// What the ledger tells of each terminal outcome.
pub(crate) type OnEnd = Box<dyn Fn(u64, Outcome) + Send + Sync>;

/// What a throttle with a shared series published last.
#[derive(Default)]
struct Published {
    depth: f64,
    capacity: f64,
    rate: f64,
    in_flight: f64,
    retry_wait: f64,
    admitted: u64,
    rejected: Vec<(Reason, u64)>,
    refused: u64,
    overflow: [u64; 3],
}

/// Moves a gauge by what changed since `last`.
fn gauge_to(g: &metrics::Gauge, last: &mut f64, now: f64) {
    if now != *last {
        g.increment(now - *last);
        *last = now;
    }
}

/// Moves a counter by what was added since `last`.
fn counter_to(c: &metrics::Counter, last: &mut u64, now: u64) {
    if now > *last {
        c.increment(now - *last);
        *last = now;
    }
}

fn bump(a: &AtomicU64) {
    a.fetch_add(1, Ordering::Relaxed);
}

/// Counts one more in a counter only the calling task writes (the drain,
/// and the deliveries it polls): a plain store of the next value, where
/// [`bump`]'s read-modify-write would cost an atomic operation. Readers on
/// other threads see every count, at most a little late; stored with
/// `Release` (a plain store on x86 and the like), so a reader that
/// acquires the count sees what the writer did before it.
fn bump_one_writer(a: &AtomicU64) {
    a.store(a.load(Ordering::Relaxed) + 1, Ordering::Release);
}

fn load(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

impl Ledger {
    /// A ledger whose metrics carry `labels` beside `throttle = name`,
    /// published as increments when `summed`, telling `on_end` of each
    /// terminal outcome.
    pub(crate) fn new(
        name: &str,
        policy: Overflow,
        labels: &[(String, String)],
        summed: bool,
        on_end: Option<OnEnd>,
        inline: bool,
    ) -> Self {
        Ledger {
            name: name.to_owned(),
            policy,
            outcomes: Default::default(),
            emitted: AtomicU64::new(0),
            landed: AtomicU64::new(0),
            inline,
            expired: AtomicU64::new(0),
            delivery_failures: AtomicU64::new(0),
            retried: AtomicU64::new(0),
            refusals: Refusals::new(),
            unpublished: AtomicBool::new(false),
            overflowing: AtomicBool::new(false),
            metrics: Metrics::register(name, labels),
            shared_series: summed.then(|| Mutex::new(Published::default())),
            on_end,
        }
    }

    /// Records `event` in the counters and the metrics.
    #[inline]
    pub(crate) fn record(&self, event: Event) {
        let m = &self.metrics;
        match event {
            Event::Finished(_, Outcome::Refused) => {} // counted by reason, see `refused`
            Event::Finished(id, outcome) => {
                let count = &self.outcomes[outcome.index()];
                match outcome {
                    Outcome::Delivered if self.inline => bump_one_writer(count),
                    _ => bump(count),
                }
                m.jobs[outcome.index()].increment(1);
                if let Some(on_end) = &self.on_end {
                    on_end(id, outcome);
                }
            }
            Event::Emitted { waited } => {
                bump_one_writer(&self.emitted);
                m.emitted.increment(1);
                if let Some(waited) = waited {
                    m.queue_wait.record(waited.as_secs_f64());
                }
            }
            Event::Attempted { latency, failed } => {
                m.delivery.record(latency.as_secs_f64());
                if failed {
                    bump(&self.delivery_failures);
                    m.delivery_failures.increment(1);
                }
            }
            // Released: a reader that sees a landing sees its emission.
            Event::Landed if self.inline => bump_one_writer(&self.landed),
            Event::Landed => {
                self.landed.fetch_add(1, Ordering::Release);
            }
            Event::Expired => {
                bump(&self.expired);
                m.expired.increment(1);
            }
            Event::Retried => {
                bump(&self.retried);
                m.retries.increment(1);
            }
        }
    }

    /// Counts a refusal (producer-local).
    #[inline]
    pub(crate) fn refused(&self, reason: Reason) -> Refused {
        let nth = self.refusals.refused(reason);
        let first = !self.unpublished.load(Ordering::Relaxed)
            && !self.unpublished.swap(true, Ordering::Relaxed);
        Refused { nth, first }
    }

    /// Counts an overflow event; traces the start of an overflow episode.
    #[inline]
    pub(crate) fn overflowed(&self, policy: Overflow, depth: usize) {
        if policy != Overflow::TailDrop {
            self.refusals.overflowed(policy);
        }
        if !self.overflowing.load(Ordering::Relaxed) {
            self.overflow_started(policy, depth);
        }
    }

    /// Overflow events by policy, indexed like [`Overflow::ALL`].
    fn overflow_counts(&self, rejected: &[(Reason, u64)]) -> [u64; 3] {
        let mut counts = self.refusals.overflow();
        if self.policy == Overflow::TailDrop {
            counts[Overflow::TailDrop.index()] = rejected
                .iter()
                .find(|(r, _)| *r == Reason::Overloaded)
                .map_or(0, |(_, n)| *n);
        }
        counts
    }

    #[cold]
    fn overflow_started(&self, policy: Overflow, depth: usize) {
        if !self.overflowing.swap(true, Ordering::Relaxed) {
            tracing::warn!(throttle = %self.name, policy = policy.as_str(), depth, "overflow started");
        }
    }

    /// Ends an overflow episode once the queue has room again (called by
    /// the drain when it is down to three quarters of its bound).
    pub(crate) fn room_again(&self) {
        if self.overflowing.load(Ordering::Relaxed)
            && self.overflowing.swap(false, Ordering::Relaxed)
        {
            let total: u64 = self.read_refusals().1.iter().sum();
            tracing::info!(throttle = %self.name, overflow_total = total, "overflow ended");
        }
    }

    /// Deliveries running.
    pub(crate) fn in_flight(&self) -> u64 {
        // Landed first (acquired: every attempt it counts was emitted
        // before), then emitted, then landed again: when no attempt landed
        // in between, the difference is exact at the reading of emitted (a
        // reader held up between two loads would otherwise count every
        // emission meanwhile as in flight). A few tries while deliveries
        // land; then the last reading.
        let mut landed = self.landed.load(Ordering::Acquire);
        for _ in 0..8 {
            let emitted = self.emitted.load(Ordering::Relaxed);
            let again = self.landed.load(Ordering::Acquire);
            if again == landed {
                return emitted.saturating_sub(landed);
            }
            landed = again;
        }
        self.emitted.load(Ordering::Relaxed).saturating_sub(landed)
    }

    /// Refusals by reason and overflow events by policy, read once.
    fn read_refusals(&self) -> (Vec<(Reason, u64)>, [u64; 3]) {
        let rejected = self.refusals.rejected();
        let overflow = self.overflow_counts(&rejected);
        (rejected, overflow)
    }

    /// Publishes the gauges and every counter derived at read time.
    pub(crate) fn publish(&self, g: &Gauges) {
        self.publish_gauges(g);
        self.publish_refusals();
    }

    /// Publishes the refusal and overflow counts.
    pub(crate) fn publish_refusals(&self) {
        let (rejected, overflow) = self.read_to_publish();
        self.publish_counts(&rejected, &overflow);
    }

    /// Reads the counts to publish them. The flag is cleared first: a
    /// refusal counted after the reading sets it again and wakes the drain.
    fn read_to_publish(&self) -> (Vec<(Reason, u64)>, [u64; 3]) {
        self.unpublished.store(false, Ordering::Relaxed);
        self.read_refusals()
    }

    /// Publishes everything and returns the snapshot it published, from one
    /// reading of the counts.
    pub(crate) fn publish_snapshot(&self, g: &Gauges) -> Stats {
        self.publish_gauges(g);
        let (rejected, overflow) = self.read_to_publish();
        self.publish_counts(&rejected, &overflow);
        let mut outcomes = [0; 9];
        for (dst, src) in outcomes.iter_mut().zip(&self.outcomes) {
            *dst = load(src);
        }
        outcomes[Outcome::Refused.index()] = rejected.iter().map(|(_, n)| n).sum();
        Stats {
            depth: g.depth as u64,
            capacity: g.capacity as u64,
            ring_capacity: g.ring_capacity as u64,
            drain_rate: g.rate,
            in_flight: self.in_flight(),
            retry_wait: g.retry_wait,
            retried: load(&self.retried),
            admitted: g.admitted,
            emitted: load(&self.emitted),
            outcomes,
            rejected,
            overflow,
            expired: load(&self.expired),
            delivery_failures: load(&self.delivery_failures),
            paused: g.paused,
            closed: g.closed,
        }
    }

    fn publish_gauges(&self, g: &Gauges) {
        let m = &self.metrics;
        if let Some(last) = &self.shared_series {
            let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
            gauge_to(&m.depth, &mut last.depth, g.depth as f64);
            gauge_to(&m.capacity, &mut last.capacity, g.bound as f64);
            gauge_to(&m.rate, &mut last.rate, g.rate);
            gauge_to(&m.in_flight, &mut last.in_flight, self.in_flight() as f64);
            gauge_to(&m.retry_wait, &mut last.retry_wait, g.retry_wait as f64);
            counter_to(&m.admitted, &mut last.admitted, g.admitted);
            return;
        }
        m.depth.set(g.depth as f64);
        m.capacity.set(g.bound as f64);
        m.rate.set(g.rate);
        m.in_flight.set(self.in_flight() as f64);
        m.retry_wait.set(g.retry_wait as f64);
        m.admitted.absolute(g.admitted);
        if let Some((live, evictions)) = g.keyed {
            m.keyed_buckets.set(live as f64);
            m.keyed_evictions.absolute(evictions);
        }
    }

    /// A throttle of a shared series is gone: takes its part out of the
    /// series' gauges (its counters stay counted).
    pub(crate) fn withdraw(&self) {
        if let Some(last) = &self.shared_series {
            let m = &self.metrics;
            let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
            gauge_to(&m.depth, &mut last.depth, 0.0);
            gauge_to(&m.capacity, &mut last.capacity, 0.0);
            gauge_to(&m.rate, &mut last.rate, 0.0);
            gauge_to(&m.in_flight, &mut last.in_flight, 0.0);
            gauge_to(&m.retry_wait, &mut last.retry_wait, 0.0);
        }
    }

    /// Publishes refusal and overflow counts read by [`read_to_publish`](Self::read_to_publish).
    fn publish_counts(&self, rejected: &[(Reason, u64)], overflow: &[u64; 3]) {
        let m = &self.metrics;
        if let Some(last) = &self.shared_series {
            let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
            let last = &mut *last;
            let mut refused = 0;
            for &(reason, n) in rejected {
                refused += n;
                let i = match last.rejected.iter().position(|(r, _)| *r == reason) {
                    Some(i) => i,
                    None => {
                        last.rejected.push((reason, 0));
                        last.rejected.len() - 1
                    }
                };
                counter_to(&m.rejected(reason), &mut last.rejected[i].1, n);
            }
            counter_to(
                &m.jobs[Outcome::Refused.index()],
                &mut last.refused,
                refused,
            );
            for ((counter, last), &n) in m.overflow.iter().zip(&mut last.overflow).zip(overflow) {
                counter_to(counter, last, n);
            }
            return;
        }
        let mut refused = 0;
        for &(reason, n) in rejected {
            refused += n;
            m.rejected(reason).absolute(n);
        }
        m.jobs[Outcome::Refused.index()].absolute(refused);
        for (counter, &n) in m.overflow.iter().zip(overflow) {
            counter.absolute(n);
        }
    }
}
