//! The background half of [`RedisRate`](super::RedisRate): a local pool of
//! permits the drain takes from without waiting, and the task that leases
//! batches from the shared bucket in Redis ahead of need, returns what sits
//! unused, and falls back when Redis fails.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use metrics::{Counter, Gauge};
use redis::Script;
use tokio::sync::Notify;
use tokio::time::{Instant, sleep};

use super::Failure;
use super::conn::{RedisConnection, RedisError, array, bounded, number};

/// The script, made once and shared by every instance (it holds its Lua
/// source: one copy per instance would cost kilobytes each).
static RATE: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(include_str!("scripts/rate.lua")));

/// The longest a denied lease waits before asking again.
const MAX_DENIED_WAIT: Duration = Duration::from_secs(1);
/// The longest wait a lease may reserve: past it, Redis grants nothing.
const MAX_RESERVATION: Duration = Duration::from_millis(500);

/// Settings, validated by the builder.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) name: String,
    pub(crate) key: String,
    pub(crate) rate: f64,
    pub(crate) burst: f64,
    pub(crate) lease_interval: Duration,
    pub(crate) lease_ttl: Duration,
    pub(crate) probe_interval: Duration,
    pub(crate) call_timeout: Duration,
    pub(crate) failure: Failure,
}

/// State shared by the handles and the leasing task.
pub(crate) struct Inner {
    pub(crate) cfg: Config,
    pub(crate) conn: RedisConnection,
    script: &'static Script,
    /// Permits here, ready to take.
    pub(crate) pool: AtomicU64,
    /// When the pool was last filled: ns since `epoch`.
    filled: AtomicU64,
    epoch: Instant,
    /// Permits per lease, from the local rate.
    batch: AtomicU64,
    /// Permits taken so far (to see a quiet pool).
    pub(crate) takes: AtomicU64,
    /// Permits granted by Redis so far.
    pub(crate) granted: AtomicU64,
    pub(crate) errors: AtomicU64,
    pub(crate) fallback: AtomicBool,
    /// The global rate in force (`f64` bits): the configured one until
    /// [`set_rate`](Self::set_rate).
    rate: AtomicU64,
    /// The bucket size in force (`f64` bits).
    burst: AtomicU64,
    /// Whether the size follows the rate (100 ms of it: none was given).
    burst_follows: bool,
    /// Drain → task: the pool is low or empty.
    need: Notify,
    /// Task → drain: the pool was refilled.
    refilled: Notify,
    errors_metric: Counter,
    fallback_metric: Gauge,
}

/// One lease's answer.
struct Lease {
    granted: u64,
    wait: Duration,
}

impl Inner {
    pub(crate) fn new(cfg: Config, conn: RedisConnection) -> Self {
        crate::accounting::metrics::describe_once();
        let errors_metric = metrics::counter!(crate::accounting::metrics::GLOBAL_ERRORS, "throttle" => cfg.name.clone());
        let fallback_metric = metrics::gauge!(crate::accounting::metrics::GLOBAL_FALLBACK, "throttle" => cfg.name.clone());
        fallback_metric.set(0.0);
        Self {
            rate: AtomicU64::new(cfg.rate.to_bits()),
            burst: AtomicU64::new(cfg.burst.to_bits()),
            burst_follows: false,
            cfg,
            conn,
            script: &RATE,
            pool: AtomicU64::new(0),
            filled: AtomicU64::new(0),
            epoch: Instant::now(),
            batch: AtomicU64::new(1),
            takes: AtomicU64::new(0),
            granted: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            fallback: AtomicBool::new(false),
            need: Notify::new(),
            refilled: Notify::new(),
            errors_metric,
            fallback_metric,
        }
    }

    /// The Redis key of the shared bucket, hash-tagged so it has one slot.
    pub(crate) fn redis_key(&self) -> String {
        format!("{{dripfeed:rate:{}}}", self.cfg.key)
    }

    /// With the bucket size following the rate (none was given).
    pub(crate) fn burst_follows_rate(mut self) -> Self {
        self.burst_follows = true;
        self
    }

    /// The global rate in force.
    pub(crate) fn rate(&self) -> f64 {
        f64::from_bits(self.rate.load(Ordering::Relaxed))
    }

    /// The bucket size in force.
    fn burst(&self) -> f64 {
        f64::from_bits(self.burst.load(Ordering::Relaxed))
    }

    /// A new global rate (finite and positive, else ignored), with the
    /// bucket size following it if it was not given.
    pub(crate) fn set_rate(&self, rate: f64) {
        if !(rate.is_finite() && rate > 0.0) {
            return;
        }
        self.rate.store(rate.to_bits(), Ordering::Relaxed);
        if self.burst_follows {
            self.burst
                .store(default_burst(rate).to_bits(), Ordering::Relaxed);
        }
    }

    pub(crate) fn batch(&self) -> u64 {
        self.batch.load(Ordering::Relaxed)
    }

    /// Sizes leases from the local rate: `rate × lease_interval` permits,
    /// at least 1, at most the bucket size.
    pub(crate) fn set_local_rate(&self, rate: f64) {
        let work = rate * self.cfg.lease_interval.as_secs_f64();
        let most = self.burst().floor().max(1.0);
        let batch = if work.is_finite() && work > 1.0 {
            work.ceil().min(most)
        } else {
            1.0
        };
        self.batch.store(batch as u64, Ordering::Relaxed);
        self.need.notify_one();
    }

    /// Takes one permit of the pool. A pool filled more than three lease
    /// lifetimes ago has sat through a stall (the process stopped, its
    /// runtime starved): the leasing task gives unused permits back after
    /// one or two, so these would be spent late, on top of what the fleet
    /// sends now. They are dropped instead (the bucket drained meanwhile)
    /// and a fresh lease is asked for.
    pub(crate) fn try_take(&self) -> bool {
        let age = self
            .epoch
            .elapsed()
            .saturating_sub(Duration::from_nanos(self.filled.load(Ordering::Acquire)));
        if age > self.cfg.lease_ttl.saturating_mul(3) && self.pool.swap(0, Ordering::AcqRel) > 0 {
            self.need.notify_one();
            return false;
        }
        let low = self.batch() / 2;
        match self
            .pool
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
        {
            Ok(before) => {
                self.takes.fetch_add(1, Ordering::Relaxed);
                if before - 1 <= low {
                    self.need.notify_one();
                }
                true
            }
            Err(_) => {
                self.need.notify_one();
                false
            }
        }
    }

    pub(crate) fn give_back(&self) {
        self.pool.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) async fn ready(&self) {
        loop {
            let refilled = self.refilled.notified();
            tokio::pin!(refilled);
            refilled.as_mut().enable();
            if self.pool.load(Ordering::Acquire) > 0 {
                return;
            }
            self.need.notify_one();
            refilled.await;
        }
    }

    fn add(&self, permits: u64) {
        if permits > 0 {
            let now = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.filled.store(now, Ordering::Release);
            self.pool.fetch_add(permits, Ordering::AcqRel);
            self.refilled.notify_waiters();
        }
    }

    /// One script call: "lease" or "return" `n` permits.
    async fn call(&self, op: &str, n: u64) -> Result<Lease, RedisError> {
        let mut conn = self.conn.clone();
        let mut invocation = self.script.prepare_invoke();
        invocation
            .key(self.redis_key())
            .arg(op)
            .arg(n)
            .arg(self.rate())
            .arg(self.burst())
            .arg(MAX_RESERVATION.as_micros() as u64);
        let answer: redis::Value =
            bounded(invocation.invoke_async(&mut conn), self.cfg.call_timeout).await?;
        let items = array(answer, 3, "rate script")?;
        let granted = number(&items[0], "granted")?;
        let wait_us = number(&items[1], "wait")?;
        if !(granted >= 0.0 && granted <= n as f64 && wait_us >= 0.0) {
            return Err(RedisError::unexpected("lease out of range"));
        }
        Ok(Lease {
            granted: granted as u64,
            wait: Duration::from_micros(wait_us.min(u64::MAX as f64) as u64),
        })
    }

    fn failed(&self, err: &RedisError) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        self.errors_metric.increment(1);
        if !self.fallback.swap(true, Ordering::AcqRel) {
            // Leased permits are not carried through an outage: the bucket
            // drained meanwhile, so spending them once Redis is back would
            // be a burst on top of its size.
            self.pool.store(0, Ordering::Release);
            self.fallback_metric.set(1.0);
            tracing::warn!(
                throttle = %self.cfg.name,
                error = %err,
                failure = ?self.cfg.failure,
                "fleet limit unreachable: falling back"
            );
        }
    }

    fn recovered(&self) {
        if self.fallback.swap(false, Ordering::AcqRel) {
            self.fallback_metric.set(0.0);
            tracing::info!(throttle = %self.cfg.name, "fleet limit reachable again");
        }
    }
}

/// The bucket size when none is given: 100 ms of the rate, at least 1.
pub(crate) fn default_burst(rate: f64) -> f64 {
    (rate * 0.1).max(1.0)
}

/// Locally minted permits while failing open.
struct Mint {
    credit: f64,
    at: Instant,
}

/// The leasing task; ends once every handle is gone.
pub(crate) async fn run(weak: Weak<Inner>) {
    let mut wanted = false;
    let mut last_takes = 0;
    let mut next_probe = Instant::now();
    let mut mint = Mint {
        credit: 0.0,
        at: Instant::now(),
    };
    loop {
        let Some(inner) = weak.upgrade() else { return };
        let batch = inner.batch();
        let pool = inner.pool.load(Ordering::Acquire);
        if pool > batch / 2 {
            wanted = false;
        }
        let fallback = inner.fallback.load(Ordering::Acquire);
        if !wanted {
            let quiet = if fallback {
                inner.cfg.probe_interval
            } else {
                inner.cfg.lease_ttl
            };
            tokio::select! {
                () = inner.need.notified() => wanted = true,
                () = sleep(quiet) => {
                    let takes = inner.takes.load(Ordering::Relaxed);
                    if fallback {
                        probe(&inner, &mut next_probe, 0).await;
                    } else if takes == last_takes {
                        return_unused(&inner).await;
                    }
                    last_takes = takes;
                }
            }
            continue;
        }
        // A whole lease each time: the pool holds at most one and a half.
        let want = batch;
        if fallback {
            if Instant::now() >= next_probe && probe(&inner, &mut next_probe, want).await {
                continue;
            }
            let pause = match inner.cfg.failure {
                Failure::FailOpen { local_share } => {
                    mint_local(&inner, &mut mint, local_share, want)
                }
                Failure::FailClosed => next_probe.saturating_duration_since(Instant::now()),
            };
            drop(inner);
            sleep(pause.max(Duration::from_millis(1))).await;
            continue;
        }
        match inner.call("lease", want).await {
            Ok(lease) if lease.granted > 0 => {
                inner.granted.fetch_add(lease.granted, Ordering::Relaxed);
                if !lease.wait.is_zero() {
                    // A reservation: usable once the bucket has drained to it.
                    drop(inner);
                    sleep(lease.wait).await;
                    let Some(inner) = weak.upgrade() else { return };
                    inner.add(lease.granted);
                    continue;
                }
                inner.add(lease.granted);
            }
            Ok(lease) => {
                drop(inner);
                sleep(
                    lease
                        .wait
                        .clamp(Duration::from_micros(500), MAX_DENIED_WAIT),
                )
                .await;
            }
            Err(err) => {
                inner.failed(&err);
                next_probe = Instant::now() + inner.cfg.probe_interval;
                mint = Mint {
                    credit: 0.0,
                    at: Instant::now(),
                };
            }
        }
    }
}

/// Asks Redis for `want` permits (0: just a check) while falling back;
/// true if it answered.
async fn probe(inner: &Arc<Inner>, next_probe: &mut Instant, want: u64) -> bool {
    *next_probe = Instant::now() + inner.cfg.probe_interval;
    let (op, n) = if want == 0 {
        ("return", 0)
    } else {
        ("lease", want)
    };
    match inner.call(op, n).await {
        Ok(lease) => {
            inner.recovered();
            inner.granted.fetch_add(lease.granted, Ordering::Relaxed);
            if lease.granted > 0 && !lease.wait.is_zero() {
                sleep(lease.wait).await;
            }
            inner.add(lease.granted);
            true
        }
        Err(err) => {
            inner.failed(&err);
            false
        }
    }
}

/// Adds the permits earned at `global rate × share` since the last mint (at
/// most `want`); says how long until the next one.
fn mint_local(inner: &Inner, mint: &mut Mint, share: f64, want: u64) -> Duration {
    let rate = inner.rate() * share;
    let now = Instant::now();
    let earned = now.saturating_duration_since(mint.at).as_secs_f64() * rate;
    mint.at = now;
    mint.credit = (mint.credit + earned).min(want as f64);
    let whole = mint.credit.floor();
    mint.credit -= whole;
    inner.add(whole as u64);
    Duration::from_secs_f64(((1.0 - mint.credit) / rate).clamp(0.0, 1.0))
}

/// Gives permits that sat unused for a lease's lifetime back to the shared
/// bucket, so an idle node holds nothing the fleet could use.
async fn return_unused(inner: &Inner) {
    let unused = inner.pool.swap(0, Ordering::AcqRel);
    if unused == 0 {
        return;
    }
    if let Err(err) = inner.call("return", unused).await {
        inner.failed(&err);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inner() -> Inner {
        let cfg = Config {
            name: "t".into(),
            key: "k".into(),
            rate: 100.0,
            burst: 10.0,
            lease_interval: Duration::from_millis(10),
            lease_ttl: Duration::from_millis(100),
            probe_interval: Duration::from_secs(1),
            call_timeout: Duration::from_secs(1),
            failure: Failure::FailClosed,
        };
        let conn = RedisConnection::open("redis://127.0.0.1:1/").expect("a lazy handle");
        Inner::new(cfg, conn)
    }

    #[tokio::test(start_paused = true)]
    async fn permits_that_sat_through_a_stall_are_dropped_not_spent() {
        let pool = inner();
        pool.add(3);
        assert!(pool.try_take(), "a fresh pool is spent");
        tokio::time::advance(Duration::from_millis(250)).await;
        assert!(pool.try_take(), "within three lease lifetimes");
        // The process stopped for a second: nothing the task gave back.
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(!pool.try_take(), "stale permits are not spent");
        assert_eq!(pool.pool.load(Ordering::Acquire), 0, "they are dropped");
        pool.add(1);
        assert!(pool.try_take(), "a fresh lease is");
    }
}
