//! [`PgBuckets`]: the per-key reverse leaky buckets of
//! [`KeyedBuckets`](crate::keyed::KeyedBuckets), shared through one PostgreSQL
//! table.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::fallback::Fallback;
use super::pg_sql::{Statements, valid_table};
use super::{Failure, PgError};
use crate::keyed::bucket::{admitted, check_cost, check_positive, check_settle, decide};
use crate::keyed::{Admit, AdmitError, BucketError, BucketStore, Quota, QuotaError, StoreFailure};

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
/// sweeper task exists. A key's quota override is a row of a second, logged
/// table (`<table>_quotas`), read by the same statements, so every process
/// sharing the table sees it; it stays until
/// [`clear_quota`](BucketStore::clear_quota).
///
/// When PostgreSQL fails, the [`Failure`] mode decides: fail-closed (the
/// default) returns [`BucketError::Unavailable`]; fail-open admits through
/// in-memory buckets draining at `rate × local_share`. Failed calls count in
/// `leaky_bucket_global_errors_total` and `leaky_bucket_global_fallback` is 1
/// until a probe succeeds (label `throttle` = the table name).
///
/// ```no_run
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use dripfeed::global::PgBuckets;
/// use dripfeed::keyed::{AdmitError, BucketStore, Quota};
///
/// let pool = PgBuckets::pool("postgres://app@127.0.0.1/app", 8)?;
/// let tenants = PgBuckets::new(pool, "dripfeed_tenants", Quota::per_second(2.0).burst(10.0)?)?;
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
    call_timeout: Duration,
    fallback: Fallback,
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
    /// let b = PgBuckets::new(pool.clone(), "ip_buckets", Quota::per_second(1.0).burst(5.0)?)?;
    /// assert_eq!(b.table(), "ip_buckets");
    /// assert!(PgBuckets::new(pool, "bad name; --", Quota::per_second(1.0).burst(5.0)?).is_err());
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
            call_timeout: Duration::from_millis(500),
            fallback: Fallback::new("postgres", table, default_quota),
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
    /// let b = PgBuckets::new(PgBuckets::pool("postgres://a@127.0.0.1/a", 1)?, "t", Quota::per_second(1.0).burst(1.0)?)?
    ///     .call_timeout(Duration::from_millis(100));
    /// assert_eq!(b.table(), "t");
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
    /// let b = PgBuckets::new(PgBuckets::pool("postgres://a@127.0.0.1/a", 1)?, "t", Quota::per_second(1.0).burst(1.0)?)?;
    /// let b = b.on_failure(Failure::FailOpen { local_share: 0.5 })?;
    /// assert!(!b.in_fallback());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn on_failure(mut self, failure: Failure) -> Result<Self, QuotaError> {
        self.fallback.set_failure(failure)?;
        Ok(self)
    }

    /// How long calls skip PostgreSQL after a failure before one probes it
    /// again (default 1 s).
    ///
    /// ```
    /// # use dripfeed::global::PgBuckets;
    /// # use dripfeed::keyed::Quota;
    /// # use std::time::Duration;
    /// let b = PgBuckets::new(PgBuckets::pool("postgres://a@127.0.0.1/a", 1)?, "t", Quota::per_second(1.0).burst(1.0)?)?
    ///     .probe_interval(Duration::from_millis(200));
    /// assert!(!b.in_fallback());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn probe_interval(mut self, interval: Duration) -> Self {
        self.fallback.set_probe_interval(interval);
        self
    }

    /// Every `n`th admission (at least 1; default 64) also deletes up to
    /// `batch` rows (default 100) whose debt has drained to zero, in a
    /// background task, one batch at a time per handle.
    ///
    /// ```
    /// # use dripfeed::global::PgBuckets;
    /// # use dripfeed::keyed::Quota;
    /// let b = PgBuckets::new(PgBuckets::pool("postgres://a@127.0.0.1/a", 1)?, "t", Quota::per_second(1.0).burst(1.0)?)?
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
    /// let b = PgBuckets::new(PgBuckets::pool("postgres://a@127.0.0.1/a", 1)?, "app.t", Quota::per_second(1.0).burst(1.0)?)?;
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
    /// let b = PgBuckets::new(PgBuckets::pool("postgres://a@127.0.0.1/a", 1)?, "t", Quota::per_second(1.0).burst(1.0)?)?;
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

    /// Deletes up to `batch` rows whose debt has drained to zero, now;
    /// returns how many. Admissions do this on their own (see
    /// [`prune_every`](Self::prune_every)).
    ///
    /// ```no_run
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::PgBuckets;
    /// # use dripfeed::keyed::Quota;
    /// let b = PgBuckets::new(PgBuckets::pool("postgres://a@127.0.0.1/a", 1)?, "t", Quota::per_second(1.0).burst(1.0)?)?;
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
    /// let b = PgBuckets::new(PgBuckets::pool("postgres://a@127.0.0.1/a", 1)?, "t", Quota::per_second(1.0).burst(1.0)?)?;
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
    /// # use dripfeed::keyed::{BucketStore, Quota};
    /// let b = PgBuckets::new(PgBuckets::pool("postgres://a@127.0.0.1/a", 1)?, "t", Quota::per_second(1.0).burst(1.0)?)?;
    /// b.try_admit("k", 1.0).await?;
    /// assert!(b.rows().await? >= 1);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn rows(&self) -> Result<u64, PgError> {
        let row = self
            .call(&self.sql.rows, &[])
            .await
            .map_err(|f| PgError::new(f.detail().to_owned()))?
            .ok_or_else(|| PgError::unexpected("no count"))?;
        let n: i64 = row.try_get(0)?;
        u64::try_from(n).map_err(|_| PgError::unexpected("negative count"))
    }

    /// Whether PostgreSQL is considered down (the failure mode applies).
    ///
    /// ```
    /// # use dripfeed::global::PgBuckets;
    /// # use dripfeed::keyed::Quota;
    /// let b = PgBuckets::new(PgBuckets::pool("postgres://a@127.0.0.1/a", 1)?, "t", Quota::per_second(1.0).burst(1.0)?)?;
    /// assert!(!b.in_fallback());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn in_fallback(&self) -> bool {
        self.fallback.is_down()
    }

    /// One prepared statement on a pooled connection, bounded in time and
    /// guarded by the store's health.
    async fn call(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, StoreFailure> {
        let attempt = async {
            let client = self.pool.get().await?;
            let statement = client.prepare_cached(sql).await?;
            Ok::<_, PgError>(client.query_opt(&statement, params).await?)
        };
        self.fallback
            .guard(async {
                match tokio::time::timeout(self.call_timeout, attempt).await {
                    Ok(r) => r.map_err(|e| e.to_string()),
                    Err(_) => Err(PgError::timeout().to_string()),
                }
            })
            .await
    }

    /// A bucket statement returning `(…, size, rate)` from column `at` on:
    /// the row and the key's quota, which fail-open learns.
    async fn bucket_call(
        &self,
        key: &str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        at: usize,
    ) -> Result<(Row, Quota), StoreFailure> {
        let row = self
            .call(sql, params)
            .await?
            .ok_or_else(|| unexpected("no row from a bucket statement"))?;
        let size: f64 = row.try_get(at).map_err(|e| unexpected(&e.to_string()))?;
        let rate: f64 = row
            .try_get(at + 1)
            .map_err(|e| unexpected(&e.to_string()))?;
        let quota = Quota::per_second(rate)
            .burst(size)
            .map_err(|_| unexpected("bad quota"))?;
        self.fallback.learn(key, quota);
        Ok((row, quota))
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

/// An answer PostgreSQL gave that dripfeed did not expect.
fn unexpected(what: &str) -> StoreFailure {
    StoreFailure::new("postgres", PgError::unexpected(what).to_string())
}

/// A column of a bucket statement's row.
fn column(row: &Row, at: usize) -> Result<f64, StoreFailure> {
    let v: f64 = row.try_get(at).map_err(|e| unexpected(&e.to_string()))?;
    if v.is_nan() || v < 0.0 {
        return Err(unexpected("negative debt"));
    }
    Ok(v)
}

#[async_trait]
impl BucketStore for PgBuckets {
    fn default_quota(&self) -> Quota {
        self.default
    }

    async fn try_admit(&self, key: &str, cost: f64) -> Result<Admit, BucketError> {
        check_positive(cost).map_err(AdmitError::InvalidCost)?;
        let (size, rate) = (self.default.size(), self.default.rate());
        let params: [&(dyn ToSql + Sync); 4] = [&key, &size, &rate, &cost];
        let (row, quota) = match self.bucket_call(key, &self.sql.admit, &params, 2).await {
            Ok(answer) => answer,
            Err(down) => {
                return self
                    .fallback
                    .or_local(down, key, |t, k| Ok(t.try_admit(k, cost)?));
            }
        };
        self.maybe_prune();
        check_cost(cost, &quota)?;
        let was_admitted: bool = row.try_get(0).map_err(|e| unexpected(&e.to_string()))?;
        let after = column(&row, 1)?;
        if was_admitted {
            return Ok(admitted(after, &quota));
        }
        // A refusal stored the drained debt: the same decision, with its wait.
        match decide(after, cost, &quota) {
            Err(over) => Err(AdmitError::OverQuota(over).into()),
            Ok(_) => Err(unexpected("admission disagrees with the statement").into()),
        }
    }

    async fn can_admit(&self, key: &str, cost: f64) -> Result<(), BucketError> {
        check_positive(cost).map_err(AdmitError::InvalidCost)?;
        let (size, rate) = (self.default.size(), self.default.rate());
        let params: [&(dyn ToSql + Sync); 3] = [&key, &size, &rate];
        match self.bucket_call(key, &self.sql.debt, &params, 1).await {
            Ok((row, quota)) => {
                check_cost(cost, &quota)?;
                decide(column(&row, 0)?, cost, &quota).map_err(AdmitError::OverQuota)?;
                Ok(())
            }
            Err(down) => self
                .fallback
                .or_local(down, key, |t, k| Ok(t.can_admit(k, cost)?)),
        }
    }

    async fn debt(&self, key: &str) -> Result<f64, BucketError> {
        let (size, rate) = (self.default.size(), self.default.rate());
        let params: [&(dyn ToSql + Sync); 3] = [&key, &size, &rate];
        match self.bucket_call(key, &self.sql.debt, &params, 1).await {
            Ok((row, _)) => Ok(column(&row, 0)?),
            Err(down) => self.fallback.or_local(down, key, |t, k| Ok(t.debt(k))),
        }
    }

    async fn settle(&self, key: &str, estimated: f64, actual: f64) -> Result<f64, BucketError> {
        check_settle(estimated, actual).map_err(AdmitError::InvalidCost)?;
        let (size, rate) = (self.default.size(), self.default.rate());
        let params: [&(dyn ToSql + Sync); 5] = [&key, &size, &rate, &estimated, &actual];
        match self.bucket_call(key, &self.sql.settle, &params, 1).await {
            Ok((row, _)) => Ok(column(&row, 0)?),
            Err(down) => self.fallback.or_local(down, key, |t, k| {
                t.settle(k, estimated, actual)
                    .map_err(|e| AdmitError::InvalidCost(e).into())
            }),
        }
    }

    async fn set_quota(&self, key: &str, quota: Quota) -> Result<(), BucketError> {
        let (size, rate) = (quota.size(), quota.rate());
        let params: [&(dyn ToSql + Sync); 3] = [&key, &size, &rate];
        self.call(&self.sql.set_quota, &params).await?;
        self.fallback.learn(key, quota);
        Ok(())
    }

    async fn clear_quota(&self, key: &str) -> Result<bool, BucketError> {
        let params: [&(dyn ToSql + Sync); 1] = [&key];
        let removed = self.call(&self.sql.clear_quota, &params).await?.is_some();
        self.fallback.learn(key, self.default);
        Ok(removed)
    }

    async fn quota(&self, key: &str) -> Result<Quota, BucketError> {
        let (size, rate) = (self.default.size(), self.default.rate());
        let params: [&(dyn ToSql + Sync); 3] = [&key, &size, &rate];
        Ok(self.bucket_call(key, &self.sql.debt, &params, 1).await?.1)
    }
}

impl fmt::Debug for PgBuckets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgBuckets")
            .field("table", &self.table)
            .field("default", &self.default)
            .field("failure", &self.fallback.failure())
            .finish()
    }
}
