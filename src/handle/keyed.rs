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
//! [`Throttle::try_submit`] of a keyed [`Submission`](crate::Submission)
//! never waits; its keys are hashed to 64
//! bits with a per-throttle random seed before they reach the table, so any
//! `Hash` type works and a table entry costs the same whatever the key (two
//! keys colliding share a bucket; at a million live keys the chance that any
//! two collide is about 3 in 100 million). Any [`BucketStore`]
//! ([`key_store`](crate::ThrottleBuilder::key_store): Redis, PostgreSQL, your
//! own) is awaited by [`Throttle::submit_timeout`] and
//! [`Throttle::submit`], with string keys used as
//! given, so processes sharing the store share each key's bucket. A store
//! that fails is a 503 (`Unavailable`, cause `store_down`), never a 429.

use std::time::Duration;

use crate::admission::overflow::Overflow;
use crate::admission::rate_limit::RateLimit;
use crate::admission::reason::{Cause, Reason};
use crate::admission::rejected::Rejected;
use crate::handle::submission::Key;
use crate::handle::throttle::Throttle;
use crate::keyed::{
    AdmitError, BucketError, BucketStore, InvalidCost, KeyedBuckets, Prehashed, Quota,
    TooManyOverrides,
};
use crate::util::num::jittered;

impl<J: 'static> Throttle<J> {
    /// The store [`submit`](Self::submit) and
    /// [`submit_timeout`](Self::submit_timeout) charge a key in, when the
    /// throttle was built with [`key_store`](crate::ThrottleBuilder::key_store).
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
    /// use dripfeed::{Delivery, Reason, Submission, Throttle};
    /// use dripfeed::keyed::Quota;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .per_key(100, Quota::per_second(1.0).burst(2.0).unwrap())
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// assert_eq!(throttle.can_admit("k", 2.0), Ok(()));
    /// assert_eq!(throttle.can_admit("k", 2.0), Ok(()), "asking twice changes nothing");
    /// throttle.try_submit(Submission::new(1).key("k", 2.0)).unwrap();
    /// assert_eq!(throttle.can_admit("k", 1.0), Err(Reason::OverQuota));
    /// # }
    /// ```
    pub fn can_admit<'k>(&self, key: impl Into<Key<'k>>, cost: f64) -> Result<(), Reason> {
        let s = &*self.shared;
        let keyed = s.keyed.as_ref().ok_or(Reason::Invalid)?;
        match keyed
            .table
            .can_admit(&key.into().hash_with(&keyed.hasher), cost)
        {
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
    /// use dripfeed::{Delivery, Submission, Throttle};
    /// use dripfeed::keyed::Quota;
    /// let (throttle, _drain) = Throttle::builder()
    ///     .drain_rate(10.0)
    ///     .per_key(100, Quota::per_second(10.0).burst(100.0).unwrap())
    ///     .build(|_: &u32, _| async { Delivery::Done })
    ///     .unwrap();
    /// throttle.try_submit(Submission::new(1).key("report", 50.0)).unwrap(); // estimated 50
    /// assert_eq!(throttle.settle("report", 50.0, 20.0), Ok(20.0)); // it cost 20
    /// assert_eq!(throttle.key_debt("report"), 20.0);
    /// # }
    /// ```
    pub fn settle<'k>(
        &self,
        key: impl Into<Key<'k>>,
        estimated: f64,
        actual: f64,
    ) -> Result<f64, InvalidCost> {
        let s = &*self.shared;
        match &s.keyed {
            Some(k) => k
                .table
                .settle(&key.into().hash_with(&k.hasher), estimated, actual),
            None => Ok(0.0),
        }
    }

    /// The key's current debt (0 for a key with no bucket).
    pub fn key_debt<'k>(&self, key: impl Into<Key<'k>>) -> f64 {
        let s = &*self.shared;
        s.keyed
            .as_ref()
            .map_or(0.0, |k| k.table.debt(&key.into().hash_with(&k.hasher)))
    }

    /// Gives `key` its own quota instead of the default.
    pub fn set_key_quota<'k>(
        &self,
        key: impl Into<Key<'k>>,
        quota: Quota,
    ) -> Result<(), TooManyOverrides> {
        let s = &*self.shared;
        match &s.keyed {
            Some(k) => k.table.set_quota(key.into().hash_with(&k.hasher), quota),
            None => Ok(()),
        }
    }

    /// The per-key table (live buckets, evictions), if configured.
    pub fn keyed(&self) -> Option<&KeyedBuckets<u64, Prehashed>> {
        self.shared.keyed.as_ref().map(|k| &k.table)
    }
}

impl<J: 'static> Throttle<J> {
    /// The refusal of a charge that failed.
    pub(crate) fn refuse_charge(&self, job: J, err: Option<AdmitError>) -> Rejected<J> {
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
            Some(RateLimit::for_key(&over)),
        ),
        _ => s.refuse(job, Reason::Invalid),
    }
}

impl<J: 'static> Throttle<J> {
    /// Counts and builds the refusal of a [`BucketStore`]: the key's (429,
    /// 400) or the store's own failure (503).
    pub(crate) fn refuse_stored(&self, job: J, err: BucketError) -> Rejected<J> {
        let throttle = self;
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
}

/// The wait suggested while a store is down: a store probes again after
/// about this long (the stores' default probe interval).
const STORE_DOWN_WAIT: Duration = Duration::from_secs(1);
