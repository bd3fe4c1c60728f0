//! [`AllOf`]: several limits on one key, composed (100/s *and* 10,000/h),
//! each limit a [`BucketStore`] of its own.

use std::sync::Arc;

use async_trait::async_trait;

use super::{Admit, AdmitError, BucketError, BucketStore, Quota};

/// Several limits on every key at once: a cost is admitted only if each
/// limit has room for it, and then charged to each.
///
/// Each limit is a [`BucketStore`] of its own (in memory, on Redis or on
/// PostgreSQL, mixed as you like), so a key can be held to 100/s *and*
/// 10,000/h, or a whole throttle to both by keying every job alike. The
/// tightest decides: a refusal is the one that waits longest, and its
/// [`retry_after`](super::OverQuota::retry_after) is when *every* limit
/// refusing now would have room (the others are at most as long). A cost
/// that no limit could ever hold ([`AdmitError::CostExceedsSize`]) is
/// refused as such, and a store that fails answers
/// [`BucketError::Unavailable`] for the whole.
///
/// How it admits: each limit is charged in order; if one refuses, the
/// limits already charged are refunded, and the limits after it are asked
/// (changing nothing) so that the refusal returned is the one that waits
/// longest. An admission costs one call per limit; a refusal at most two.
/// A key is never admitted above any of its limits; a concurrent caller
/// can find the room of an earlier limit taken for the instant between a
/// charge and its refund, and be refused where a single atomic check
/// would have admitted it.
///
/// Each limit keeps the bucket law on its own: over any span `T` a key is
/// admitted at most `size + rate × T` by each. "At most 10,000 in any
/// hour" is a limit whose size and hour of drain add up to 10,000, e.g.
/// `Quota::per_hour(5_000.0).burst(5_000.0)`; `Quota::per_hour(10_000.0)
/// .burst(10_000.0)` lets 20,000 through in the first hour (a full burst,
/// then the hour's drain).
///
/// What is per limit: [`debt`](BucketStore::debt), [`quota`](BucketStore::quota)
/// and [`default_quota`](BucketStore::default_quota) answer for the first
/// limit, and [`set_quota`](BucketStore::set_quota) overrides the first;
/// override another through its own store (keep its `Arc`).
/// [`settle`](BucketStore::settle) and [`clear_quota`](BucketStore::clear_quota)
/// apply to every limit.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use dripfeed::keyed::{AdmitError, AllOf, BucketStore, KeyedBuckets, Quota};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let per_second = Arc::new(KeyedBuckets::<String>::new(1_000, Quota::per_second(2.0).burst(2.0)?)?);
/// let per_minute = Arc::new(KeyedBuckets::<String>::new(1_000, Quota::per_minute(3.0).burst(3.0)?)?);
/// let both = AllOf::new(per_second).and(per_minute);
///
/// assert!(both.try_admit("acme", 2.0).await.is_ok()); // the second's burst
/// tokio::time::advance(Duration::from_secs(1)).await;
/// assert!(both.try_admit("acme", 1.0).await.is_ok()); // the minute's 3 are spent
/// tokio::time::advance(Duration::from_secs(1)).await;
/// // The second has room again; the minute decides: 1 unit drains in 20 s.
/// let refused = both.try_admit("acme", 1.0).await.unwrap_err();
/// let Some(AdmitError::OverQuota(over)) = refused.as_admit() else { panic!() };
/// assert_eq!(over.retry_after().as_secs(), 18); // rounded up to the nanosecond
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct AllOf {
    limits: Vec<Arc<dyn BucketStore>>,
}

impl AllOf {
    /// The first limit, which answers for the whole where one must (see
    /// above); add the others with [`and`](AllOf::and).
    ///
    /// ```
    /// # use dripfeed::keyed::{AllOf, KeyedBuckets, Quota};
    /// # use std::sync::Arc;
    /// let one = Arc::new(KeyedBuckets::<String>::new(10, Quota::per_second(1.0).burst(1.0)?)?);
    /// assert_eq!(AllOf::new(one).limits().len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(first: Arc<dyn BucketStore>) -> AllOf {
        AllOf {
            limits: vec![first],
        }
    }

    /// The same limits and `limit` too.
    ///
    /// ```
    /// # use dripfeed::keyed::{AllOf, KeyedBuckets, Quota};
    /// # use std::sync::Arc;
    /// let second = Arc::new(KeyedBuckets::<String>::new(10, Quota::per_second(100.0).burst(100.0)?)?);
    /// let hour = Arc::new(KeyedBuckets::<String>::new(10, Quota::per_hour(5_000.0).burst(5_000.0)?)?);
    /// assert_eq!(AllOf::new(second).and(hour).limits().len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn and(mut self, limit: Arc<dyn BucketStore>) -> AllOf {
        self.limits.push(limit);
        self
    }

    /// The limits, in order (never empty).
    ///
    /// ```
    /// # use dripfeed::keyed::{AllOf, KeyedBuckets, Quota};
    /// # use std::sync::Arc;
    /// let one = Arc::new(KeyedBuckets::<String>::new(10, Quota::per_second(1.0).burst(1.0)?)?);
    /// assert_eq!(AllOf::new(one.clone()).and(one).limits().len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn limits(&self) -> &[Arc<dyn BucketStore>] {
        &self.limits
    }

    /// `refused`, or, when it is over quota, a later limit's refusal if
    /// that waits longer (asked, changing nothing).
    async fn longest(
        &self,
        key: &str,
        cost: f64,
        refused: BucketError,
        after: usize,
    ) -> BucketError {
        if !matches!(refused.as_admit(), Some(AdmitError::OverQuota(_))) {
            return refused; // never fits, or the store failed
        }
        let mut refusal = refused;
        for limit in &self.limits[after..] {
            if let Err(e) = limit.can_admit(key, cost).await {
                if !matches!(e.as_admit(), Some(AdmitError::OverQuota(_))) {
                    return e; // never fits, or the store failed
                }
                if wait(&e) > wait(&refusal) {
                    refusal = e;
                }
            }
        }
        refusal
    }

    /// Limit `at` refused with `e` during an admission: the limits before
    /// it get their charge back, and the refusal that waits longest is
    /// returned.
    async fn refused(&self, key: &str, cost: f64, e: BucketError, at: usize) -> BucketError {
        for earlier in &self.limits[..at] {
            if let Err(e) = earlier.refund(key, cost).await {
                tracing::warn!(key, error = %e, "AllOf: could not refund a limit's charge after a later limit refused");
            }
        }
        self.longest(key, cost, e, at + 1).await
    }
}

/// A refusal's wait (zero for anything but over quota).
fn wait(e: &BucketError) -> std::time::Duration {
    match e.as_admit() {
        Some(AdmitError::OverQuota(over)) => over.retry_after(),
        _ => std::time::Duration::ZERO,
    }
}

#[async_trait]
impl BucketStore for AllOf {
    fn default_quota(&self) -> Quota {
        self.limits[0].default_quota()
    }

    async fn try_admit(&self, key: &str, cost: f64) -> Result<Admit, BucketError> {
        let mut tightest = match self.limits[0].try_admit(key, cost).await {
            Ok(a) => a,
            Err(e) => return Err(self.refused(key, cost, e, 0).await),
        };
        for (i, limit) in self.limits.iter().enumerate().skip(1) {
            match limit.try_admit(key, cost).await {
                Ok(a) if a.remaining() < tightest.remaining() => tightest = a,
                Ok(_) => {}
                Err(e) => return Err(self.refused(key, cost, e, i).await),
            }
        }
        Ok(tightest)
    }

    async fn can_admit(&self, key: &str, cost: f64) -> Result<(), BucketError> {
        for (i, limit) in self.limits.iter().enumerate() {
            if let Err(e) = limit.can_admit(key, cost).await {
                return Err(self.longest(key, cost, e, i + 1).await);
            }
        }
        Ok(())
    }

    async fn debt(&self, key: &str) -> Result<f64, BucketError> {
        self.limits[0].debt(key).await
    }

    async fn settle(&self, key: &str, estimated: f64, actual: f64) -> Result<f64, BucketError> {
        let first = self.limits[0].settle(key, estimated, actual).await?;
        for limit in &self.limits[1..] {
            limit.settle(key, estimated, actual).await?;
        }
        Ok(first)
    }

    async fn set_quota(&self, key: &str, quota: Quota) -> Result<(), BucketError> {
        self.limits[0].set_quota(key, quota).await
    }

    async fn clear_quota(&self, key: &str) -> Result<bool, BucketError> {
        let mut any = false;
        for limit in &self.limits {
            any |= limit.clear_quota(key).await?;
        }
        Ok(any)
    }

    async fn quota(&self, key: &str) -> Result<Quota, BucketError> {
        self.limits[0].quota(key).await
    }
}
