//! `adaptive` with the fleet's queue: one rate per destination for every
//! relay ([`RedisAimd`]). Each relay's drain counts its attempts in a
//! [`Tally`]; once a second this relay adds it to the fleet's view in
//! Redis and learns the rate in force, which its drain paces at and its
//! share of the destination's bucket follows. The relay holding the lease
//! decides for the fleet.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dripfeed::global::{RedisAimd, RedisRate};
use dripfeed::rate::Tally;
use dripfeed::{Delivery, PermitSource};
use tokio::sync::watch;
use tokio::time::Instant;

use super::counts::Counts;
use super::lane::lock;

/// How often a relay reports and learns the rate.
const EVERY: Duration = Duration::from_secs(1);

/// One destination's adaptive rate as this relay knows it.
pub(crate) struct Steer {
    /// The configured rate the fleet's started from (`f64` bits).
    start: AtomicU64,
    /// The fleet's rate (`f64` bits).
    rate: AtomicU64,
    /// Nothing is sent before this (unix ms).
    pause_until: AtomicU64,
    /// Attempts since the last report.
    tally: std::sync::Mutex<Tally>,
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Steer {
    /// At `rate` until the fleet says otherwise.
    pub(crate) fn new(rate: f64) -> Steer {
        Steer {
            start: AtomicU64::new(rate.to_bits()),
            rate: AtomicU64::new(rate.to_bits()),
            pause_until: AtomicU64::new(0),
            tally: std::sync::Mutex::default(),
        }
    }

    /// A lane made again at the configured `rate`: a new one is where the
    /// fleet starts again from (until the fleet says otherwise).
    pub(crate) fn start_from(&self, rate: f64) {
        if self.start.swap(rate.to_bits(), Ordering::Relaxed) != rate.to_bits() {
            self.rate.store(rate.to_bits(), Ordering::Relaxed);
        }
    }

    /// The fleet's rate in force.
    pub(crate) fn rate(&self) -> f64 {
        f64::from_bits(self.rate.load(Ordering::Relaxed))
    }

    /// How long sending stays paused (a receiver's `Retry-After`).
    pub(crate) fn paused(&self) -> Option<Duration> {
        let until = self.pause_until.load(Ordering::Relaxed);
        let now = unix_ms();
        (until > now).then(|| Duration::from_millis(until - now))
    }

    /// One attempt's end, `took` long (`timed_out`: the drain ended it).
    pub(crate) fn attempted(&self, answer: &Delivery, took: Duration, timed_out: bool) {
        let mut t = lock(&self.tally);
        match answer {
            _ if timed_out => t.timeouts += 1,
            Delivery::Done => t.record(took),
            Delivery::Retry { after: Some(hint) } => t.record_congestion(Some(*hint)),
            _ => t.failures += 1,
        }
    }

    /// The drain started a delivery.
    pub(crate) fn worked(&self) {
        lock(&self.tally).worked += 1;
    }

    /// The drain looked for work and found none.
    pub(crate) fn idle(&self) {
        lock(&self.tally).idle += 1;
    }
}

/// Until stopped: once a second, this relay's attempts added to the
/// fleet's view and the fleet's rate taken (a failed report keeps the
/// rate; its attempts are counted again with the next).
pub(crate) async fn run(
    steer: Arc<Steer>,
    fleet: RedisAimd,
    permits: RedisRate,
    counts: Arc<Counts>,
    budget: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut failing = false;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(EVERY) => {}
            _ = stop.changed() => return,
        }
        let tally = std::mem::take(&mut *lock(&steer.tally));
        match fleet.report(Instant::now(), unix_ms(), &tally).await {
            Ok(s) => {
                if failing {
                    tracing::info!("adaptive rate: the fleet's view is reachable again");
                    failing = false;
                }
                let before = steer.rate();
                steer.rate.store(s.rate.to_bits(), Ordering::Relaxed);
                steer
                    .pause_until
                    .store(s.pause_until_unix_ms, Ordering::Relaxed);
                permits.set_rate(s.rate);
                permits.set_local_rate(s.rate);
                counts.rate_now(s.rate, super::lane::bound(budget, s.rate), s.leading);
                if let Some(d) = s.decision.filter(|d| d.changed()) {
                    tracing::info!(from = before, to = d.rate, action = ?d.action, "adaptive rate: the fleet's rate moved");
                }
            }
            Err(e) => {
                // Not lost: counted again with the next report.
                lock(&steer.tally).merge(&tally);
                if !failing {
                    tracing::warn!(error = %e, "adaptive rate: the fleet's view cannot be reached; the rate holds");
                    failing = true;
                }
            }
        }
    }
}
