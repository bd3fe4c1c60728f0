//! A throttle admitting through a `BucketStore` (`key_store` +
//! a keyed `submit_timeout`): the key's refusal is a 429 with the exact wait and its
//! limit, the queue's refusal refunds the key inside the library, and the
//! store's own failure is a 503 (`store_down`), never a 429. The store here
//! is the in-memory table behind a switch that makes it fail, as a user's
//! own store would.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use dripfeed::keyed::{Admit, BucketError, BucketStore, KeyedBuckets, Quota, StoreFailure};
use dripfeed::{Cause, Reason, Throttle};
use support::Recorder;
use tokio::time::sleep;

/// The in-memory table, unless `down` (every call fails) or
/// `refunds_fail` (only settlements fail).
#[derive(Debug)]
struct Switchable {
    table: KeyedBuckets<String>,
    down: AtomicBool,
    refunds_fail: AtomicBool,
}

impl Switchable {
    fn new(quota: Quota) -> Arc<Self> {
        Arc::new(Self {
            table: KeyedBuckets::new(1_000, quota).unwrap(),
            down: AtomicBool::new(false),
            refunds_fail: AtomicBool::new(false),
        })
    }

    fn check(&self) -> Result<(), BucketError> {
        match self.down.load(Ordering::Relaxed) {
            true => Err(StoreFailure::new("test", "switched off").into()),
            false => Ok(()),
        }
    }
}

#[async_trait]
impl BucketStore for Switchable {
    fn default_quota(&self) -> Quota {
        self.table.default_quota()
    }
    async fn try_admit(&self, key: &str, cost: f64) -> Result<Admit, BucketError> {
        self.check()?;
        BucketStore::try_admit(&self.table, key, cost).await
    }
    async fn can_admit(&self, key: &str, cost: f64) -> Result<(), BucketError> {
        self.check()?;
        BucketStore::can_admit(&self.table, key, cost).await
    }
    async fn debt(&self, key: &str) -> Result<f64, BucketError> {
        self.check()?;
        BucketStore::debt(&self.table, key).await
    }
    async fn settle(&self, key: &str, estimated: f64, actual: f64) -> Result<f64, BucketError> {
        self.check()?;
        if self.refunds_fail.load(Ordering::Relaxed) {
            return Err(StoreFailure::new("test", "settlements switched off").into());
        }
        BucketStore::settle(&self.table, key, estimated, actual).await
    }
    async fn set_quota(&self, key: &str, quota: Quota) -> Result<(), BucketError> {
        self.check()?;
        BucketStore::set_quota(&self.table, key, quota).await
    }
    async fn clear_quota(&self, key: &str) -> Result<bool, BucketError> {
        self.check()?;
        BucketStore::clear_quota(&self.table, key).await
    }
    async fn quota(&self, key: &str) -> Result<Quota, BucketError> {
        self.check()?;
        BucketStore::quota(&self.table, key).await
    }
}

fn throttle(store: Arc<Switchable>, capacity: usize) -> Throttle<u32> {
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(100.0)
        .capacity(capacity)
        .key_store(store)
        .build(Recorder::<u32>::new())
        .unwrap();
    throttle
}

#[tokio::test(start_paused = true)]
async fn a_store_failure_is_a_503_never_a_429() {
    let store = Switchable::new(Quota::per_second(1.0).burst(2.0).unwrap());
    let throttle = throttle(store.clone(), 100);
    throttle
        .submit_timeout(
            dripfeed::Submission::new(1).key("a", 1.0),
            std::time::Duration::ZERO,
        )
        .await
        .unwrap();
    store.down.store(true, Ordering::Relaxed);
    let down = Reason::Unavailable {
        cause: Cause::StoreDown,
    };
    for job in 2..5 {
        let r = throttle
            .submit_timeout(
                dripfeed::Submission::new(job).key("a", 1.0),
                std::time::Duration::ZERO,
            )
            .await
            .unwrap_err();
        assert_eq!((r.reason(), r.status()), (down, 503));
        let wait = r.retry_after().expect("a Retry-After");
        assert!(wait >= Duration::from_secs(1) && wait <= Duration::from_millis(1200));
        assert!(
            r.rate_limit().is_none(),
            "no key limit: the key is not to blame"
        );
        assert_eq!(r.into_job(), job, "the job comes back");
    }
    assert_eq!(throttle.stats().rejected(down), 3);
    assert_eq!(throttle.stats().rejected(Reason::OverQuota), 0);
    store.down.store(false, Ordering::Relaxed);
    throttle
        .submit_timeout(
            dripfeed::Submission::new(5).key("a", 1.0),
            std::time::Duration::ZERO,
        )
        .await
        .unwrap();
    let r = throttle
        .submit_timeout(
            dripfeed::Submission::new(6).key("a", 1.0),
            std::time::Duration::ZERO,
        )
        .await
        .unwrap_err();
    assert_eq!(r.reason(), Reason::OverQuota, "the key's own refusal again");
}

#[tokio::test(start_paused = true)]
async fn a_queue_refusal_refunds_the_key_in_the_store() {
    let store = Switchable::new(Quota::per_second(1.0).burst(10.0).unwrap());
    let throttle = throttle(store.clone(), 2);
    throttle.pause();
    throttle
        .submit_timeout(
            dripfeed::Submission::new(1).key("a", 3.0),
            std::time::Duration::ZERO,
        )
        .await
        .unwrap();
    throttle
        .submit_timeout(
            dripfeed::Submission::new(2).key("b", 3.0),
            std::time::Duration::ZERO,
        )
        .await
        .unwrap();
    let r = throttle
        .submit_timeout(
            dripfeed::Submission::new(3).key("a", 3.0),
            std::time::Duration::ZERO,
        )
        .await
        .unwrap_err();
    assert_eq!(r.reason(), Reason::Overloaded, "the key had room");
    assert_eq!(
        store.debt("a").await.unwrap(),
        3.0,
        "only the queued job's cost"
    );
    // A refund the store cannot take: the job still comes back, refused.
    store.refunds_fail.store(true, Ordering::Relaxed);
    let r = throttle
        .submit_timeout(
            dripfeed::Submission::new(4).key("b", 3.0),
            std::time::Duration::ZERO,
        )
        .await
        .unwrap_err();
    assert_eq!((r.reason(), r.into_job()), (Reason::Overloaded, 4));
}

#[tokio::test(start_paused = true)]
async fn over_quota_through_a_store_is_exact_and_carries_the_key_limit() {
    let store = Switchable::new(Quota::per_second(2.0).burst(10.0).unwrap());
    let throttle = throttle(store.clone(), 100);
    throttle
        .submit_timeout(
            dripfeed::Submission::new(1).key("k", 9.0),
            std::time::Duration::ZERO,
        )
        .await
        .unwrap();
    sleep(Duration::from_millis(500)).await; // debt 9 - 0.5 × 2 = 8
    let r = throttle
        .submit_timeout(
            dripfeed::Submission::new(2).key("k", 5.0),
            std::time::Duration::ZERO,
        )
        .await
        .unwrap_err();
    let wait = r.retry_after().unwrap(); // (8 + 5 - 10) / 2 = 1.5 s, + jitter
    assert!(wait >= Duration::from_millis(1500) && wait <= Duration::from_millis(1800));
    let limit = r.rate_limit().unwrap();
    assert_eq!(limit.policy_header(), r#""key";q=10;w=5"#);
    assert_eq!(limit.header(), r#""key";r=2;t=2"#);
    // Costs the key can never hold are 400s, not endless 429s.
    let r = throttle
        .submit_timeout(
            dripfeed::Submission::new(3).key("k", 11.0),
            std::time::Duration::ZERO,
        )
        .await
        .unwrap_err();
    assert_eq!((r.reason(), r.status()), (Reason::Invalid, 400));
    // An override in the store applies at once.
    store
        .set_quota("k", Quota::per_second(2.0).burst(20.0).unwrap())
        .await
        .unwrap();
    throttle
        .submit_timeout(
            dripfeed::Submission::new(4).key("k", 11.0),
            std::time::Duration::ZERO,
        )
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn the_sync_path_needs_the_throttles_own_table_and_the_later_setting_wins() {
    let store = Switchable::new(Quota::per_second(1.0).burst(1.0).unwrap());
    let throttle = throttle(store.clone(), 100);
    let r = throttle
        .try_submit(dripfeed::Submission::new(1).key("k", 1.0))
        .unwrap_err();
    assert_eq!(
        r.reason(),
        Reason::Invalid,
        "a store is awaited: submit or submit_timeout"
    );
    assert!(throttle.key_store().is_some() && throttle.keyed().is_none());

    let (local, _drain) = Throttle::builder()
        .drain_rate(100.0)
        .key_store(store)
        .per_key(100, Quota::per_second(1.0).burst(1.0).unwrap())
        .build(Recorder::<u32>::new())
        .unwrap();
    assert!(local.key_store().is_none() && local.keyed().is_some());
    // A keyed submit_timeout works with the throttle's own table too, without waiting.
    local
        .submit_timeout(
            dripfeed::Submission::new(1).key("k", 1.0),
            std::time::Duration::ZERO,
        )
        .await
        .unwrap();
    assert_eq!(
        local
            .submit_timeout(
                dripfeed::Submission::new(2).key("k", 1.0),
                std::time::Duration::ZERO
            )
            .await
            .unwrap_err()
            .reason(),
        Reason::OverQuota
    );
    assert_eq!(local.key_debt("k"), 1.0);
}
