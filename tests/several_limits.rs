//! Several limits on one key (`keyed::AllOf`): 100/s and 10,000/h each
//! hold exactly at their horizons, the tightest decides the wait, a race
//! never admits above either, and the same composed of two Redis stores
//! shared by two handles.

use std::sync::Arc;
use std::time::Duration;

use dripfeed::keyed::{AdmitError, AllOf, BucketError, BucketStore, KeyedBuckets, Quota};
use tokio::time::Instant;

fn table(quota: Quota) -> Arc<dyn BucketStore> {
    Arc::new(KeyedBuckets::<String>::new(1_000, quota).unwrap())
}

fn wait(e: &BucketError) -> Duration {
    match e.as_admit() {
        Some(AdmitError::OverQuota(over)) => over.retry_after(),
        other => panic!("expected over quota, got {other:?}"),
    }
}

/// A caller that takes every unit as soon as both limits allow, for an
/// hour and a bit: the second's limit holds over every second, the
/// hour's over the hour, each to the unit (the bucket law, `size + rate ×
/// T`), and once the hour's limit is the tighter its wait is the one given.
#[tokio::test(start_paused = true)]
async fn a_second_and_an_hour_both_hold_at_their_horizons() {
    let both = AllOf::new(table(Quota::per_second(100.0).burst(100.0).unwrap()))
        .and(table(Quota::per_hour(10_000.0).burst(10_000.0).unwrap()));
    let start = Instant::now();
    let mut at: Vec<Duration> = Vec::new();
    let mut waits_after_the_hour_fills = Vec::new();
    while start.elapsed() <= Duration::from_secs(3_700) {
        match both.try_admit("acme", 1.0).await {
            Ok(_) => at.push(start.elapsed()),
            Err(e) => {
                let w = wait(&e);
                if start.elapsed() > Duration::from_secs(200) {
                    waits_after_the_hour_fills.push(w);
                }
                tokio::time::advance(w).await;
            }
        }
    }
    let within = |from: Duration, span: Duration| {
        at.iter()
            .filter(|t| **t >= from && **t - from <= span)
            .count()
    };
    // The second: its burst plus a second's drain, in any second.
    let first = within(Duration::ZERO, Duration::from_secs(1));
    assert!((199..=200).contains(&first), "{first} in the first second");
    let mut busiest = 0;
    let mut end = 0;
    for (i, t) in at.iter().enumerate() {
        while end < at.len() && at[end] - *t < Duration::from_secs(1) {
            end += 1;
        }
        busiest = busiest.max(end - i);
    }
    assert!(busiest <= 200, "{busiest} in one second");
    // The hour: its burst plus an hour's drain, and no more.
    let hour = within(Duration::ZERO, Duration::from_secs(3_600));
    assert!(
        (19_999..=20_001).contains(&hour),
        "{hour} in the first hour"
    );
    // Once the hour's bucket is full it decides: a unit every 0.36 s.
    assert!(!waits_after_the_hour_fills.is_empty());
    for w in waits_after_the_hour_fills {
        assert!(
            w > Duration::from_millis(300),
            "waited {w:?}: the second's wait, not the hour's"
        );
    }
}

/// A cost no limit could ever hold is refused as such, and charges none.
#[tokio::test(start_paused = true)]
async fn a_cost_one_limit_cannot_hold_charges_none() {
    let wide = table(Quota::per_second(1.0).burst(50.0).unwrap());
    let narrow = table(Quota::per_second(1.0).burst(5.0).unwrap());
    let both = AllOf::new(wide.clone()).and(narrow.clone());
    let e = both.try_admit("k", 8.0).await.unwrap_err();
    assert!(
        matches!(e.as_admit(), Some(AdmitError::CostExceedsSize { .. })),
        "{e}"
    );
    assert_eq!(wide.debt("k").await.unwrap(), 0.0);
    assert_eq!(narrow.debt("k").await.unwrap(), 0.0);
    // Admitted: each limit charged, the answer from the tightest.
    let ok = both.try_admit("k", 4.0).await.unwrap();
    assert_eq!(ok.remaining(), 1.0);
    assert_eq!(wide.debt("k").await.unwrap(), 4.0);
}

/// Eight threads race for a key under two limits: exactly the tighter
/// limit's burst is admitted, and the looser one keeps no charge of a
/// refused caller.
#[test]
fn a_race_never_admits_above_either_limit() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    // Rates so slow nothing drains during the race.
    let loose = table(Quota::per_hour(1.0).burst(50.0).unwrap());
    let tight = table(Quota::per_hour(1.0).burst(30.0).unwrap());
    let both = Arc::new(AllOf::new(loose.clone()).and(tight.clone()));
    let admitted: usize = rt.block_on(async {
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let both = both.clone();
                tokio::spawn(async move {
                    let mut n = 0;
                    for _ in 0..100 {
                        if both.try_admit("k", 1.0).await.is_ok() {
                            n += 1;
                        }
                        tokio::task::yield_now().await;
                    }
                    n
                })
            })
            .collect();
        let mut sum = 0;
        for t in tasks {
            sum += t.await.unwrap();
        }
        sum
    });
    assert_eq!(admitted, 30);
    rt.block_on(async {
        let debt = loose.debt("k").await.unwrap();
        assert!((debt - 30.0).abs() < 0.01, "loose debt {debt}");
    });
}

#[cfg(feature = "redis")]
mod on_redis {
    use super::*;
    use crate::support::redis::{RedisServer, available};
    use dripfeed::global::{RedisBuckets, RedisConnection};

    fn limits(url: &str) -> AllOf {
        let conn = RedisConnection::open(url).unwrap();
        let second = RedisBuckets::new(
            conn.clone(),
            "several_second",
            Quota::per_second(0.001).burst(20.0).unwrap(),
        );
        let hour = RedisBuckets::new(
            conn,
            "several_hour",
            Quota::per_hour(1.0).burst(12.0).unwrap(),
        );
        AllOf::new(Arc::new(second)).and(Arc::new(hour))
    }

    /// Two handles (two processes' worth: their own connections) on one
    /// Redis, each racing with four tasks: the two together admit exactly
    /// the tighter limit's burst.
    #[test]
    fn two_handles_on_redis_admit_exactly_the_tighter_limit() {
        if !available("two_handles_on_redis_admit_exactly_the_tighter_limit") {
            return;
        }
        let redis = RedisServer::start();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let admitted: usize = rt.block_on(async {
            let handles = [
                Arc::new(limits(&redis.url())),
                Arc::new(limits(&redis.url())),
            ];
            let mut tasks = Vec::new();
            for h in &handles {
                for _ in 0..4 {
                    let h = h.clone();
                    tasks.push(tokio::spawn(async move {
                        let mut n = 0;
                        for _ in 0..10 {
                            if h.try_admit("tenant", 1.0).await.is_ok() {
                                n += 1;
                            }
                        }
                        n
                    }));
                }
            }
            let mut sum = 0;
            for t in tasks {
                sum += t.await.unwrap();
            }
            let refused = handles[0].try_admit("tenant", 1.0).await.unwrap_err();
            assert!(
                wait(&refused) > Duration::from_secs(3_000),
                "the hour's wait"
            );
            sum
        });
        assert_eq!(admitted, 12);
    }
}
