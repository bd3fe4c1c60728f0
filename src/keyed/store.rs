//! [`BucketStore`]: the operations every per-key bucket store has, in
//! memory ([`KeyedBuckets`]), on Redis or on PostgreSQL, so one throttle
//! takes any of them.

use std::fmt;

use async_trait::async_trait;

use super::{Admit, AdmitError, BucketError, KeyedBuckets, Quota};

/// Per-key reverse leaky buckets behind one interface: the in-memory
/// [`KeyedBuckets<String>`], `global::RedisBuckets` (a Redis server or
/// cluster) and `global::PgBuckets` (one PostgreSQL table) all implement it,
/// with the same semantics: each key's bucket holds debt that drains at the
/// key's rate; a cost is admitted iff `debt_now + cost <= size`; a refusal
/// carries the exact wait; a cost above the size is
/// [`AdmitError::CostExceedsSize`], never an endless 429.
///
/// Keys are strings, used as given: a store shared by many processes sees
/// the same key from each of them (nothing is hashed with a per-process
/// seed). Quota overrides live in the store itself, so every process sharing
/// it sees the same quota for a key, and an override stays until it is
/// cleared (a drained bucket does not take it away).
///
/// A throttle takes any store with
/// [`ThrottleBuilder::key_store`](crate::ThrottleBuilder::key_store) and
/// admits through it with [`Throttle::submit_timeout`](crate::Throttle::submit_timeout)
/// (or [`submit`](crate::Throttle::submit)) of a keyed [`Submission`](crate::Submission).
/// A failure of the store is [`BucketError::Unavailable`] (the throttle
/// answers 503, not 429: the key is not to blame).
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use dripfeed::keyed::{AdmitError, BucketStore, KeyedBuckets, Quota};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let store: Arc<dyn BucketStore> = Arc::new(KeyedBuckets::<String>::new(1_000, Quota::per_second(1.0).burst(3.0)?)?);
/// assert_eq!(store.try_admit("acme", 2.0).await?.remaining(), 1.0);
/// let refused = store.try_admit("acme", 2.0).await.unwrap_err();
/// let Some(AdmitError::OverQuota(over)) = refused.as_admit() else { panic!() };
/// assert_eq!(over.retry_after(), Duration::from_secs(1));
/// store.refund("acme", 2.0).await?; // the job was not sent after all
/// assert_eq!(store.debt("acme").await?, 0.0);
/// # Ok(())
/// # }
/// ```
#[async_trait]
pub trait BucketStore: Send + Sync + fmt::Debug {
    /// The quota of keys without an override.
    ///
    /// ```
    /// # use dripfeed::keyed::{BucketStore, KeyedBuckets, Quota};
    /// let q = Quota::per_second(1.0).burst(5.0)?;
    /// let store = KeyedBuckets::<String>::new(10, q)?;
    /// assert_eq!(BucketStore::default_quota(&store), q);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn default_quota(&self) -> Quota;

    /// Admits `cost` for `key` iff `debt_now + cost <= size`, adding it to
    /// the key's debt; a refusal changes nothing and carries the exact wait.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::keyed::{BucketStore, KeyedBuckets, Quota};
    /// let store = KeyedBuckets::<String>::new(10, Quota::per_second(1.0).burst(3.0)?)?;
    /// assert_eq!(BucketStore::try_admit(&store, "k", 2.0).await?.debt(), 2.0);
    /// # Ok(())
    /// # }
    /// ```
    async fn try_admit(&self, key: &str, cost: f64) -> Result<Admit, BucketError>;

    /// Whether [`try_admit`](Self::try_admit) would admit `cost` now, with
    /// the same errors; writes nothing.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::keyed::{BucketStore, KeyedBuckets, Quota};
    /// let store = KeyedBuckets::<String>::new(10, Quota::per_second(1.0).burst(3.0)?)?;
    /// assert!(BucketStore::can_admit(&store, "k", 3.0).await.is_ok());
    /// assert!(BucketStore::can_admit(&store, "k", 4.0).await.is_err(), "above the size");
    /// # Ok(())
    /// # }
    /// ```
    async fn can_admit(&self, key: &str, cost: f64) -> Result<(), BucketError>;

    /// The key's debt now; 0 for a key the store holds nothing for.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::keyed::{BucketStore, KeyedBuckets, Quota};
    /// let store = KeyedBuckets::<String>::new(10, Quota::per_second(1.0).burst(3.0)?)?;
    /// assert_eq!(BucketStore::debt(&store, "nobody").await?, 0.0);
    /// # Ok(())
    /// # }
    /// ```
    async fn debt(&self, key: &str) -> Result<f64, BucketError>;

    /// Corrects an admitted `estimated` cost to the `actual` one (both finite
    /// and non-negative): a refund, or extra debt that may take the key above
    /// its size. Debt never goes below zero. Returns the new debt.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::keyed::{BucketStore, KeyedBuckets, Quota};
    /// let store = KeyedBuckets::<String>::new(10, Quota::per_second(1.0).burst(10.0)?)?;
    /// BucketStore::try_admit(&store, "report", 8.0).await?;
    /// assert_eq!(BucketStore::settle(&store, "report", 8.0, 3.0).await?, 3.0);
    /// assert_eq!(BucketStore::settle(&store, "report", 0.0, 9.0).await?, 12.0, "above the size");
    /// # Ok(())
    /// # }
    /// ```
    async fn settle(&self, key: &str, estimated: f64, actual: f64) -> Result<f64, BucketError>;

    /// Gives back a `cost` admitted for `key` (the job never ran): the same
    /// as `settle(key, cost, 0)`. Returns the new debt.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::keyed::{BucketStore, KeyedBuckets, Quota};
    /// let store = KeyedBuckets::<String>::new(10, Quota::per_second(1.0).burst(4.0)?)?;
    /// BucketStore::try_admit(&store, "k", 4.0).await?;
    /// assert_eq!(store.refund("k", 4.0).await?, 0.0);
    /// # Ok(())
    /// # }
    /// ```
    async fn refund(&self, key: &str, cost: f64) -> Result<f64, BucketError> {
        self.settle(key, cost, 0.0).await
    }

    /// Gives `key` its own quota, in the store (every process sharing the
    /// store sees it), until [`clear_quota`](Self::clear_quota).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::keyed::{BucketStore, KeyedBuckets, Quota};
    /// let store = KeyedBuckets::<String>::new(10, Quota::per_second(1.0).burst(1.0)?)?;
    /// BucketStore::set_quota(&store, "vip", Quota::per_second(10.0).burst(100.0)?).await?;
    /// assert_eq!(BucketStore::quota(&store, "vip").await?.size(), 100.0);
    /// # Ok(())
    /// # }
    /// ```
    async fn set_quota(&self, key: &str, quota: Quota) -> Result<(), BucketError>;

    /// Puts `key` back on the default quota; `true` if it had its own.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::keyed::{BucketStore, KeyedBuckets, Quota};
    /// let store = KeyedBuckets::<String>::new(10, Quota::per_second(1.0).burst(1.0)?)?;
    /// assert!(!BucketStore::clear_quota(&store, "nobody").await?);
    /// # Ok(())
    /// # }
    /// ```
    async fn clear_quota(&self, key: &str) -> Result<bool, BucketError>;

    /// The quota that applies to `key`: its override or the default.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::keyed::{BucketStore, KeyedBuckets, Quota};
    /// let q = Quota::per_second(1.0).burst(2.0)?;
    /// let store = KeyedBuckets::<String>::new(10, q)?;
    /// assert_eq!(BucketStore::quota(&store, "anyone").await?, q);
    /// # Ok(())
    /// # }
    /// ```
    async fn quota(&self, key: &str) -> Result<Quota, BucketError>;
}

/// The in-memory table as a store. It answers at once; a throttle built
/// with [`per_key`](crate::ThrottleBuilder::per_key) keeps its own
/// synchronous table and does not go through this.
#[async_trait]
impl<S: std::hash::BuildHasher + Send + Sync> BucketStore for KeyedBuckets<String, S> {
    fn default_quota(&self) -> Quota {
        KeyedBuckets::default_quota(self)
    }

    async fn try_admit(&self, key: &str, cost: f64) -> Result<Admit, BucketError> {
        Ok(KeyedBuckets::try_admit(self, &key.to_owned(), cost)?)
    }

    async fn can_admit(&self, key: &str, cost: f64) -> Result<(), BucketError> {
        Ok(KeyedBuckets::can_admit(self, &key.to_owned(), cost)?)
    }

    async fn debt(&self, key: &str) -> Result<f64, BucketError> {
        Ok(KeyedBuckets::debt(self, &key.to_owned()))
    }

    async fn settle(&self, key: &str, estimated: f64, actual: f64) -> Result<f64, BucketError> {
        KeyedBuckets::settle(self, &key.to_owned(), estimated, actual)
            .map_err(|e| AdmitError::InvalidCost(e).into())
    }

    async fn set_quota(&self, key: &str, quota: Quota) -> Result<(), BucketError> {
        Ok(KeyedBuckets::set_quota(self, key.to_owned(), quota)?)
    }

    async fn clear_quota(&self, key: &str) -> Result<bool, BucketError> {
        Ok(KeyedBuckets::clear_quota(self, &key.to_owned()))
    }

    async fn quota(&self, key: &str) -> Result<Quota, BucketError> {
        Ok(KeyedBuckets::quota(self, &key.to_owned()))
    }
}
