//! Per-key admission on a throttle: each key (tenant, IP, endpoint) has its
//! own reverse leaky bucket, checked before the shared queue.
//!
//! A key over its quota is refused with `OverQuota` (429) and the exact wait
//! until this job's cost would fit; a full queue is refused with `Overloaded`
//! (503). The key is charged first, then a place is taken (see
//! `src/admission/mod.rs` for the order); a job the queue refuses
//! gives its key the cost back, so it leaves no debt.
//!
//! Two kinds of store. The throttle's own table
//! ([`per_key`](crate::ThrottleBuilder::per_key)) answers synchronously, so
//! [`Throttle::try_submit_keyed`] never waits; its keys are hashed to 64
//! bits with a per-throttle random seed before they reach the table, so any
//! `Hash` type works and a table entry costs the same whatever the key (two
//! keys colliding share a bucket; at a million live keys the chance that any
//! two collide is about 3 in 100 million). Any [`BucketStore`]
//! ([`key_store`](crate::ThrottleBuilder::key_store): Redis, PostgreSQL, your
//! own) is awaited by [`Throttle::submit_keyed`], with string keys used as
//! given, so processes sharing the store share each key's bucket. A store
//! that fails is a 503 (`Unavailable`, cause `store_down`), never a 429.

use std::hash::{BuildHasher, Hash};
use std::time::Duration;

use crate::admission::holders::key_of;
use crate::admission::overflow::Overflow;
use crate::admission::rate_limit::RateLimit;
use crate::admission::reason::{Cause, Reason};
use crate::admission::rejected::Rejected;
use crate::handle::throttle::{Admitted, Throttle};
use crate::keyed::{
    AdmitError, BucketError, BucketStore, InvalidCost, KeyedBuckets, OverQuota, Quota,
    TooManyOverrides,
};
use crate::util::num::jittered;

impl<J: 'static> Throttle<J> {
    /// Admits `job` for `key` at `cost` (a batch of 1,000 rows might cost
    /// 1,000): the key's bucket first, then the shared queue. Never waits.
    ///
    /// Refusals hand the job back: `OverQuota` (429) with the exact wait
    /// until the cost fits (plus up to 20 % jitter), `Overloaded` (503) when
    /// the queue is full, `Invalid` (400) for a cost that is not finite and
    /// positive, or above the key's bucket size, or when the throttle was
    /// built without [`per_key`](crate::ThrottleBuilder::per_key).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Reason, Throttle};
    /// use dripfeed::keyed::Quota;
    /// use std::time::Duration;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(100.0)
    ///     .per_key(10_000, Quota::per_second(1.0).burst(5.0).unwrap()) // burst 5, then 1 per second
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// for job in 0..5 {
    ///     throttle.try_submit_keyed("tenant-a", 1.0, job).unwrap();
    /// }
    /// let refused = throttle.try_submit_keyed("tenant-a", 1.0, 5).unwrap_err();
    /// assert_eq!((refused.reason(), refused.status()), (Reason::OverQuota, 429));
    /// let wait = refused.retry_after().unwrap(); // exactly 1 s, plus jitter
    /// assert!(wait >= Duration::from_secs(1) && wait <= Duration::from_millis(1200));
    /// // another tenant is not affected
    /// assert!(throttle.try_submit_keyed("tenant-b", 1.0, 6).is_ok());
    /// // a cost the bucket can never hold is an error, not an endless 429
    /// assert_eq!(throttle.try_submit_keyed("tenant-b", 6.0, 7).unwrap_err().reason(), Reason::Invalid);
    /// # }
    /// ```
    pub fn try_submit_keyed(
        &self,
        key: impl Hash,
        cost: f64,
        job: J,
    ) -> Result<Admitted, Rejected<J>> {
        // The key first (a 429 ends here), then a place; a queue that
        // refuses gives the key its cost back.
        let (table, k) = match self.charge_key(key, cost) {
            Ok(charged) => charged,
            Err(e) => return Err(self.refuse_charge(job, e)),
        };
        let admitted = self.admit_for(key_of(k), job, None);
        if admitted.is_err() {
            let _ = table.settle(&k, cost, 0.0);
        }
        admitted
    }

    /// [`try_submit_keyed`](Self::try_submit_keyed) that waits for room (and
    /// for the key's share of a queue near its bound) instead of refusing:
    /// the key is charged first (over its quota: refused at once), then a
    /// place is awaited; a wait dropped or ended by close gives the charge
    /// back. For [`Slots::acquire_keyed`](crate::Slots::acquire_keyed).
    pub(crate) async fn submit_keyed_waiting(
        &self,
        key: impl Hash,
        cost: f64,
        job: J,
    ) -> Result<Admitted, Rejected<J>> {
        let s = &*self.shared;
        let (table, k) = match self.charge_key(key, cost) {
            Ok(charged) => charged,
            Err(e) => return Err(self.refuse_charge(job, e)),
        };
        /// Gives the key its charge back unless disarmed.
        struct Refund<'a>(Option<(&'a KeyedBuckets<u64>, u64, f64)>);
        impl Drop for Refund<'_> {
            fn drop(&mut self) {
                if let Some((table, k, cost)) = self.0.take() {
                    let _ = table.settle(&k, cost, 0.0);
                }
            }
        }
        let mut refund = Refund(Some((table, k, cost)));
        match s.admission.reserve_for(key_of(k)).await {
            Ok(place) => {
                let queued = self.queue(place, crate::util::ids::next(), job, None);
                if queued.is_ok() {
                    refund.0 = None;
                }
                queued
            }
            Err(_) => Err(s.refuse(job, Reason::Closed)),
        }
    }

    /// Admits `job` for `key` at `cost` through whichever store the
    /// throttle has: the key's bucket first (awaiting the store, so a
    /// Redis or PostgreSQL round trip), then a place in the queue, taken
    /// without waiting for room. A queue that refuses gives the key its
    /// charge back before this returns, whatever the store.
    ///
    /// Refusals hand the job back: `OverQuota` (429) with the exact wait
    /// (plus up to 20 % jitter) and the key's `RateLimit`; `Overloaded`
    /// (503) when the queue is full; `Unavailable` (503, cause
    /// `store_down`, retry after about a second) when the store failed and
    /// has no fail-open fallback, since the key is not to blame; `Invalid`
    /// (400) for a bad cost, or a throttle built with neither
    /// [`per_key`](crate::ThrottleBuilder::per_key) nor
    /// [`key_store`](crate::ThrottleBuilder::key_store).
    ///
    /// Switching stores is one line in the builder; this call stays the same.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::{Delivery, Reason, Throttle};
    /// use dripfeed::keyed::{BucketStore, KeyedBuckets, Quota};
    /// use std::sync::Arc;
    ///
    /// let quota = Quota::per_second(1.0).burst(2.0)?;
    /// let tenants: Arc<dyn BucketStore> = Arc::new(KeyedBuckets::<String>::new(10_000, quota)?);
    /// // or RedisBuckets::new(conn, "tenants", quota), or PgBuckets::new(pool, "tenants", quota)?
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(100.0)
    ///     .key_store(tenants.clone())
    ///     .build(|_: &u32, _| async { Delivery::Done })?;
    /// throttle.submit_keyed("acme", 1.0, 1).await?;
    /// throttle.submit_keyed("acme", 1.0, 2).await?;
    /// let refused = throttle.submit_keyed("acme", 1.0, 3).await.unwrap_err();
    /// assert_eq!((refused.reason(), refused.status()), (Reason::OverQuota, 429));
    /// assert_eq!(refused.into_job(), 3, "the job comes back");
    /// assert_eq!(tenants.debt("acme").await?, 2.0);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn submit_keyed(
        &self,
        key: &str,
        cost: f64,
        job: J,
    ) -> Result<Admitted, Rejected<J>> {
        let s = &*self.shared;
        let Some(store) = &s.store else {
            return self.try_submit_keyed(key, cost, job);
        };
        // The journal first (the job is durable before anything is charged
        // for it), then the key (a 429 or a store failure ends here); no
        // place is held across an await.
        let id = crate::util::ids::next();
        let guard = s.unended(id);
        let job = match self.journal_first(id, job).await {
            Ok(job) => job,
            Err(refused) => {
                guard.disarm();
                return Err(refused);
            }
        };
        let charged = store.try_admit(key, cost).await;
        guard.disarm();
        if let Err(e) = charged {
            s.ended(id);
            return Err(refuse_stored(self, job, e));
        }
        let admitted = self.admit_as(id, key_of(s.key_hasher.hash_one(key)), job, None);
        s.after_journaled(id, &admitted);
        if admitted.is_err()
            && let Err(e) = store.refund(key, cost).await
        {
            tracing::warn!(key, error = %e, "could not refund a key's charge after the queue refused");
        }
        admitted
    }

    /// The store [`submit_keyed`](Self::submit_keyed) admits through, when
    /// the throttle was built with
    /// [`key_store`](crate::ThrottleBuilder::key_store).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use dripfeed::{Delivery, Throttle};
    /// # use dripfeed::keyed::{KeyedBuckets, Quota};
    /// # use std::sync::Arc;
    /// # let store = Arc::new(KeyedBuckets::<String>::new(10, Quota::per_second(1.0).burst(1.0)?)?);
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .key_store(store)
    ///     .build(|_: &u32, _| async { Delivery::Done })?;
    /// assert!(throttle.key_store().is_some());
    /// # Ok(())
    /// # }
    /// ```
    pub fn key_store(&self) -> Option<&std::sync::Arc<dyn BucketStore>> {
        self.shared.store.as_ref()
    }

    /// Whether a job for `key` at `cost` would be admitted now (by its key
    /// and by the queue), changing nothing.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Reason, Throttle};
    /// use dripfeed::keyed::Quota;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .per_key(100, Quota::per_second(1.0).burst(2.0).unwrap())
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// assert_eq!(throttle.can_admit("k", 2.0), Ok(()));
    /// assert_eq!(throttle.can_admit("k", 2.0), Ok(()), "asking twice changes nothing");
    /// throttle.try_submit_keyed("k", 2.0, 1).unwrap();
    /// assert_eq!(throttle.can_admit("k", 1.0), Err(Reason::OverQuota));
    /// # }
    /// ```
    pub fn can_admit(&self, key: impl Hash, cost: f64) -> Result<(), Reason> {
        let s = &*self.shared;
        let keyed = s.keyed.as_ref().ok_or(Reason::Invalid)?;
        match keyed.table.can_admit(&keyed.hasher.hash_one(key), cost) {
            Err(AdmitError::OverQuota(_)) => Err(Reason::OverQuota),
            Err(_) => Err(Reason::Invalid),
            Ok(()) if s.admission.is_closed() => Err(Reason::Closed),
            Ok(())
                if s.admission.depth() >= s.admission.bound()
                    && s.cfg.overflow == Overflow::TailDrop =>
            {
                Err(Reason::Overloaded)
            }
            Ok(()) => Ok(()),
        }
    }

    /// Corrects a job's estimated cost once the real cost is known: a
    /// refund when `actual < estimated`, extra debt (and a longer wait for
    /// the key) when it is larger. Returns the key's debt afterwards.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use dripfeed::{Delivery, Throttle};
    /// use dripfeed::keyed::Quota;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .per_key(100, Quota::per_second(10.0).burst(100.0).unwrap())
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// throttle.try_submit_keyed("report", 50.0, 1).unwrap(); // estimated 50
    /// assert_eq!(throttle.settle("report", 50.0, 20.0), Ok(20.0)); // it cost 20
    /// assert_eq!(throttle.key_debt("report"), 20.0);
    /// # }
    /// ```
    pub fn settle(&self, key: impl Hash, estimated: f64, actual: f64) -> Result<f64, InvalidCost> {
        let s = &*self.shared;
        match &s.keyed {
            Some(k) => k.table.settle(&k.hasher.hash_one(key), estimated, actual),
            None => Ok(0.0),
        }
    }

    /// The key's current debt (0 for a key with no bucket).
    pub fn key_debt(&self, key: impl Hash) -> f64 {
        let s = &*self.shared;
        s.keyed
            .as_ref()
            .map_or(0.0, |k| k.table.debt(&k.hasher.hash_one(key)))
    }

    /// Gives `key` its own quota instead of the default.
    pub fn set_key_quota(&self, key: impl Hash, quota: Quota) -> Result<(), TooManyOverrides> {
        let s = &*self.shared;
        match &s.keyed {
            Some(k) => k.table.set_quota(k.hasher.hash_one(key), quota),
            None => Ok(()),
        }
    }

    /// The per-key table (live buckets, evictions), if configured.
    pub fn keyed(&self) -> Option<&KeyedBuckets<u64>> {
        self.shared.keyed.as_ref().map(|k| &k.table)
    }
}

impl<J: 'static> Throttle<J> {
    /// Charges `key` its `cost` in the throttle's own table: the table and
    /// the key's hash, or why not (`None`: the throttle has no table).
    fn charge_key(
        &self,
        key: impl Hash,
        cost: f64,
    ) -> Result<(&KeyedBuckets<u64>, u64), Option<AdmitError>> {
        let keyed = self.shared.keyed.as_ref().ok_or(None)?;
        let k = keyed.hasher.hash_one(key);
        keyed.table.try_admit(&k, cost).map_err(Some)?;
        Ok((&keyed.table, k))
    }

    /// The refusal of a charge that failed.
    fn refuse_charge(&self, job: J, err: Option<AdmitError>) -> Rejected<J> {
        match err {
            Some(e) => refuse_key(self, job, e),
            None => self.shared.refuse(job, Reason::Invalid),
        }
    }
}

/// Counts and builds a per-key refusal.
fn refuse_key<J: 'static>(throttle: &Throttle<J>, job: J, err: AdmitError) -> Rejected<J> {
    let s = &*throttle.shared;
    match err {
        AdmitError::OverQuota(over) => s.refuse_with(
            job,
            Reason::OverQuota,
            Some(jittered(over.retry_after())),
            Some(key_limit(&over)),
        ),
        _ => s.refuse(job, Reason::Invalid),
    }
}

/// Counts and builds the refusal of a [`BucketStore`]: the key's (429, 400)
/// or the store's own failure (503).
fn refuse_stored<J: 'static>(throttle: &Throttle<J>, job: J, err: BucketError) -> Rejected<J> {
    match err {
        BucketError::Admit(e) => refuse_key(throttle, job, e),
        BucketError::Unavailable(_) => throttle.shared.refuse_with(
            job,
            Reason::Unavailable {
                cause: Cause::StoreDown,
            },
            Some(jittered(STORE_DOWN_WAIT)),
            None,
        ),
        _ => throttle.shared.refuse(job, Reason::Invalid),
    }
}

/// The wait suggested while a store is down: a store probes again after
/// about this long (the stores' default probe interval).
const STORE_DOWN_WAIT: Duration = Duration::from_secs(1);

/// The key's `RateLimit` when it is over its quota.
fn key_limit(over: &OverQuota) -> RateLimit {
    RateLimit::new(
        "key",
        over.size().floor() as u64,
        over.quota().drain_time(),
        (over.size() - over.debt()).max(0.0).floor() as u64,
        over.retry_after(),
    )
}
