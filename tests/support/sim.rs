//! Drives a real throttle against the fragile downstream model on paused
//! tokio time: arrivals at a fixed offered rate, the drain fixed or adaptive,
//! and a trace sampled every 100 ms. Used by `tests/adaptive.rs` and
//! `examples/simulate.rs`.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dripfeed::rate::AimdConfig;
use dripfeed::{Attempt, Delivery, Downstream, Throttle};
use tokio::time::{Instant, sleep};

use super::fragile::{FragileDownstream, OutageMode, Outcome};

/// One simulated run.
#[derive(Clone, Debug)]
pub(crate) struct Scenario {
    /// The downstream's capacity, jobs/s.
    pub capacity: f64,
    /// Offered load, jobs/s.
    pub offered: f64,
    /// How long to run.
    pub length: Duration,
    /// An outage window (from, to) after the start, in which every request fails.
    pub outage: Option<(Duration, Duration)>,
    /// The drain: `None` adaptive with the defaults, `Some(r)` fixed at r.
    pub fixed_rate: Option<f64>,
    /// Base latency of the downstream.
    pub base: Duration,
}

impl Scenario {
    pub(crate) fn new(capacity: f64) -> Self {
        Scenario {
            capacity,
            offered: 2.0 * capacity,
            length: Duration::from_secs(120),
            outage: None,
            fixed_rate: None,
            base: Duration::from_millis(40),
        }
    }
}

/// What a run saw, sampled every 100 ms.
#[derive(Clone, Debug, Default)]
pub(crate) struct Trace {
    /// (seconds since start, drain rate, queue depth)
    pub points: Vec<(f64, f64, u64)>,
    /// (seconds since start, latency seconds) of each successful delivery
    pub latencies: Vec<(f64, f64)>,
    pub delivered: u64,
    pub refused: u64,
    pub failed: u64,
    pub left_waiting: u64,
}

impl Trace {
    fn rates(&self, from: f64, to: f64) -> impl Iterator<Item = f64> + '_ {
        self.points
            .iter()
            .filter(move |(t, _, _)| *t >= from && *t < to)
            .map(|(_, r, _)| *r)
    }

    pub(crate) fn mean_rate(&self, from: f64, to: f64) -> f64 {
        let (sum, n) = self
            .rates(from, to)
            .fold((0.0, 0), |(s, n), r| (s + r, n + 1));
        sum / f64::from(n.max(1))
    }

    pub(crate) fn min_rate(&self, from: f64, to: f64) -> f64 {
        self.rates(from, to).fold(f64::INFINITY, f64::min)
    }

    pub(crate) fn max_rate(&self, from: f64, to: f64) -> f64 {
        self.rates(from, to).fold(0.0, f64::max)
    }

    /// p99 of successful deliveries' latency in [from, to), seconds.
    pub(crate) fn p99(&self, from: f64, to: f64) -> f64 {
        let mut l: Vec<f64> = self
            .latencies
            .iter()
            .filter(|(t, _)| *t >= from && *t < to)
            .map(|(_, l)| *l)
            .collect();
        if l.is_empty() {
            return 0.0;
        }
        l.sort_by(f64::total_cmp);
        l[(l.len() * 99 / 100).min(l.len() - 1)]
    }

    /// Delivered per second in [from, to).
    pub(crate) fn throughput(&self, from: f64, to: f64) -> f64 {
        let n = self
            .latencies
            .iter()
            .filter(|(t, _)| *t >= from && *t < to)
            .count();
        n as f64 / (to - from)
    }

    /// The first time at or after `from` when the rate is >= `level`.
    pub(crate) fn first_at_or_above(&self, from: f64, level: f64) -> Option<f64> {
        self.points
            .iter()
            .find(|(t, r, _)| *t >= from && *r >= level)
            .map(|(t, _, _)| *t)
    }
}

struct Model {
    model: Mutex<FragileDownstream>,
    start: Instant,
    latencies: Arc<Mutex<Vec<(f64, f64)>>>,
}

#[async_trait::async_trait]
impl Downstream<u64> for Model {
    async fn deliver(&self, _job: &u64, _attempt: Attempt) -> Delivery {
        let now = Instant::now();
        let served = self.model.lock().unwrap().serve(now);
        match served.outcome {
            Outcome::TimedOut => std::future::pending().await,
            outcome => {
                sleep(served.latency).await;
                match outcome {
                    Outcome::Ok => {
                        let t = (now - self.start).as_secs_f64();
                        self.latencies
                            .lock()
                            .unwrap()
                            .push((t, served.latency.as_secs_f64()));
                        Delivery::Done
                    }
                    Outcome::Congested(after) => Delivery::Retry { after },
                    _ => Delivery::Failed,
                }
            }
        }
    }
}

/// Runs `s` on the current (paused) runtime.
pub(crate) async fn run(s: &Scenario) -> Trace {
    let start = Instant::now();
    let mut model = FragileDownstream::new(s.capacity, s.base)
        .unwrap()
        .with_seed(1);
    if let Some((from, to)) = s.outage {
        model = model.with_outage(start + from, start + to, OutageMode::Fail);
    }
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let downstream = Model {
        model: Mutex::new(model),
        start,
        latencies: latencies.clone(),
    };
    let builder = Throttle::builder()
        .latency_budget(Duration::from_secs(2))
        .max_in_flight(512)
        .deliver_timeout(Duration::from_secs(1));
    let builder = match s.fixed_rate {
        Some(rate) => builder.drain_rate(rate),
        None => builder.adaptive(AimdConfig::default().build().unwrap()),
    };
    let (throttle, _drain) = builder.build(downstream).unwrap();

    let producer = {
        let throttle = throttle.clone();
        let offered = s.offered;
        tokio::spawn(async move {
            let mut owed = 0.0;
            let mut n = 0u64;
            let mut tick = tokio::time::interval(Duration::from_millis(5));
            loop {
                tick.tick().await;
                owed += offered * 0.005;
                while owed >= 1.0 {
                    owed -= 1.0;
                    let _ = throttle.try_submit(n);
                    n += 1;
                }
            }
        })
    };
    let mut trace = Trace::default();
    let steps = (s.length.as_millis() / 100) as u64;
    for _ in 0..steps {
        sleep(Duration::from_millis(100)).await;
        trace.points.push((
            start.elapsed().as_secs_f64(),
            throttle.drain_rate(),
            throttle.depth() as u64,
        ));
    }
    producer.abort();
    let stats = throttle.stats();
    trace.delivered = stats.delivered();
    trace.refused = stats.outcome(dripfeed::Outcome::Refused);
    trace.failed = stats.outcome(dripfeed::Outcome::Failed);
    trace.left_waiting = stats.depth();
    trace.latencies = std::mem::take(&mut *latencies.lock().unwrap());
    throttle.shutdown(Duration::ZERO).await;
    trace
}
