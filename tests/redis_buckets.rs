//! `RedisBuckets` makes the decisions the in-memory `KeyedBuckets` makes:
//! the same operations on both, compared (real time; the server's clock is
//! not the test's, so a few ms of slack at boundaries).

mod support;

use std::time::Duration;

use dripfeed::global::{BucketError, RedisBuckets, RedisConnection};
use dripfeed::keyed::KeyedBuckets;
use dripfeed::keyed::{AdmitError, Quota};
use support::redis::{RedisServer, available};
use tokio::time::{Instant, sleep};

/// Seconds of clock disagreement tolerated between Redis and the test.
const SLACK: f64 = 0.010;

fn over(e: &BucketError) -> Option<Duration> {
    match e.as_admit() {
        Some(AdmitError::OverQuota(o)) => Some(o.retry_after()),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn same_decisions_as_keyed_buckets() {
    if !available("same_decisions_as_keyed_buckets") {
        return;
    }
    let redis = RedisServer::start();
    let quota = Quota::new(10.0, 10.0).unwrap(); // 1 unit = 100 ms
    let remote = RedisBuckets::new(RedisConnection::open(&redis.url()).unwrap(), "t", quota);
    let local = KeyedBuckets::new(1000, quota).unwrap();
    let close = |a: f64, b: f64| (a - b).abs() <= quota.rate() * SLACK + 1e-9;

    // Admit, refuse with the exact wait, check without writing.
    let a = remote.try_admit("k", 6.0).await.unwrap();
    let b = local.try_admit_at(&"k", 6.0, Instant::now()).unwrap();
    assert!(close(a.debt(), b.debt()) && a.size() == b.size());
    let r = remote.try_admit("k", 5.0).await.unwrap_err();
    let l = local.try_admit_at(&"k", 5.0, Instant::now()).unwrap_err();
    let (AdmitError::OverQuota(lo), Some(rw)) = (l, over(&r)) else {
        panic!("both refuse: {r:?} {l:?}");
    };
    assert!(
        rw.abs_diff(lo.retry_after()) <= Duration::from_secs_f64(SLACK),
        "{rw:?} {:?}",
        lo.retry_after()
    );
    assert!(remote.can_admit("k", 4.0).await.is_ok());
    assert!(local.can_admit(&"k", 4.0).is_ok());
    assert!(
        close(remote.debt("k").await.unwrap(), local.debt(&"k")),
        "check wrote nothing"
    );

    // Invalid costs are errors on both, before any round trip.
    for cost in [11.0, 0.0, -1.0, f64::NAN, f64::INFINITY] {
        let r = remote.try_admit("k", cost).await.unwrap_err();
        let l = local.try_admit(&"k", cost).unwrap_err();
        assert_eq!(
            std::mem::discriminant(r.as_admit().unwrap()),
            std::mem::discriminant(&l),
            "cost {cost}"
        );
    }

    // Lazy drain, then settle a refund.
    sleep(Duration::from_millis(300)).await;
    assert!(close(remote.debt("k").await.unwrap(), local.debt(&"k")));
    let r = remote.try_admit("k", 5.5).await.unwrap();
    let l = local.try_admit(&"k", 5.5).unwrap();
    assert!(close(r.debt(), l.debt()));
    let r = remote.settle("k", 5.5, 1.0).await.unwrap();
    let l = local.settle(&"k", 5.5, 1.0).unwrap();
    assert!(close(r, l), "{r} {l}");
    assert!(remote.settle("k", 1.0, -1.0).await.is_err());

    // A quota per key.
    let vip = Quota::new(100.0, 1.0).unwrap();
    remote.set_quota("vip", vip);
    local.set_quota("vip", vip).unwrap();
    assert!(remote.try_admit("vip", 60.0).await.is_ok());
    assert!(local.try_admit(&"vip", 60.0).is_ok());
    assert!(over(&remote.try_admit("vip", 50.0).await.unwrap_err()).is_some());
    assert!(local.try_admit(&"vip", 50.0).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn random_operations_agree_and_idle_keys_expire() {
    if !available("random_operations_agree_and_idle_keys_expire") {
        return;
    }
    let redis = RedisServer::start();
    let quota = Quota::new(8.0, 40.0).unwrap();
    let remote = RedisBuckets::new(RedisConnection::open(&redis.url()).unwrap(), "r", quota);
    let local = KeyedBuckets::new(1000, quota).unwrap();
    let mut rng = fastrand::Rng::with_seed(7);
    let keys = ["a", "b", "c"];
    let (mut agreed, mut boundary) = (0, 0);
    for _ in 0..300 {
        let key = keys[rng.usize(..keys.len())];
        let cost = 0.5 + rng.f64() * 4.0;
        let before = local.debt(&key);
        let remote_ok = remote.try_admit(key, cost).await.is_ok();
        let now = Instant::now();
        let near = (before + cost - quota.size()).abs() <= quota.rate() * SLACK * 2.0
            || (local.debt_at(&key, now) + cost - quota.size()).abs() <= quota.rate() * SLACK * 2.0;
        let local_ok = local.try_admit_at(&key, cost, now).is_ok();
        if remote_ok == local_ok {
            agreed += 1;
        } else {
            assert!(
                near,
                "disagreement away from a boundary: cost {cost}, debt {before}"
            );
            boundary += 1;
            // Follow Redis so both hold the same state again.
            if remote_ok {
                local.settle_at(&key, 0.0, cost, now).unwrap();
            } else {
                local.settle_at(&key, cost, 0.0, now).unwrap();
            }
        }
        let r = remote.debt(key).await.unwrap();
        let l = local.debt(&key);
        assert!(
            (r - l).abs() <= quota.rate() * SLACK * 2.0,
            "debt {r} vs {l}"
        );
        sleep(Duration::from_millis(rng.u64(0..15))).await;
    }
    eprintln!("random: {agreed} decisions agreed, {boundary} at a boundary");
    assert!(agreed >= 290);

    // Idle keys expire once their debt is zero (8 units at 40/s: 200 ms).
    sleep(Duration::from_millis(400)).await;
    assert_eq!(redis.cli(&["DBSIZE"]).trim(), "0");
}
