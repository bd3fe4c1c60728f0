//! `adaptive` with the fleet's queue: one rate per destination for every
//! relay ([`RedisAimd`]). Each relay's drain counts its attempts in a
//! [`Tally`]; once a second this relay adds it to the fleet's view in
//! Redis and learns the rate in force, which its drain paces at and its
//! share of the destination's bucket follows. The relay holding the lease
//! decides for the fleet.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dripfeed::global::{RedisAimd, RedisRate};
use dripfeed::rate::Tally;
use dripfeed::{Delivery, PermitSource};
use tokio::sync::watch;
use tokio::time::Instant;

use super::counts::Counts;
use crate::util::mutex::lock;

/// How often a relay reports and learns the rate.
const EVERY: Duration = Duration::from_secs(1);

/// One destination's adaptive rate as this relay knows it.
pub(crate) struct Steer {
    /// The configured rate the fleet's started from (`f64` bits).
    start: AtomicU64,
    /// The fleet's rate (`f64` bits).
    rate: AtomicU64,
    /// Nothing is sent before this (a receiver's `Retry-After`).
    pause_until: std::sync::Mutex<Option<Instant>>,
    /// Attempts since the last report.
    tally: std::sync::Mutex<Tally>,
}

impl Steer {
    /// At `rate` until the fleet says otherwise.
    pub(crate) fn new(rate: f64) -> Steer {
        Steer {
            start: AtomicU64::new(rate.to_bits()),
            rate: AtomicU64::new(rate.to_bits()),
            pause_until: std::sync::Mutex::new(None),
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

    /// Keeps the rate within `floor` and `ceiling` (a relay that has not
    /// heard from the fleet yet paces within them).
    pub(crate) fn within(&self, floor: f64, ceiling: f64) {
        let rate = self.rate().clamp(floor, ceiling);
        self.rate.store(rate.to_bits(), Ordering::Relaxed);
    }

    /// The fleet's rate in force.
    pub(crate) fn rate(&self) -> f64 {
        f64::from_bits(self.rate.load(Ordering::Relaxed))
    }

    /// How long sending stays paused (a receiver's `Retry-After`).
    pub(crate) fn paused(&self) -> Option<Duration> {
        let until = (*lock(&self.pause_until))?;
        let left = until.saturating_duration_since(Instant::now());
        (!left.is_zero()).then_some(left)
    }

    /// The fleet's rate and pause, as the fleet answered.
    fn follow(&self, rate: f64, pause: Option<Duration>) {
        self.rate.store(rate.to_bits(), Ordering::Relaxed);
        *lock(&self.pause_until) = pause.map(|p| Instant::now() + p);
    }

    /// One attempt's end, `took` long (`timed_out`: the drain ended it).
    pub(crate) fn attempted(&self, answer: &Delivery, took: Duration, timed_out: bool) {
        let mut t = lock(&self.tally);
        match answer {
            _ if timed_out => t.timeouts = t.timeouts.saturating_add(1),
            Delivery::Done => t.record(took),
            Delivery::Retry { after: Some(hint) } => t.record_congestion(Some(*hint)),
            _ => t.failures = t.failures.saturating_add(1),
        }
    }

    /// The drain started a delivery.
    pub(crate) fn worked(&self) {
        let mut t = lock(&self.tally);
        t.worked = t.worked.saturating_add(1);
    }

    /// The drain looked for work and found none.
    pub(crate) fn idle(&self) {
        let mut t = lock(&self.tally);
        t.idle = t.idle.saturating_add(1);
    }

    /// The attempts since the last report, taken.
    fn take(&self) -> Tally {
        std::mem::take(&mut *lock(&self.tally))
    }
}

/// What keeps one destination's drain on this relay at the fleet's rate.
pub(crate) struct Steering {
    /// The fleet's view in Redis.
    pub(crate) fleet: RedisAimd,
    /// The destination's bucket, moved to the fleet's rate.
    pub(crate) permits: RedisRate,
}

/// Until stopped: once a second, this relay's attempts added to the
/// fleet's view and the fleet's rate taken (a failed report keeps the rate
/// and drops its attempts: they may have been counted). Once stopped, this
/// relay's lease (if it decides) ends at once, so another relay takes over
/// at its next report.
pub(crate) async fn run(
    steer: Arc<Steer>,
    steering: Steering,
    counts: Arc<Counts>,
    budget: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let Steering { fleet, permits } = steering;
    let mut failing = false;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(EVERY) => {}
            _ = stop.changed() => break,
        }
        let tally = steer.take();
        match fleet.report(Instant::now(), &tally).await {
            Ok(s) => {
                if failing {
                    tracing::info!("adaptive rate: the fleet's view is reachable again");
                    failing = false;
                }
                let before = steer.rate();
                steer.follow(s.rate, s.pause);
                permits.set_rate(s.rate);
                permits.set_local_rate(s.rate);
                counts.rate_now(s.rate, budget, s.leading);
                if let Some(d) = s.decision.filter(|d| d.changed()) {
                    tracing::info!(from = before, to = d.rate, action = ?d.action, "adaptive rate: the fleet's rate moved");
                }
            }
            Err(e) => {
                // Not deciding while the view cannot be read.
                counts.rate_now(steer.rate(), budget, false);
                if !failing {
                    tracing::warn!(error = %e, "adaptive rate: the fleet's view cannot be reached; the rate holds");
                    failing = true;
                }
            }
        }
    }
    counts.rate_now(steer.rate(), budget, false);
    if let Err(e) = fleet.release().await {
        tracing::debug!(error = %e, "adaptive rate: the lease was not given back; it expires");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_are_tallied_as_the_controller_reads_them() {
        let steer = Steer::new(50.0);
        steer.attempted(&Delivery::Done, Duration::from_millis(40), false);
        steer.attempted(
            &Delivery::Retry { after: None },
            Duration::from_secs(9),
            true,
        );
        steer.attempted(
            &Delivery::Retry {
                after: Some(Duration::from_secs(3)),
            },
            Duration::from_millis(5),
            false,
        );
        steer.attempted(&Delivery::Failed, Duration::from_millis(5), false);
        steer.worked();
        steer.idle();
        let t = steer.take();
        let s = t.summary();
        assert_eq!(
            (s.samples, s.timeouts, s.congestion, s.failures),
            (1, 1, 1, 1)
        );
        assert_eq!(s.retry_hint, Some(Duration::from_secs(3)));
        assert_eq!((t.worked, t.idle), (1, 1));
        assert!(steer.take().is_empty(), "taken once");
    }

    #[tokio::test(start_paused = true)]
    async fn a_pause_lasts_as_long_as_the_fleet_said() {
        let steer = Steer::new(50.0);
        steer.follow(40.0, Some(Duration::from_secs(2)));
        assert_eq!(steer.rate(), 40.0);
        assert_eq!(steer.paused(), Some(Duration::from_secs(2)));
        tokio::time::advance(Duration::from_millis(1500)).await;
        assert_eq!(steer.paused(), Some(Duration::from_millis(500)));
        tokio::time::advance(Duration::from_millis(500)).await;
        assert_eq!(steer.paused(), None);
        steer.follow(40.0, Some(Duration::from_secs(5)));
        steer.follow(40.0, None);
        assert_eq!(steer.paused(), None, "a pause the fleet ended ends here");
    }

    #[test]
    fn a_new_start_rate_starts_again_and_the_rate_stays_within_bounds() {
        let steer = Steer::new(100.0);
        steer.follow(70.0, None);
        steer.start_from(100.0);
        assert_eq!(steer.rate(), 70.0, "the same start: the fleet's rate stays");
        steer.start_from(300.0);
        assert_eq!(steer.rate(), 300.0);
        steer.within(10.0, 200.0);
        assert_eq!(steer.rate(), 200.0);
    }
}
