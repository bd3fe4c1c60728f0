//! A `RedisConnection` from a `redis+sentinel://` URL follows a failover:
//! a primary with two replicas and three sentinels; writes confirmed by a
//! replica (`WAIT 1`) while the primary is SIGKILLed, the sentinels
//! promote a replica, and the same handle (and the scripts built on it)
//! goes on against the new primary with every confirmed write there; the
//! old primary comes back as a replica. Loopback, real time, bounded: the
//! failover takes the sentinels a few seconds; nothing is timed.

use crate::support;

use std::time::{Duration, Instant};

use dripfeed::global::{RedisBuckets, RedisConnection};
use dripfeed::keyed::{BucketStore, Quota};
use support::redis::{SentinelSet, available, cli};

/// Writes `key` and waits for one replica to confirm it: `Ok(true)` when
/// confirmed, `Ok(false)` when the primary kept it alone.
async fn confirmed(conn: &mut RedisConnection, key: &str) -> Result<bool, redis::RedisError> {
    let mut pipe = redis::pipe();
    pipe.cmd("SET").arg(key).arg("1").ignore();
    pipe.cmd("WAIT").arg(1).arg(200);
    let (replicas,): (u64,) = pipe.query_async(conn).await?;
    Ok(replicas >= 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_watched_primary_is_followed_through_a_failover() {
    if !available("a_sentinel_watched_primary_is_followed_through_a_failover") {
        return;
    }
    let mut set = tokio::task::block_in_place(SentinelSet::start);
    let mut conn = RedisConnection::open(&set.url()).expect("a sentinel URL");
    let quota = Quota::per_second(10.0).burst(100.0).expect("a quota");
    let buckets = RedisBuckets::new(conn.clone(), "sentinel-test", quota);

    let mut kept = Vec::new();
    for i in 0..50 {
        let key = format!("before-{i}");
        assert!(
            confirmed(&mut conn, &key)
                .await
                .expect("the primary answers")
        );
        kept.push(key);
    }
    assert!(buckets.try_admit("tenant", 1.0).await.is_ok());

    let old = tokio::task::block_in_place(|| set.fail_over());
    let new = set.primary_port().expect("a new primary");
    assert_ne!(old, new);

    // The handle finds the new primary: the first commands may fail (the
    // connection to the old one is lost), then writes go through again.
    let start = Instant::now();
    let mut failed = 0;
    let mut after = 0;
    while after < 50 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no write confirmed 30 s after the failover ({failed} failed)"
        );
        let key = format!("after-{after}");
        match confirmed(&mut conn, &key).await {
            Ok(true) => {
                kept.push(key);
                after += 1;
            }
            Ok(false) | Err(_) => {
                failed += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    // Every confirmed write is on the new primary.
    for key in &kept {
        assert_eq!(
            cli(new, &["GET", key]).trim(),
            "1",
            "{key} lost in the failover"
        );
    }
    // Scripts load again where they are missing.
    assert!(buckets.try_admit("tenant", 1.0).await.is_ok());

    // The old primary comes back as a replica; the handle stays on the new.
    tokio::task::block_in_place(|| set.bring_back(old));
    let start = Instant::now();
    while cli(old, &["ROLE"]).lines().next() != Some("slave") {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the old primary was not made a replica"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        confirmed(&mut conn, "last")
            .await
            .expect("still the new primary")
    );
    assert_eq!(cli(new, &["GET", "last"]).trim(), "1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_primary_known_is_an_error_not_a_hang() {
    // Sentinels that do not answer: each command fails within its bounds.
    let port = support::redis::free_port();
    let url = format!(
        "redis+sentinel://127.0.0.1:{port}/{}",
        support::redis::WATCHED
    );
    let mut conn = RedisConnection::open(&url).expect("a sentinel URL");
    let start = Instant::now();
    let answer: Result<String, _> = redis::cmd("PING").query_async(&mut conn).await;
    assert!(answer.is_err());
    assert!(start.elapsed() < Duration::from_secs(10));
}
