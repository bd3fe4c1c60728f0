//! [`RedisBuckets`]: the per-key reverse leaky buckets of
//! [`KeyedBuckets`](crate::keyed::KeyedBuckets), shared by a fleet through Redis.

use std::collections::HashMap;
use std::fmt;
use std::sync::RwLock;
use std::time::Duration;

use redis::Script;

use super::BucketError;
use super::conn::{RedisConnection, RedisError, array, bounded, number};
use crate::keyed::bucket::{check_cost, check_settle, decide};
use crate::keyed::{Admit, AdmitError, Quota};

/// Per-key reverse leaky buckets held in Redis, with the semantics of
/// [`KeyedBuckets`](crate::keyed::KeyedBuckets): each key's bucket holds debt that
/// drains at the key's rate; a cost is admitted iff `debt_now + cost <=
/// size`; a refusal says exactly how long to wait; a cost above the size is
/// an error, never an endless 429.
///
/// Each call is one atomic Lua script on one key, using the server's `TIME`.
/// Keys are hash-tagged per bucket (`{prefix:key}`) so a Redis Cluster
/// spreads them across slots, and each expires when its debt reaches zero,
/// so Redis holds only buckets that matter. Quotas per key are set on this
/// handle; every node of the fleet must set the same ones.
///
/// ```no_run
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use dripfeed::global::{RedisBuckets, RedisConnection};
/// use dripfeed::keyed::{AdmitError, Quota};
///
/// let conn = RedisConnection::open("redis://127.0.0.1:6379/")?;
/// let tenants = RedisBuckets::new(conn, "tenants", Quota::new(10.0, 2.0)?);
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
    script: Script,
    prefix: String,
    default: Quota,
    overrides: RwLock<HashMap<String, Quota>>,
    call_timeout: Duration,
}

/// One script answer.
struct Answer {
    written: bool,
    debt_now: f64,
    after: f64,
}

impl RedisBuckets {
    /// Buckets under the key prefix `prefix`, each with `default_quota`
    /// unless [`set_quota`](Self::set_quota) says otherwise.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::global::{RedisBuckets, RedisConnection};
    /// use dripfeed::keyed::Quota;
    /// let conn = RedisConnection::open("redis://127.0.0.1:1/")?;
    /// let b = RedisBuckets::new(conn, "ip", Quota::new(5.0, 1.0)?);
    /// assert_eq!(b.redis_key("10.0.0.1"), "{ip:10.0.0.1}");
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(conn: RedisConnection, prefix: impl Into<String>, default_quota: Quota) -> Self {
        Self {
            conn,
            script: Script::new(include_str!("scripts/bucket.lua")),
            prefix: prefix.into(),
            default: default_quota,
            overrides: RwLock::new(HashMap::new()),
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
    /// let b = RedisBuckets::new(RedisConnection::open("redis://127.0.0.1:1/")?, "k", Quota::new(1.0, 1.0)?)
    ///     .call_timeout(Duration::from_millis(100));
    /// assert_eq!(b.quota("x").size(), 1.0);
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// The Redis key of `key`'s bucket: `{prefix:key}`, one hash slot each.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::{RedisBuckets, RedisConnection};
    /// # use dripfeed::keyed::Quota;
    /// let b = RedisBuckets::new(RedisConnection::open("redis://127.0.0.1:1/")?, "t", Quota::new(1.0, 1.0)?);
    /// assert_eq!(b.redis_key("acme"), "{t:acme}");
    /// # Ok(())
    /// # }
    /// ```
    pub fn redis_key(&self, key: &str) -> String {
        format!("{{{}:{}}}", self.prefix, key)
    }

    /// Admits `cost` for `key` iff `debt_now + cost <= size`, adding it to
    /// the key's debt; a refusal changes nothing and carries the exact wait
    /// ([`AdmitError::OverQuota`]).
    ///
    /// ```no_run
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::{RedisBuckets, RedisConnection};
    /// # use dripfeed::keyed::Quota;
    /// let b = RedisBuckets::new(RedisConnection::open("redis://127.0.0.1/")?, "t", Quota::new(3.0, 1.0)?);
    /// assert_eq!(b.try_admit("new-key", 2.0).await?.remaining(), 1.0);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn try_admit(&self, key: &str, cost: f64) -> Result<Admit, BucketError> {
        let quota = self.quota(key);
        check_cost(cost, &quota)?;
        let answer = self.call(key, "admit", &quota, cost, 0.0).await?;
        match decide(answer.debt_now, cost, &quota) {
            Ok(admit) if answer.written => Ok(admit),
            Err(over) if !answer.written => Err(AdmitError::OverQuota(over).into()),
            _ => Err(RedisError::unexpected("admission disagrees with the script").into()),
        }
    }

    /// Whether [`try_admit`](Self::try_admit) would admit `cost` now, with
    /// the same errors; writes nothing.
    ///
    /// ```no_run
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::{RedisBuckets, RedisConnection};
    /// # use dripfeed::keyed::Quota;
    /// let b = RedisBuckets::new(RedisConnection::open("redis://127.0.0.1/")?, "t", Quota::new(3.0, 1.0)?);
    /// assert!(b.can_admit("quiet", 3.0).await.is_ok());
    /// assert_eq!(b.debt("quiet").await?, 0.0);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn can_admit(&self, key: &str, cost: f64) -> Result<(), BucketError> {
        let quota = self.quota(key);
        check_cost(cost, &quota)?;
        let answer = self.call(key, "check", &quota, cost, 0.0).await?;
        decide(answer.debt_now, cost, &quota).map_err(AdmitError::OverQuota)?;
        Ok(())
    }

    /// The key's debt now; 0 for a key with no bucket.
    ///
    /// ```no_run
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::{RedisBuckets, RedisConnection};
    /// # use dripfeed::keyed::Quota;
    /// let b = RedisBuckets::new(RedisConnection::open("redis://127.0.0.1/")?, "t", Quota::new(3.0, 1e-6)?);
    /// b.try_admit("k", 2.0).await?;
    /// assert!(b.debt("k").await? > 1.99);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn debt(&self, key: &str) -> Result<f64, RedisError> {
        let quota = self.quota(key);
        Ok(self.call(key, "check", &quota, 0.0, 0.0).await?.debt_now)
    }

    /// Corrects an admitted `estimated` cost to the `actual` one (both finite
    /// and non-negative): a refund, or extra debt that may take the key above
    /// its size. Debt never goes below zero. Returns the new debt.
    ///
    /// ```no_run
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::{RedisBuckets, RedisConnection};
    /// # use dripfeed::keyed::Quota;
    /// let b = RedisBuckets::new(RedisConnection::open("redis://127.0.0.1/")?, "t", Quota::new(4.0, 1e-6)?);
    /// b.try_admit("job", 4.0).await?;
    /// assert!(b.settle("job", 4.0, 1.0).await? < 1.01);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn settle(&self, key: &str, estimated: f64, actual: f64) -> Result<f64, BucketError> {
        check_settle(estimated, actual).map_err(AdmitError::InvalidCost)?;
        let quota = self.quota(key);
        Ok(self
            .call(key, "settle", &quota, estimated, actual)
            .await?
            .after)
    }

    /// Gives `key` its own quota (on this node: set the same on every node).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::{RedisBuckets, RedisConnection};
    /// # use dripfeed::keyed::Quota;
    /// let b = RedisBuckets::new(RedisConnection::open("redis://127.0.0.1:1/")?, "t", Quota::new(1.0, 1.0)?);
    /// b.set_quota("vip", Quota::new(100.0, 10.0)?);
    /// assert_eq!(b.quota("vip").size(), 100.0);
    /// assert!(b.clear_quota("vip"));
    /// assert_eq!(b.quota("vip").size(), 1.0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn set_quota(&self, key: impl Into<String>, quota: Quota) {
        let mut map = match self.overrides.write() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        map.insert(key.into(), quota);
    }

    /// Puts `key` back on the default quota; true if it had its own.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::{RedisBuckets, RedisConnection};
    /// # use dripfeed::keyed::Quota;
    /// let b = RedisBuckets::new(RedisConnection::open("redis://127.0.0.1:1/")?, "t", Quota::new(1.0, 1.0)?);
    /// assert!(!b.clear_quota("nobody"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn clear_quota(&self, key: &str) -> bool {
        let mut map = match self.overrides.write() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        map.remove(key).is_some()
    }

    /// The quota that applies to `key`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::global::{RedisBuckets, RedisConnection};
    /// # use dripfeed::keyed::Quota;
    /// let b = RedisBuckets::new(RedisConnection::open("redis://127.0.0.1:1/")?, "t", Quota::new(2.0, 1.0)?);
    /// assert_eq!(b.quota("any").rate(), 1.0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn quota(&self, key: &str) -> Quota {
        let map = match self.overrides.read() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        map.get(key).copied().unwrap_or(self.default)
    }

    async fn call(
        &self,
        key: &str,
        op: &str,
        quota: &Quota,
        cost: f64,
        actual: f64,
    ) -> Result<Answer, RedisError> {
        let mut conn = self.conn.clone();
        let mut invocation = self.script.prepare_invoke();
        invocation
            .key(self.redis_key(key))
            .arg(op)
            .arg(quota.size())
            .arg(quota.rate())
            .arg(cost)
            .arg(actual);
        let answer: redis::Value =
            bounded(invocation.invoke_async(&mut conn), self.call_timeout).await?;
        let items = array(answer, 3, "bucket script")?;
        let written = number(&items[0], "written")? > 0.0;
        let debt_now = number(&items[1], "debt")?;
        let after = number(&items[2], "debt after")?;
        if !(debt_now >= 0.0 && after >= 0.0) {
            return Err(RedisError::unexpected("negative debt"));
        }
        Ok(Answer {
            written,
            debt_now,
            after,
        })
    }
}

impl fmt::Debug for RedisBuckets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisBuckets")
            .field("prefix", &self.prefix)
            .field("default", &self.default)
            .finish()
    }
}
