//! [`RedisBuckets`]: the per-key reverse leaky buckets of
//! [`KeyedBuckets`](crate::keyed::KeyedBuckets), shared by a fleet through Redis.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use redis::Script;

use super::Failure;
use super::conn::{RedisConnection, RedisError, array, bounded, number};
use super::fallback::Fallback;
use crate::keyed::bucket::{check_cost, check_positive, check_settle, decide};
use crate::keyed::{Admit, AdmitError, BucketError, BucketStore, Quota, QuotaError};

/// The script, made once and shared by every instance (it holds its Lua
/// source: one copy per instance would cost kilobytes each).
static BUCKET: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(include_str!("scripts/bucket.lua")));

/// Per-key reverse leaky buckets held in Redis, with the semantics of
/// [`KeyedBuckets`](crate::keyed::KeyedBuckets): each key's bucket holds debt that
/// drains at the key's rate; a cost is admitted iff `debt_now + cost <=
/// size`; a refusal says exactly how long to wait; a cost above the size is
/// an error, never an endless 429.
///
/// Each call is one atomic Lua script on one key, using the server's `TIME`.
/// Keys are hash-tagged per bucket (`{prefix:key}`) so a Redis Cluster
/// spreads them across slots, and each expires when its debt reaches zero,
/// so Redis holds only buckets that matter. A key's quota override is a
/// hash beside its bucket (`{prefix:key}:quota`, same slot), read by the
/// same script, so every node of the fleet sees it; it stays until
/// [`clear_quota`](BucketStore::clear_quota).
///
/// When Redis fails, the [`Failure`] mode decides, as for
/// `PgBuckets`: fail-closed (the default) returns
/// [`BucketError::Unavailable`]; fail-open admits through in-memory buckets
/// draining at `rate × local_share`. Failed calls count in
/// `leaky_bucket_global_errors_total` and `leaky_bucket_global_fallback` is 1
/// until a probe succeeds (label `throttle` = the prefix).
///
/// The operations are those of [`BucketStore`]; bring the trait into scope.
///
/// ```no_run
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use dripfeed::global::{RedisBuckets, RedisConnection};
/// use dripfeed::keyed::{AdmitError, BucketStore, Quota};
///
/// let conn = RedisConnection::open("redis://127.0.0.1:6379/")?;
/// let tenants = RedisBuckets::new(conn, "tenants", Quota::per_second(2.0).burst(10.0)?);
/// assert!(tenants.try_admit("acme", 8.0).await.is_ok());
/// match tenants.try_admit("acme", 4.0).await {
///     Err(e) => assert!(matches!(e.as_admit(), Some(AdmitError::OverQuota(_)))),
///     Ok(_) => unreachable!("only 2 units left"),
/// }
/// # Ok(())
/// # }
/// ```
pub struct RedisBuckets {
    conn: RedisConnection,
    script: &'static Script,
    prefix: String,
    default: Quota,
    call_timeout: Duration,
    fallback: Fallback,
}

/// One script answer.
struct Answer {
    written: bool,
    debt_now: f64,
    after: f64,
    /// The key's quota: its override or the default.
    quota: Quota,
}

impl RedisBuckets {
    /// Buckets under the key prefix `prefix`, each with `default_quota`
    /// unless [`set_quota`](BucketStore::set_quota) says otherwise;
    /// fail-closed.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::global::{RedisBuckets, RedisConnection};
    /// use dripfeed::keyed::Quota;
    /// let conn = RedisConnection::open("redis://127.0.0.1:1/")?;
    /// let b = RedisBuckets::new(conn, "ip", Quota::per_second(1.0).burst(5.0)?);
    /// assert_eq!(b.redis_key("10.0.0.1"), "{ip:10.0.0.1}");
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(conn: RedisConnection, prefix: impl Into<String>, default_quota: Quota) -> Self {
        let prefix = prefix.into();
        Self {
            conn: conn.counted_as("quota"),
            script: &BUCKET,
            fallback: Fallback::new("redis", &prefix, default_quota),
            prefix,
            default: default_quota,
            call_timeout: Duration::from_millis(250),
        }
    }

    /// How long one call may take before it fails (default 250 ms).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::{RedisBuckets, RedisConnection};
    /// # use dripfeed::keyed::Quota;
    /// # use std::time::Duration;
    /// let b = RedisBuckets::new(RedisConnection::open("redis://127.0.0.1:1/")?, "k", Quota::per_second(1.0).burst(1.0)?)
    ///     .call_timeout(Duration::from_millis(100));
    /// assert!(!b.in_fallback());
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// What happens while Redis fails (default [`Failure::FailClosed`]).
    /// Fail-open needs `local_share` in `(0, 1]`; the fallback buckets keep
    /// each key's size (its override, as Redis last gave it) and drain at
    /// `rate × local_share`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::{Failure, RedisBuckets, RedisConnection};
    /// # use dripfeed::keyed::Quota;
    /// let b = RedisBuckets::new(RedisConnection::open("redis://127.0.0.1:1/")?, "k", Quota::per_second(1.0).burst(1.0)?)
    ///     .on_failure(Failure::FailOpen { local_share: 0.5 })?;
    /// assert!(!b.in_fallback());
    /// # Ok(())
    /// # }
    /// ```
    pub fn on_failure(mut self, failure: Failure) -> Result<Self, QuotaError> {
        self.fallback.set_failure(failure)?;
        Ok(self)
    }

    /// How long calls skip Redis after a failure before one probes it
    /// again (default 1 s).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::{RedisBuckets, RedisConnection};
    /// # use dripfeed::keyed::Quota;
    /// # use std::time::Duration;
    /// let b = RedisBuckets::new(RedisConnection::open("redis://127.0.0.1:1/")?, "k", Quota::per_second(1.0).burst(1.0)?)
    ///     .probe_interval(Duration::from_millis(200));
    /// assert!(!b.in_fallback());
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn probe_interval(mut self, interval: Duration) -> Self {
        self.fallback.set_probe_interval(interval);
        self
    }

    /// Whether Redis is considered down (the failure mode applies).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::{RedisBuckets, RedisConnection};
    /// # use dripfeed::keyed::Quota;
    /// let b = RedisBuckets::new(RedisConnection::open("redis://127.0.0.1:1/")?, "k", Quota::per_second(1.0).burst(1.0)?);
    /// assert!(!b.in_fallback());
    /// # Ok(())
    /// # }
    /// ```
    pub fn in_fallback(&self) -> bool {
        self.fallback.is_down()
    }

    /// The Redis key of `key`'s bucket: `{prefix:key}`, one hash slot each.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::{RedisBuckets, RedisConnection};
    /// # use dripfeed::keyed::Quota;
    /// let b = RedisBuckets::new(RedisConnection::open("redis://127.0.0.1:1/")?, "t", Quota::per_second(1.0).burst(1.0)?);
    /// assert_eq!(b.redis_key("acme"), "{t:acme}");
    /// # Ok(())
    /// # }
    /// ```
    pub fn redis_key(&self, key: &str) -> String {
        format!("{{{}:{}}}", self.prefix, key)
    }

    /// One script call on `key`, bounded in time, guarded by the store's
    /// health. `quota` is the default (or the override for `set`).
    async fn call(
        &self,
        key: &str,
        op: &str,
        quota: &Quota,
        cost: f64,
        actual: f64,
    ) -> Result<Answer, crate::keyed::StoreFailure> {
        let bucket = self.redis_key(key);
        let own = format!("{bucket}:quota");
        let attempt = async {
            let mut conn = self.conn.clone();
            let mut invocation = self.script.prepare_invoke();
            invocation
                .key(bucket)
                .key(own)
                .arg(op)
                .arg(quota.size())
                .arg(quota.rate())
                .arg(cost)
                .arg(actual);
            let answer: redis::Value =
                bounded(invocation.invoke_async(&mut conn), self.call_timeout).await?;
            answer_of(answer)
        };
        self.fallback
            .guard(async { attempt.await.map_err(|e| e.to_string()) })
            .await
    }

    /// A call whose answer also tells fail-open the key's quota.
    async fn call_learning(
        &self,
        key: &str,
        op: &str,
        cost: f64,
        actual: f64,
    ) -> Result<Answer, crate::keyed::StoreFailure> {
        let answer = self.call(key, op, &self.default, cost, actual).await?;
        self.fallback.learn(key, answer.quota);
        Ok(answer)
    }
}

/// Reads the script's five answers.
fn answer_of(answer: redis::Value) -> Result<Answer, RedisError> {
    let items = array(answer, 5, "bucket script")?;
    let written = number(&items[0], "written")? > 0.0;
    let debt_now = number(&items[1], "debt")?;
    let after = number(&items[2], "debt after")?;
    let quota = Quota::per_second(number(&items[4], "rate")?)
        .burst(number(&items[3], "size")?)
        .map_err(|_| RedisError::unexpected("bad quota"))?;
    if !(debt_now >= 0.0 && after >= 0.0) {
        return Err(RedisError::unexpected("negative debt"));
    }
    Ok(Answer {
        written,
        debt_now,
        after,
        quota,
    })
}

#[async_trait]
impl BucketStore for RedisBuckets {
    fn default_quota(&self) -> Quota {
        self.default
    }

    async fn try_admit(&self, key: &str, cost: f64) -> Result<Admit, BucketError> {
        // The size is the answer's (the key may have an override): it is
        // checked against it before a decision is taken from it (the script
        // never admits a cost above the size).
        check_positive(cost).map_err(AdmitError::InvalidCost)?;
        let answer = match self.call_learning(key, "admit", cost, 0.0).await {
            Ok(a) => a,
            Err(down) => {
                return self
                    .fallback
                    .or_local(down, key, |t, k| Ok(t.try_admit(k, cost)?));
            }
        };
        check_cost(cost, &answer.quota)?;
        match decide(answer.debt_now, cost, &answer.quota) {
            Ok(admit) if answer.written => Ok(admit),
            Err(over) if !answer.written => Err(AdmitError::OverQuota(over).into()),
            _ => Err(crate::keyed::StoreFailure::new(
                "redis",
                "admission disagrees with the script",
            )
            .into()),
        }
    }

    async fn can_admit(&self, key: &str, cost: f64) -> Result<(), BucketError> {
        check_positive(cost).map_err(AdmitError::InvalidCost)?;
        let answer = match self.call_learning(key, "check", cost, 0.0).await {
            Ok(a) => a,
            Err(down) => {
                return self
                    .fallback
                    .or_local(down, key, |t, k| Ok(t.can_admit(k, cost)?));
            }
        };
        check_cost(cost, &answer.quota)?;
        decide(answer.debt_now, cost, &answer.quota).map_err(AdmitError::OverQuota)?;
        Ok(())
    }

    async fn debt(&self, key: &str) -> Result<f64, BucketError> {
        match self.call_learning(key, "check", 0.0, 0.0).await {
            Ok(a) => Ok(a.debt_now),
            Err(down) => self.fallback.or_local(down, key, |t, k| Ok(t.debt(k))),
        }
    }

    async fn settle(&self, key: &str, estimated: f64, actual: f64) -> Result<f64, BucketError> {
        check_settle(estimated, actual).map_err(AdmitError::InvalidCost)?;
        match self.call_learning(key, "settle", estimated, actual).await {
            Ok(a) => Ok(a.after),
            Err(down) => self.fallback.or_local(down, key, |t, k| {
                t.settle(k, estimated, actual)
                    .map_err(|e| AdmitError::InvalidCost(e).into())
            }),
        }
    }

    async fn set_quota(&self, key: &str, quota: Quota) -> Result<(), BucketError> {
        self.call(key, "set", &quota, 0.0, 0.0).await?;
        self.fallback.learn(key, quota);
        Ok(())
    }

    async fn clear_quota(&self, key: &str) -> Result<bool, BucketError> {
        let answer = self.call(key, "clear", &self.default, 0.0, 0.0).await?;
        self.fallback.learn(key, self.default);
        Ok(answer.written)
    }

    async fn quota(&self, key: &str) -> Result<Quota, BucketError> {
        Ok(self.call_learning(key, "check", 0.0, 0.0).await?.quota)
    }
}

impl fmt::Debug for RedisBuckets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisBuckets")
            .field("prefix", &self.prefix)
            .field("default", &self.default)
            .field("failure", &self.fallback.failure())
            .finish()
    }
}
