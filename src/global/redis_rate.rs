//! [`RedisRate`]: one emission rate shared by a fleet through Redis.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_trait::async_trait;

use super::Failure;
use super::conn::RedisConnection;
use super::leaser::{self, Config, Inner};
use crate::destinations::Drivers;
use crate::limits::permits::{Permit, PermitSource};

/// A [`PermitSource`] backed by one shared leaky bucket in Redis: every
/// throttle of the fleet built with it emits, together, at most the global
/// rate.
///
/// The bucket holds *debt* in permits and drains at the global rate; one Lua
/// script updates it atomically with the server's `TIME` (no client clock
/// matters) and lets the key expire when the debt reaches zero. A background
/// task leases permits in batches of `local rate × lease interval` (at least
/// 1, at most the bucket size) into a local pool before the pool runs dry, so
/// the drain takes permits without a round trip (a new lease is fetched when
/// the pool falls to half a lease) and round trips per job stay
/// far below one. Permits that sit unused for a lease's lifetime go back to
/// Redis, so a node holds at most one and a half leases the fleet could
/// use; a pool filled more than three lease lifetimes ago (the process was
/// stopped, its runtime starved, so nothing gave them back) is dropped at
/// the next take rather than spent on top of what the fleet sends now.
///
/// When Redis fails, the permits in the pool are dropped (the bucket drains
/// while it cannot be reached: spent afterwards they would be a burst), and
/// the [`Failure`] mode applies until it answers again:
/// fail-open mints permits locally at `global rate × local_share`,
/// fail-closed hands out none. Each switch is a tracing event; the metrics
/// [`GLOBAL_ERRORS`](crate::accounting::metrics::GLOBAL_ERRORS) and
/// [`GLOBAL_FALLBACK`](crate::accounting::metrics::GLOBAL_FALLBACK) follow it.
///
/// ```no_run
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use dripfeed::global::{Failure, RedisConnection, RedisRate};
/// use dripfeed::{Delivery, Throttle};
///
/// let conn = RedisConnection::open("redis://127.0.0.1:6379/")?;
/// // 300 jobs/s for the whole fleet of (about) 3 nodes.
/// let fleet = RedisRate::builder(conn, "webhooks", 300.0)
///     .name("webhooks")
///     .on_failure(Failure::FailOpen { local_share: 1.0 / 3.0 })
///     .start()?;
/// let (throttle, _drain) = Throttle::builder()
///     .drain_rate(1000.0) // the local pace; the fleet limit caps it
///     .permits(fleet.clone())
///     .build(|_: &u64, _| async { Delivery::Done })?;
/// throttle.try_submit(1)?;
/// assert!(!fleet.is_fallback());
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RedisRate {
    inner: Arc<Inner>,
}

impl RedisRate {
    /// A builder for a fleet limit of `rate` permits per second held at the
    /// Redis key `{dripfeed:rate:<key>}`. Every node of the fleet must use
    /// the same key, rate and bucket size.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use dripfeed::global::{RedisConnection, RedisRate, RedisRateError};
    /// let conn = RedisConnection::open("redis://127.0.0.1:1/").unwrap();
    /// let err = RedisRate::builder(conn, "k", 0.0).start().unwrap_err();
    /// assert_eq!(err, RedisRateError::InvalidRate(0.0));
    /// # }
    /// ```
    pub fn builder(conn: RedisConnection, key: impl Into<String>, rate: f64) -> RedisRateBuilder {
        RedisRateBuilder {
            conn,
            cfg: Config {
                name: "default".to_owned(),
                key: key.into(),
                rate,
                burst: f64::NAN,
                lease_interval: Duration::from_millis(10),
                lease_ttl: Duration::from_millis(100),
                probe_interval: Duration::from_millis(100),
                call_timeout: Duration::from_millis(250),
                failure: Failure::FailClosed,
            },
            drivers: None,
        }
    }

    /// Redis round trips this limit has made (leases, returns, probes),
    /// counted apart from other users of the same connection.
    ///
    /// ```no_run
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::{RedisConnection, RedisRate};
    /// let fleet = RedisRate::builder(RedisConnection::open("redis://127.0.0.1/")?, "k", 10.0).start()?;
    /// assert_eq!(fleet.round_trips(), 0, "nothing leased before a job waits");
    /// # Ok(())
    /// # }
    /// ```
    pub fn round_trips(&self) -> u64 {
        self.inner.conn.round_trips()
    }

    /// Permits Redis has granted to this node so far.
    ///
    /// ```no_run
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::{RedisConnection, RedisRate};
    /// let fleet = RedisRate::builder(RedisConnection::open("redis://127.0.0.1/")?, "k", 10.0).start()?;
    /// assert_eq!(fleet.granted(), 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn granted(&self) -> u64 {
        self.inner.granted.load(Ordering::Relaxed)
    }

    /// Failed calls to Redis so far.
    ///
    /// ```no_run
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::{RedisConnection, RedisRate};
    /// let fleet = RedisRate::builder(RedisConnection::open("redis://127.0.0.1/")?, "k", 10.0).start()?;
    /// assert_eq!(fleet.errors(), 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn errors(&self) -> u64 {
        self.inner.errors.load(Ordering::Relaxed)
    }

    /// Whether Redis is unreachable and the [`Failure`] mode applies.
    ///
    /// ```no_run
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::{RedisConnection, RedisRate};
    /// let fleet = RedisRate::builder(RedisConnection::open("redis://127.0.0.1/")?, "k", 10.0).start()?;
    /// assert!(!fleet.is_fallback());
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_fallback(&self) -> bool {
        self.inner.fallback.load(Ordering::Acquire)
    }

    /// Permits in the local pool right now.
    ///
    /// ```no_run
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::{RedisConnection, RedisRate};
    /// let fleet = RedisRate::builder(RedisConnection::open("redis://127.0.0.1/")?, "k", 10.0).start()?;
    /// assert_eq!(fleet.pooled(), 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn pooled(&self) -> u64 {
        self.inner.pool.load(Ordering::Acquire)
    }

    /// Permits per lease, sized from the local rate.
    ///
    /// ```no_run
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::PermitSource;
    /// use dripfeed::global::{RedisConnection, RedisRate};
    /// let fleet = RedisRate::builder(RedisConnection::open("redis://127.0.0.1/")?, "k", 1e6).start()?;
    /// fleet.set_local_rate(50_000.0);
    /// assert_eq!(fleet.lease_size(), 500, "10 ms of work");
    /// # Ok(())
    /// # }
    /// ```
    pub fn lease_size(&self) -> u64 {
        self.inner.batch()
    }

    /// Moves the fleet's rate to `rate` permits per second from the next
    /// lease on (a rate that is not finite and positive is ignored), with
    /// the bucket size following it when none was given. For a rate the
    /// fleet decides together (see [`RedisAimd`](super::RedisAimd)): every
    /// node sets the same one.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::{RedisConnection, RedisRate};
    /// let fleet = RedisRate::builder(RedisConnection::open("redis://127.0.0.1:1/")?, "k", 100.0).start()?;
    /// fleet.set_rate(60.0);
    /// fleet.set_rate(f64::NAN);
    /// assert_eq!(fleet.rate(), 60.0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn set_rate(&self, rate: f64) {
        self.inner.set_rate(rate);
    }

    /// The fleet's rate in force, permits per second.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::{RedisConnection, RedisRate};
    /// let fleet = RedisRate::builder(RedisConnection::open("redis://127.0.0.1:1/")?, "k", 100.0).start()?;
    /// assert_eq!(fleet.rate(), 100.0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn rate(&self) -> f64 {
        self.inner.rate()
    }
}

impl fmt::Debug for RedisRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisRate")
            .field("key", &self.inner.redis_key())
            .field("rate", &self.inner.rate())
            .field("pooled", &self.pooled())
            .field("fallback", &self.is_fallback())
            .finish()
    }
}

#[async_trait]
impl PermitSource for RedisRate {
    fn try_take(&self) -> Option<Permit<'_>> {
        self.inner.try_take().then(|| Permit::new(self))
    }

    fn give_back(&self) {
        self.inner.give_back();
    }

    async fn ready(&self) {
        self.inner.ready().await;
    }

    fn set_local_rate(&self, jobs_per_second: f64) {
        self.inner.set_local_rate(jobs_per_second);
    }
}

/// Configures and starts a [`RedisRate`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use dripfeed::global::{Failure, RedisConnection, RedisRate, RedisRateError};
/// use std::time::Duration;
/// let conn = RedisConnection::open("redis://127.0.0.1:1/").unwrap();
/// let err = RedisRate::builder(conn, "k", 100.0)
///     .on_failure(Failure::FailOpen { local_share: 2.0 })
///     .start()
///     .unwrap_err();
/// assert_eq!(err.to_string(), "local share must be in (0, 1], got 2");
/// # }
/// ```
#[derive(Debug)]
#[must_use]
pub struct RedisRateBuilder {
    conn: RedisConnection,
    cfg: Config,
    drivers: Option<Arc<Drivers>>,
}

impl RedisRateBuilder {
    /// The `throttle` label of this limit's metrics (default `"default"`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.cfg.name = name.into();
        self
    }

    /// The bucket size: the most permits the fleet may hold leased ahead
    /// (default: 100 ms of the global rate, at least 1). Leases are at most
    /// this large.
    pub fn burst(mut self, permits: f64) -> Self {
        self.cfg.burst = permits;
        self
    }

    /// How much local work one lease covers (default 10 ms).
    pub fn lease_interval(mut self, interval: Duration) -> Self {
        self.cfg.lease_interval = interval;
        self
    }

    /// How long leased permits may sit unused before they go back to Redis
    /// (default 100 ms).
    pub fn lease_ttl(mut self, ttl: Duration) -> Self {
        self.cfg.lease_ttl = ttl;
        self
    }

    /// How often Redis is tried again while falling back (default 100 ms).
    pub fn probe_interval(mut self, interval: Duration) -> Self {
        self.cfg.probe_interval = interval;
        self
    }

    /// How long one call may take before it counts as a failure (default
    /// 250 ms).
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.cfg.call_timeout = timeout;
        self
    }

    /// What to do while Redis is unreachable (default
    /// [`Failure::FailClosed`]).
    pub fn on_failure(mut self, failure: Failure) -> Self {
        self.cfg.failure = failure;
        self
    }

    /// Runs the leasing on `drivers` (one scheduler for many) rather than
    /// a task of its own: for many limits at once, one per queue say.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use dripfeed::destinations::Drivers;
    /// use dripfeed::global::{RedisConnection, RedisRate};
    /// let drivers = Drivers::start(1, &tokio::runtime::Handle::current());
    /// let conn = RedisConnection::open("redis://127.0.0.1:1/").unwrap();
    /// let tasks = tokio::runtime::Handle::current().metrics().num_alive_tasks();
    /// let limits: Vec<RedisRate> = (0..100)
    ///     .map(|i| RedisRate::builder(conn.clone(), format!("k{i}"), 10.0).drivers(&drivers).start().unwrap())
    ///     .collect();
    /// let now = tokio::runtime::Handle::current().metrics().num_alive_tasks();
    /// assert_eq!(now, tasks, "no task of their own");
    /// # drop(limits);
    /// # }
    /// ```
    pub fn drivers(mut self, drivers: &Arc<Drivers>) -> Self {
        self.drivers = Some(drivers.clone());
        self
    }

    /// Validates and starts the leasing, a task on the current tokio
    /// runtime (or a future on the [`drivers`](Self::drivers) given; a
    /// current runtime is needed either way); it ends when the last handle
    /// is dropped.
    pub fn start(self) -> Result<RedisRate, RedisRateError> {
        let mut cfg = self.cfg;
        if !(cfg.rate.is_finite() && cfg.rate > 0.0) {
            return Err(RedisRateError::InvalidRate(cfg.rate));
        }
        let follows = cfg.burst.is_nan();
        if follows {
            cfg.burst = leaser::default_burst(cfg.rate);
        }
        if !(cfg.burst.is_finite() && cfg.burst >= 1.0) {
            return Err(RedisRateError::InvalidBurst(cfg.burst));
        }
        if let Failure::FailOpen { local_share } = cfg.failure
            && !(local_share > 0.0 && local_share <= 1.0)
        {
            return Err(RedisRateError::InvalidShare(local_share));
        }
        for (what, d) in [
            ("lease interval", cfg.lease_interval),
            ("lease ttl", cfg.lease_ttl),
            ("probe interval", cfg.probe_interval),
            ("call timeout", cfg.call_timeout),
        ] {
            if d.is_zero() {
                return Err(RedisRateError::ZeroDuration(what));
            }
        }
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|_| RedisRateError::NoRuntime)?;
        let mut inner = Inner::new(cfg, self.conn.with_own_count().counted_as("permits"));
        if follows {
            inner = inner.burst_follows_rate();
        }
        let inner = Arc::new(inner);
        let leasing = leaser::run(Arc::downgrade(&inner));
        match &self.drivers {
            Some(drivers) => drop(drivers.run(leasing)),
            None => drop(runtime.spawn(leasing)),
        }
        Ok(RedisRate { inner })
    }
}

/// Why a [`RedisRate`] could not start.
///
/// ```
/// use dripfeed::global::RedisRateError;
/// assert_eq!(RedisRateError::InvalidBurst(0.5).to_string(), "burst must be finite and at least 1, got 0.5");
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum RedisRateError {
    /// The global rate was zero, negative, NaN or infinite.
    InvalidRate(f64),
    /// The bucket size was below 1, NaN or infinite.
    InvalidBurst(f64),
    /// A fail-open share outside `(0, 1]`.
    InvalidShare(f64),
    /// A zero interval or timeout (which one).
    ZeroDuration(&'static str),
    /// Not called within a tokio runtime.
    NoRuntime,
}

impl fmt::Display for RedisRateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidRate(v) => write!(f, "global rate must be finite and positive, got {v}"),
            Self::InvalidBurst(v) => write!(f, "burst must be finite and at least 1, got {v}"),
            Self::InvalidShare(v) => write!(f, "local share must be in (0, 1], got {v}"),
            Self::ZeroDuration(what) => write!(f, "{what} must be above zero"),
            Self::NoRuntime => f.write_str("must be started within a tokio runtime"),
        }
    }
}

impl std::error::Error for RedisRateError {}
