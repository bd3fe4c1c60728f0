//! One conformance suite for every `BucketStore`: the in-memory table, a
//! Redis server, a Redis Cluster and PostgreSQL run the same checks. Real
//! time (a remote store uses its server's clock), so comparisons allow a few
//! ms of drift; quotas that must not move during a check drain slowly.
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use dripfeed::keyed::{AdmitError, BucketError, BucketStore, KeyedBuckets, Quota};
use tokio::time::{Instant, sleep};

/// Seconds of clock disagreement tolerated between a server and the test.
pub(crate) const SLACK: f64 = 0.010;

pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How a backend makes stores and says what it still holds.
pub(crate) trait Backend: Sync {
    /// A fresh store (its own prefix or table) with `quota` as default.
    fn store<'a>(&'a self, name: &'a str, quota: Quota) -> BoxFuture<'a, Arc<dyn BucketStore>>;
    /// Checks that the store made by `store(name, _)` dropped (or will
    /// drop, on its next admissions) every bucket whose debt drained to
    /// zero; `Err` says what it still holds.
    fn idle_gone<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), String>>;
}

/// The wait of an over-quota refusal.
pub(crate) fn over(e: &BucketError) -> Option<Duration> {
    match e.as_admit() {
        Some(AdmitError::OverQuota(o)) => Some(o.retry_after()),
        _ => None,
    }
}

fn near(a: f64, b: f64, rate: f64) -> bool {
    (a - b).abs() <= rate * SLACK + 1e-9
}

/// Every check, in turn.
pub(crate) async fn run(backend: &dyn Backend) {
    exact_wait(backend).await;
    costs(backend).await;
    settle_both_ways(backend).await;
    overrides(backend).await;
    idle_keys(backend).await;
    agrees_with_the_model(backend).await;
}

/// Admit, refuse with the exact wait and the quota, check without writing.
pub(crate) async fn exact_wait(backend: &dyn Backend) {
    let quota = Quota::per_second(10.0).burst(10.0).unwrap(); // 1 unit = 100 ms
    let store = backend.store("wait", quota).await;
    assert_eq!(store.default_quota(), quota);
    let a = store.try_admit("k", 6.0).await.unwrap();
    assert!(near(a.debt(), 6.0, 10.0) && a.size() == 10.0, "{a:?}");
    let e = store.try_admit("k", 5.0).await.unwrap_err();
    let Some(AdmitError::OverQuota(o)) = e.as_admit() else {
        panic!("over quota: {e:?}");
    };
    // debt ~6 + 5 - 10 = 1 unit: 100 ms, less what drained since.
    let wait = o.retry_after().as_secs_f64();
    assert!((0.1 - SLACK * 5.0..=0.1).contains(&wait), "wait {wait}");
    assert_eq!((o.size(), o.rate()), (10.0, 10.0));
    assert!(
        o.debt() <= 6.0 && o.debt() >= 6.0 - 10.0 * SLACK * 5.0,
        "{o:?}"
    );
    let before = store.debt("k").await.unwrap();
    assert!(store.can_admit("k", 3.0).await.is_ok());
    assert!(over(&store.can_admit("k", 9.0).await.unwrap_err()).is_some());
    let after = store.debt("k").await.unwrap();
    assert!(
        after <= before,
        "a check writes nothing: {before} then {after}"
    );
    // Waiting the wait admits.
    let e = store.try_admit("k", 5.0).await.unwrap_err();
    sleep(over(&e).unwrap() + Duration::from_millis(5)).await;
    assert!(
        store.try_admit("k", 5.0).await.is_ok(),
        "admitted after the wait"
    );
}

/// Invalid costs and costs above the size are typed errors, never 429s.
pub(crate) async fn costs(backend: &dyn Backend) {
    let store = backend
        .store("costs", Quota::per_second(1.0).burst(10.0).unwrap())
        .await;
    let e = store.try_admit("k", 11.0).await.unwrap_err();
    assert_eq!(
        e.as_admit(),
        Some(&AdmitError::CostExceedsSize {
            cost: 11.0,
            size: 10.0
        })
    );
    assert!(!e.is_store_failure());
    for cost in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let e = store.try_admit("k", cost).await.unwrap_err();
        assert!(
            matches!(e.as_admit(), Some(AdmitError::InvalidCost(_))),
            "cost {cost}: {e:?}"
        );
        assert!(store.can_admit("k", cost).await.is_err());
    }
    assert!(store.settle("k", 1.0, -1.0).await.is_err());
    assert!(store.settle("k", f64::NAN, 1.0).await.is_err());
    assert_eq!(store.debt("k").await.unwrap(), 0.0, "nothing was charged");
}

/// A refund, extra debt above the size, and the refund of a refused job.
pub(crate) async fn settle_both_ways(backend: &dyn Backend) {
    let store = backend
        .store("settle", Quota::per_second(1e-3).burst(10.0).unwrap())
        .await;
    store.try_admit("k", 8.0).await.unwrap();
    let d = store.settle("k", 8.0, 2.0).await.unwrap();
    assert!(near(d, 2.0, 1e-3), "a refund: {d}");
    let d = store.settle("k", 0.0, 12.0).await.unwrap();
    assert!(near(d, 14.0, 1e-3), "above the size: {d}");
    let wait = over(&store.try_admit("k", 1.0).await.unwrap_err()).unwrap();
    // 14 + 1 - 10 = 5 units at 0.001/s: 5,000 s.
    assert!((wait.as_secs_f64() - 5000.0).abs() < 1.0, "{wait:?}");
    let d = store.settle("k", 20.0, 0.0).await.unwrap();
    assert_eq!(d, 0.0, "never below zero");
    store.try_admit("r", 4.0).await.unwrap();
    assert!(near(store.refund("r", 4.0).await.unwrap(), 0.0, 1e-3));
    assert!(store.debt("r").await.unwrap() < 1e-6);
}

/// Overrides live in the store: another handle on it sees them, they
/// outlive the bucket's drain, and clearing puts the default back.
pub(crate) async fn overrides(backend: &dyn Backend) {
    let default = Quota::per_second(1000.0).burst(1.0).unwrap(); // drains in 1 ms
    let store = backend.store("quotas", default).await;
    let vip = Quota::per_second(1000.0).burst(100.0).unwrap();
    store.set_quota("vip", vip).await.unwrap();
    assert_eq!(store.quota("vip").await.unwrap(), vip);
    assert_eq!(store.quota("other").await.unwrap(), default);
    assert!(store.try_admit("vip", 60.0).await.is_ok());
    assert!(store.try_admit("other", 60.0).await.is_err());
    // The bucket drains (60 units at 1000/s: 60 ms); the override stays.
    sleep(Duration::from_millis(150)).await;
    assert_eq!(store.debt("vip").await.unwrap(), 0.0);
    assert_eq!(store.quota("vip").await.unwrap(), vip, "outlives the drain");
    assert!(store.try_admit("vip", 90.0).await.is_ok());
    // A second handle on the same store sees it (for shared stores).
    let again = backend.store("quotas", default).await;
    assert_eq!(again.quota("vip").await.unwrap(), vip);
    assert!(store.clear_quota("vip").await.unwrap());
    assert!(!store.clear_quota("vip").await.unwrap());
    assert_eq!(store.quota("vip").await.unwrap(), default);
    sleep(Duration::from_millis(150)).await;
    let e = store.try_admit("vip", 2.0).await.unwrap_err();
    assert!(
        matches!(e.as_admit(), Some(AdmitError::CostExceedsSize { .. })),
        "{e:?}"
    );
}

/// Idle keys cost nothing once drained: their debt reads 0, a full-size
/// cost fits, and the store drops them (expiry, pruning or eviction).
pub(crate) async fn idle_keys(backend: &dyn Backend) {
    let store = backend
        .store("idle", Quota::per_second(40.0).burst(2.0).unwrap())
        .await;
    for i in 0..40 {
        store.try_admit(&format!("idle-{i}"), 2.0).await.unwrap();
    }
    sleep(Duration::from_millis(200)).await; // 2 units at 40/s: 50 ms
    for i in 0..5 {
        let key = format!("idle-{i}");
        assert_eq!(store.debt(&key).await.unwrap(), 0.0);
    }
    backend.idle_gone("idle").await.unwrap();
}

/// Random admissions, checks, refunds and settlements agree with the
/// in-memory model, but for decisions within the clock slack of a boundary.
pub(crate) async fn agrees_with_the_model(backend: &dyn Backend) {
    let quota = Quota::per_second(40.0).burst(8.0).unwrap();
    let store = backend.store("model", quota).await;
    let model = KeyedBuckets::new(1000, quota).unwrap();
    let mut rng = fastrand::Rng::with_seed(7);
    let keys = ["a", "b", "c"];
    let margin = quota.rate() * SLACK * 2.0;
    let (mut agreed, mut boundary) = (0, 0);
    for _ in 0..240 {
        let key = keys[rng.usize(..keys.len())];
        let cost = 0.5 + rng.f64() * 4.0;
        match rng.u8(..10) {
            0 => {
                let d = store.settle(key, cost, cost / 2.0).await.unwrap();
                let m = model.settle(&key, cost, cost / 2.0).unwrap();
                assert!((d - m).abs() <= margin, "settle {d} vs {m}");
            }
            1 => {
                let remote = store.can_admit(key, cost).await.is_ok();
                let local = model.can_admit(&key, cost).is_ok();
                let at_edge = (model.debt(&key) + cost - quota.size()).abs() <= margin;
                assert!(remote == local || at_edge, "check disagrees");
            }
            _ => {
                let before = model.debt(&key);
                let remote = store.try_admit(key, cost).await;
                let now = Instant::now();
                let at_edge = (before + cost - quota.size()).abs() <= margin
                    || (model.debt_at(&key, now) + cost - quota.size()).abs() <= margin;
                if let Err(e) = &remote {
                    assert!(over(e).is_some(), "only over quota: {e:?}");
                }
                let local = model.try_admit_at(&key, cost, now).is_ok();
                if remote.is_ok() == local {
                    agreed += 1;
                } else {
                    assert!(
                        at_edge,
                        "disagreement away from a boundary: {cost} on {before}"
                    );
                    boundary += 1;
                    // Follow the store so both hold the same state again.
                    if remote.is_ok() {
                        model.settle_at(&key, 0.0, cost, now).unwrap();
                    } else {
                        model.settle_at(&key, cost, 0.0, now).unwrap();
                    }
                }
            }
        }
        let r = store.debt(key).await.unwrap();
        let m = model.debt(&key);
        assert!((r - m).abs() <= margin, "debt {r} vs {m}");
        sleep(Duration::from_millis(rng.u64(0..15))).await;
    }
    eprintln!("model: {agreed} admissions agreed, {boundary} at a boundary");
    assert!(agreed >= 150, "{agreed}");
    assert!(boundary <= 10, "{boundary}");
}
