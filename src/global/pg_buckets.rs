//! [`PgBuckets`]: the per-key reverse leaky buckets of
//! [`KeyedBuckets`](crate::keyed::KeyedBuckets), shared through one PostgreSQL
//! table.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::pg_sql::{Statements, valid_table};
use super::store_health::StoreHealth;
use super::{BucketError, Failure, PgError};
use crate::keyed::bucket::{admitted, check_cost, check_settle, decide};
use crate::keyed::{Admit, AdmitError, KeyedBuckets, Quota, QuotaError};

/// Buckets the fail-open fallback keeps in memory at most.
const FALLBACK_KEYS: usize = 100_000;

/// Per-key reverse leaky buckets held in one PostgreSQL table, with the
/// semantics of [`KeyedBuckets`](crate::keyed::KeyedBuckets): each key's bucket
/// holds debt that drains at the key's rate; a cost is admitted iff
/// `debt_now + cost <= size`; a refusal says exactly how long to wait; a
/// cost above the size is an error, never an endless 429.
///
/// Each admission is **one statement**, prepared once per pooled connection:
/// an `INSERT … ON CONFLICT DO UPDATE … RETURNING` upsert whose arithmetic
/// runs in SQL on the server's `clock_timestamp()`, so processes sharing the
/// table never race and their clocks never matter. [`migrate`](Self::migrate)
/// creates the table (unlogged: bucket state is cheap to lose and costly to
/// log) and an index on each row's empty-at time; every
/// [`prune_every`](Self::prune_every)th admission also deletes, in the
/// background, a small batch of rows whose debt has drained to zero. No
/// sweeper task exists.
///
/// When PostgreSQL fails, the [`Failure`] mode decides: fail-closed (the
/// default) returns [`BucketError::Postgres`]; fail-open admits through
/// in-memory buckets draining at `rate × local_share`. Failed calls count in
/// `leaky_bucket_global_errors_total` and `leaky_bucket_global_fallback` is 1
/// until a probe succeeds (label `throttle` = the table name).
///
/// ```no_run
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use dripfeed::global::PgBuckets;
/// use dripfeed::keyed::{AdmitError, Quota};
///
/// let pool = PgBuckets::pool("postgres://app@127.0.0.1/app", 8)?;
/// let tenants = PgBuckets::new(pool, "dripfeed_tenants", Quota::new(10.0, 2.0)?)?;
/// tenants.migrate().await?;
/// assert!(tenants.try_admit("acme", 8.0).await.is_ok());
/// match tenants.try_admit("acme", 4.0).await {
///     Err(e) => assert!(matches!(e.as_admit(), Some(AdmitError::OverQuota(_)))),
///     Ok(_) => unreachable!("only 2 units left"),
/// }
/// # Ok(())
/// # }
/// ```
pub struct PgBuckets {
    pool: Pool,
    table: String,
    sql: Arc<Statements>,
    default: Quota,
    overrides: RwLock<HashMap<String, Quota>>,
    call_timeout: Duration,
    failure: Failure,
    fallback: Option<KeyedBuckets<String>>,
    health: StoreHealth,
    prune_every: u64,
    prune_batch: i64,
    admissions: AtomicU64,
    pruning: Arc<AtomicBool>,
    pruned: Arc<AtomicU64>,
}

impl PgBuckets {
    /// A pool of up to `max_size` connections (at least 1) to `url`
    /// (`postgres://user:pass@host:port/db` or `host=… user=…`), without
    /// TLS, connecting lazily with a 250 ms connect timeout unless the URL
    /// sets one. For TLS, build a [`Pool`] yourself and pass it to
    /// [`new`](Self::new).
    ///
    /// ```
    /// use dripfeed::global::PgBuckets;
    /// assert!(PgBuckets::pool("postgres://app@127.0.0.1:5432/app", 8).is_ok());
    /// assert!(PgBuckets::pool("postgres://[bad", 8).is_err());
    /// ```
    pub fn pool(url: &str, max_size: usize) -> Result<Pool, PgError> {
        let mut config: tokio_postgres::Config = url.parse()?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_millis(250));
        }
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        Pool::builder(manager)
            .max_size(max_size.max(1))
            .build()
            .map_err(|e| PgError::new(format!("postgres pool: {e}")))
    }

    /// Buckets in `table` (`name` or `schema.name`, lowercase letters,
    /// digits and `_`), each with `default_quota` unless
    /// [`set_quota`](Self::set_quota) says otherwise.
    ///
    /// ```
    /// use dripfeed::global::PgBuckets;
    /// use dripfeed::keyed::Quota;
    /// let pool = PgBuckets::pool("postgres://app@127.0.0.1/app", 1)?;
    /// let b = PgBuckets::new(pool.clone(), "ip_buckets", Quota::new(5.0, 1.0)?)?;
    /// assert_eq!(b.table(), "ip_buckets");
    /// assert!(PgBuckets::new(pool, "bad name; --", Quota::new(5.0, 1.0)?).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(pool: Pool, table: &str, default_quota: Quota) -> Result<Self, PgError> {
        if !valid_table(table) {
            return Err(PgError::new(format!("invalid table name {table:?}")));
        }
        Ok(Self {
            pool,
            table: table.to_owned(),
            sql: Arc::new(Statements::new(table)),
            default: default_quota,
            overrides: RwLock::new(HashMap::new()),
            call_timeout: Duration::from_millis(500),
            failure: Failure::FailClosed,
            fallback: None,
            health: StoreHealth::new(table, Duration::from_secs(1)),
            prune_every: 64,
            prune_batch: 100,
            admissions: AtomicU64::new(0),
            pruning: Arc::new(AtomicBool::new(false)),
            pruned: Arc::new(AtomicU64::new(0)),
        })
    }

    /// How long one call (pool wait included) may take before it fails
    /// (default 500 ms).
    ///
    /// ```
    /// # use dripfeed::global::PgBuckets;
    /// # use dripfeed::keyed::Quota;
    /// # use std::time::Duration;
    /// let b = PgBuckets::new(PgBuckets::pool("postgres://a@127.0.0.1/a", 1)?, "t", Quota::new(1.0, 1.0)?)?
    ///     .call_timeout(Duration::from_millis(100));
    /// assert_eq!(b.quota("x").size(), 1.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// What happens while PostgreSQL fails (default [`Failure::FailClosed`]).
    /// Fail-open needs `local_share` in `(0, 1]`; the fallback buckets keep
    /// each key's size and drain at `rate × local_share`.
    ///
    /// ```
    /// # use dripfeed::global::{Failure, PgBuckets};
    /// # use dripfeed::keyed::Quota;
    /// let b = PgBuckets::new(PgBuckets::pool("postgres://a@127.0.0.1/a", 1)?, "t", Quota::new(1.0, 1.0)?)?;
    /// let b = b.on_failure(Failure::FailOpen { local_share: 0.5 })?;
    /// assert!(!b.in_fallback());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn on_failure(mut self, failure: Failure) -> Result<Self, QuotaError> {
        self.fallback = match failure {
            Failure::FailOpen { local_share } => {
                if !(local_share > 0.0 && local_share <= 1.0) {
                    return Err(QuotaError::InvalidRate(local_share));
                }
                let table = KeyedBuckets::new(FALLBACK_KEYS, scaled(self.default, local_share)?)
                    .map_err(|_| QuotaError::InvalidRate(local_share))?;
                for (key, quota) in self.overrides_read().iter() {
                    let _ = table.set_quota(key.clone(), scaled(*quota, local_share)?);
                }
                Some(table)
            }
            Failure::FailClosed => None,
        };
        self.failure = failure;
        Ok(self)
    }

    /// How long calls skip PostgreSQL after a failure before one probes it
    /// again (default 1 s).
    ///
    /// ```
    /// # use dripfeed::global::PgBuckets;
    /// # use dripfeed::keyed::Quota;
    /// # use std::time::Duration;
    /// let b = PgBuckets::new(PgBuckets::pool("postgres://a@127.0.0.1/a", 1)?, "t", Quota::new(1.0, 1.0)?)?
    ///     .probe_interval(Duration::from_millis(200));
    /// assert!(!b.in_fallback());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn probe_interval(mut self, interval: Duration) -> Self {
        self.health.set_probe_interval(interval);
        self
    }

    /// Every `n`th admission (at least 1; default 64) also deletes up to
    /// `batch` rows (default 100) whose debt has drained to zero, in a
    /// background task, one batch at a time per handle.
    ///
    /// ```
    /// # use dripfeed::global::PgBuckets;
    /// # use dripfeed::keyed::Quota;
    /// let b = PgBuckets::new(PgBuckets::pool("postgres://a@127.0.0.1/a", 1)?, "t", Quota::new(1.0, 1.0)?)?
    ///     .prune_every(16, 50);
    /// assert_eq!(b.pruned(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn prune_every(mut self, n: u64, batch: u32) -> Self {
        self.prune_every = n.max(1);
        self.prune_batch = i64::from(batch.max(1));
        self
    }

    /// The table holding the buckets.
    ///
    /// ```
    /// # use dripfeed::global::PgBuckets;
    /// # use dripfeed::keyed::Quota;
    /// let b = PgBuckets::new(PgBuckets::pool("postgres://a@127.0.0.1/a", 1)?, "app.t", Quota::new(1.0, 1.0)?)?;
    /// assert_eq!(b.table(), "app.t");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Creates the table and its empty-at index if they do not exist (safe
    /// to run from many processes at once: it takes an advisory lock).
    ///
    /// ```no_run
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::PgBuckets;
    /// # use dripfeed::keyed::Quota;
    /// let b = PgBuckets::new(PgBuckets::pool("postgres://a@127.0.0.1/a", 1)?, "t", Quota::new(1.0, 1.0)?)?;
    /// b.migrate().await?;
    /// assert_eq!(b.rows().await?, 0);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn migrate(&self) -> Result<(), PgError> {
        let client = self.pool.get().await?;
        if let Err(e) = client.batch_execute(&self.sql.migrate).await {
            // Leave no failed transaction open on a pooled connection.
            let _ = client.batch_execute("ROLLBACK").await;
            return Err(e.into());
        }
        Ok(())
    }

    /// Admits `cost` for `key` iff `debt_now + cost <= size`, adding it to
    /// the key's debt; a refusal carries the exact wait
    /// ([`AdmitError::OverQuota`]).
    ///
    /// ```no_run
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::PgBuckets;
    /// # use dripfeed::keyed::Quota;
    /// let b = PgBuckets::new(PgBuckets::pool("postgres://a@127.0.0.1/a", 1)?, "t", Quota::new(3.0, 1.0)?)?;
    /// assert_eq!(b.try_admit("new-key", 2.0).await?.remaining(), 1.0);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn try_admit(&self, key: &str, cost: f64) -> Result<Admit, BucketError> {
        let quota = self.quota(key);
        check_cost(cost, &quota)?;
        let params: [&(dyn ToSql + Sync); 4] = [&key, &quota.size(), &quota.rate(), &cost];
        let row = match self.call(&self.sql.admit, &params).await {
            Ok(row) => row,
            Err(e) => {
                return match &self.fallback {
                    Some(local) => Ok(local.try_admit(&key.to_owned(), cost)?),
                    None => Err(e.into()),
                };
            }
        };
        self.maybe_prune();
        let row = row.ok_or_else(|| PgError::unexpected("no row from the upsert"))?;
        let was_admitted: bool = row.try_get(0).map_err(PgError::from)?;
        let after: f64 = row.try_get(1).map_err(PgError::from)?;
        if after.is_nan() || after < 0.0 {
            return Err(PgError::unexpected("negative debt").into());
        }
        if was_admitted {
            return Ok(admitted(after, &quota));
        }
        // A refusal stored the drained debt: the same decision, with its wait.
        match decide(after, cost, &quota) {
            Err(over) => Err(AdmitError::OverQuota(over).into()),
            Ok(_) => Err(PgError::unexpected("admission disagrees with the statement").into()),
        }
    }

    /// Whether [`try_admit`](Self::try_admit) would admit `cost` now, with
    /// the same errors; writes nothing.
    ///
    /// ```no_run
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::PgBuckets;
    /// # use dripfeed::keyed::Quota;
    /// let b = PgBuckets::new(PgBuckets::pool("postgres://a@127.0.0.1/a", 1)?, "t", Quota::new(3.0, 1.0)?)?;
    /// assert!(b.can_admit("quiet", 3.0).await.is_ok());
    /// assert_eq!(b.debt("quiet").await?, 0.0);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn can_admit(&self, key: &str, cost: f64) -> Result<(), BucketError> {
        let quota = self.quota(key);
        check_cost(cost, &quota)?;
        match self.debt_now(key, &quota).await {
            Ok(debt) => {
                decide(debt, cost, &quota).map_err(AdmitError::OverQuota)?;
                Ok(())
            }
            Err(e) => match &self.fallback {
                Some(local) => Ok(local.can_admit(&key.to_owned(), cost)?),
                None => Err(e.into()),
            },
        }
    }

    /// The key's debt now, as PostgreSQL holds it; 0 for a key with no row.
    ///
    /// ```no_run
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::PgBuckets;
    /// # use dripfeed::keyed::Quota;
    /// let b = PgBuckets::new(PgBuckets::pool("postgres://a@127.0.0.1/a", 1)?, "t", Quota::new(3.0, 1e-6)?)?;
    /// b.try_admit("k", 2.0).await?;
    /// assert!(b.debt("k").await? > 1.99);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn debt(&self, key: &str) -> Result<f64, PgError> {
        let quota = self.quota(key);
        self.debt_now(key, &quota).await
    }

    async fn debt_now(&self, key: &str, quota: &Quota) -> Result<f64, PgError> {
        let params: [&(dyn ToSql + Sync); 2] = [&key, &quota.rate()];
        match self.call(&self.sql.debt, &params).await? {
            None => Ok(0.0),
            Some(row) => {
                let debt: f64 = row.try_get(0)?;
                if debt >= 0.0 {
                    Ok(debt)
                } else {
                    Err(PgError::unexpected("negative debt"))
                }
            }
        }
    }

    /// Corrects an admitted `estimated` cost to the `actual` one (both finite
    /// and non-negative): a refund, or extra debt that may take the key above
    /// its size. Debt never goes below zero. Returns the new debt.
    ///
    /// ```no_run
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::PgBuckets;
    /// # use dripfeed::keyed::Quota;
    /// let b = PgBuckets::new(PgBuckets::pool("postgres://a@127.0.0.1/a", 1)?, "t", Quota::new(4.0, 1e-6)?)?;
    /// b.try_admit("job", 4.0).await?;
    /// assert!(b.settle("job", 4.0, 1.0).await? < 1.01);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn settle(&self, key: &str, estimated: f64, actual: f64) -> Result<f64, BucketError> {
        check_settle(estimated, actual).map_err(AdmitError::InvalidCost)?;
        let quota = self.quota(key);
        let params: [&(dyn ToSql + Sync); 4] = [&key, &quota.rate(), &estimated, &actual];
        match self.call(&self.sql.settle, &params).await {
            Ok(Some(row)) => Ok(row.try_get::<_, f64>(0).map_err(PgError::from)?),
            Ok(None) => Err(PgError::unexpected("no row from the settlement").into()),
            Err(e) => match &self.fallback {
                Some(local) => Ok(local
                    .settle(&key.to_owned(), estimated, actual)
                    .map_err(AdmitError::InvalidCost)?),
                None => Err(e.into()),
            },
        }
    }

    /// Deletes up to `batch` rows whose debt has drained to zero, now;
    /// returns how many. Admissions do this on their own (see
    /// [`prune_every`](Self::prune_every)).
    ///
    /// ```no_run
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::PgBuckets;
    /// # use dripfeed::keyed::Quota;
    /// let b = PgBuckets::new(PgBuckets::pool("postgres://a@127.0.0.1/a", 1)?, "t", Quota::new(1.0, 1.0)?)?;
    /// assert!(b.prune(1000).await? <= 1000);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn prune(&self, batch: u32) -> Result<u64, PgError> {
        prune(
            &self.pool,
            &self.sql.prune,
            i64::from(batch),
            self.call_timeout,
        )
        .await
    }

    /// Rows the amortised pruning of this handle has deleted so far.
    ///
    /// ```
    /// # use dripfeed::global::PgBuckets;
    /// # use dripfeed::keyed::Quota;
    /// let b = PgBuckets::new(PgBuckets::pool("postgres://a@127.0.0.1/a", 1)?, "t", Quota::new(1.0, 1.0)?)?;
    /// assert_eq!(b.pruned(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pruned(&self) -> u64 {
        self.pruned.load(Ordering::Relaxed)
    }

    /// Rows in the table, drained or not.
    ///
    /// ```no_run
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::PgBuckets;
    /// # use dripfeed::keyed::Quota;
    /// let b = PgBuckets::new(PgBuckets::pool("postgres://a@127.0.0.1/a", 1)?, "t", Quota::new(1.0, 1.0)?)?;
    /// b.try_admit("k", 1.0).await?;
    /// assert!(b.rows().await? >= 1);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn rows(&self) -> Result<u64, PgError> {
        let row = self
            .call(&self.sql.rows, &[])
            .await?
            .ok_or_else(|| PgError::unexpected("no count"))?;
        let n: i64 = row.try_get(0)?;
        u64::try_from(n).map_err(|_| PgError::unexpected("negative count"))
    }

    /// Whether PostgreSQL is considered down (the failure mode applies).
    ///
    /// ```
    /// # use dripfeed::global::PgBuckets;
    /// # use dripfeed::keyed::Quota;
    /// let b = PgBuckets::new(PgBuckets::pool("postgres://a@127.0.0.1/a", 1)?, "t", Quota::new(1.0, 1.0)?)?;
    /// assert!(!b.in_fallback());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn in_fallback(&self) -> bool {
        self.health.is_down()
    }

    /// Gives `key` its own quota (on this handle: set the same on every
    /// process sharing the table).
    ///
    /// ```
    /// # use dripfeed::global::PgBuckets;
    /// # use dripfeed::keyed::Quota;
    /// let b = PgBuckets::new(PgBuckets::pool("postgres://a@127.0.0.1/a", 1)?, "t", Quota::new(1.0, 1.0)?)?;
    /// b.set_quota("vip", Quota::new(100.0, 10.0)?);
    /// assert_eq!(b.quota("vip").size(), 100.0);
    /// assert!(b.clear_quota("vip"));
    /// assert_eq!(b.quota("vip").size(), 1.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_quota(&self, key: impl Into<String>, quota: Quota) {
        let key = key.into();
        if let (Some(local), Failure::FailOpen { local_share }) = (&self.fallback, self.failure)
            && let Ok(q) = scaled(quota, local_share)
            && local.set_quota(key.clone(), q).is_err()
        {
            tracing::warn!(table = %self.table, "fail-open fallback: too many quota overrides");
        }
        let mut map = match self.overrides.write() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        map.insert(key, quota);
    }

    /// Puts `key` back on the default quota; true if it had its own.
    ///
    /// ```
    /// # use dripfeed::global::PgBuckets;
    /// # use dripfeed::keyed::Quota;
    /// let b = PgBuckets::new(PgBuckets::pool("postgres://a@127.0.0.1/a", 1)?, "t", Quota::new(1.0, 1.0)?)?;
    /// assert!(!b.clear_quota("nobody"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clear_quota(&self, key: &str) -> bool {
        if let Some(local) = &self.fallback {
            local.clear_quota(&key.to_owned());
        }
        let mut map = match self.overrides.write() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        map.remove(key).is_some()
    }

    /// The quota that applies to `key`.
    ///
    /// ```
    /// # use dripfeed::global::PgBuckets;
    /// # use dripfeed::keyed::Quota;
    /// let b = PgBuckets::new(PgBuckets::pool("postgres://a@127.0.0.1/a", 1)?, "t", Quota::new(2.0, 1.0)?)?;
    /// assert_eq!(b.quota("any").rate(), 1.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn quota(&self, key: &str) -> Quota {
        self.overrides_read()
            .get(key)
            .copied()
            .unwrap_or(self.default)
    }

    fn overrides_read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Quota>> {
        match self.overrides.read() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// One prepared statement on a pooled connection, bounded in time; the
    /// store's health follows the outcome.
    async fn call(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, PgError> {
        if !self.health.should_try() {
            return Err(PgError::new(
                "postgres unavailable after a failure, waiting to probe again".to_owned(),
            ));
        }
        let attempt = async {
            let client = self.pool.get().await?;
            let statement = client.prepare_cached(sql).await?;
            Ok::<_, PgError>(client.query_opt(&statement, params).await?)
        };
        let result = match tokio::time::timeout(self.call_timeout, attempt).await {
            Ok(r) => r,
            Err(_) => Err(PgError::timeout()),
        };
        match &result {
            Ok(_) => self.health.succeeded(),
            Err(e) => {
                tracing::debug!(table = %self.table, error = %e, "postgres call failed");
                self.health.failed();
            }
        }
        result
    }

    /// Starts a background prune on every `prune_every`th admission, unless
    /// one is running.
    fn maybe_prune(&self) {
        let n = self.admissions.fetch_add(1, Ordering::Relaxed) + 1;
        if !n.is_multiple_of(self.prune_every) || self.pruning.swap(true, Ordering::AcqRel) {
            return;
        }
        let (pool, sql) = (self.pool.clone(), Arc::clone(&self.sql));
        let (pruning, pruned) = (Arc::clone(&self.pruning), Arc::clone(&self.pruned));
        let (batch, limit) = (self.prune_batch, self.call_timeout);
        tokio::spawn(async move {
            match prune(&pool, &sql.prune, batch, limit).await {
                Ok(n) => {
                    pruned.fetch_add(n, Ordering::Relaxed);
                }
                Err(e) => tracing::debug!(error = %e, "postgres prune failed"),
            }
            pruning.store(false, Ordering::Release);
        });
    }
}

/// Deletes up to `batch` drained rows in one statement.
async fn prune(pool: &Pool, sql: &str, batch: i64, limit: Duration) -> Result<u64, PgError> {
    let attempt = async {
        let client = pool.get().await?;
        let statement = client.prepare_cached(sql).await?;
        Ok::<_, PgError>(client.execute(&statement, &[&batch]).await?)
    };
    match tokio::time::timeout(limit, attempt).await {
        Ok(r) => r,
        Err(_) => Err(PgError::timeout()),
    }
}

/// `quota` draining at `share` of its rate.
fn scaled(quota: Quota, share: f64) -> Result<Quota, QuotaError> {
    Quota::new(quota.size(), quota.rate() * share)
}

impl fmt::Debug for PgBuckets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgBuckets")
            .field("table", &self.table)
            .field("default", &self.default)
            .field("failure", &self.failure)
            .finish()
    }
}
