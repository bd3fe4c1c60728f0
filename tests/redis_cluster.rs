//! The fleet limit and the per-key buckets against a real 3-master Redis
//! Cluster: keys are hash-tagged per bucket, so buckets spread across slots;
//! when every master stops, the buckets fall back (fail-open) or refuse with
//! a store failure (fail-closed, never a 429), and recover when they return.

use crate::support;

use std::time::{Duration, Instant};

use dripfeed::global::{Failure, RedisBuckets, RedisConnection};
use dripfeed::keyed::{AdmitError, BucketStore, Quota};
use support::fleet::{Target, aggregate_check};
use support::redis::{RedisCluster, available};

#[test]
fn three_nodes_share_300_per_second_on_a_cluster() {
    if !available("three_nodes_share_300_per_second_on_a_cluster") {
        return;
    }
    let cluster = RedisCluster::start();
    let (rate, trips) = aggregate_check(Target::Cluster(cluster.urls()), "cluster-fleet");
    eprintln!("cluster: {rate:.1}/s, {trips:.1} round trips per 1,000 jobs");
}

#[test]
fn per_key_buckets_spread_across_the_masters() {
    if !available("per_key_buckets_spread_across_the_masters") {
        return;
    }
    let cluster = RedisCluster::start();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let urls = cluster.urls();
        let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
        let conn = RedisConnection::cluster(&urls).await.unwrap();
        // Slow drain: the keys live for minutes.
        let buckets =
            RedisBuckets::new(conn, "tenant", Quota::per_second(0.01).burst(2.0).unwrap());
        for i in 0..60 {
            let key = format!("t{i}");
            assert!(buckets.try_admit(&key, 2.0).await.is_ok());
            assert!(buckets.try_admit(&key, 1.0).await.is_err(), "over quota");
            assert!(buckets.can_admit(&key, 1.0).await.is_err());
        }
    });
    let per_node: Vec<u64> = cluster
        .nodes
        .iter()
        .map(|n| n.cli(&["DBSIZE"]).trim().parse().unwrap())
        .collect();
    eprintln!("cluster: keys per master {per_node:?}");
    assert_eq!(per_node.iter().sum::<u64>(), 60);
    assert!(
        per_node.iter().all(|&n| n > 0),
        "every master holds buckets: {per_node:?}"
    );
}

#[test]
fn every_master_stops_then_returns() {
    if !available("every_master_stops_then_returns") {
        return;
    }
    let mut cluster = RedisCluster::start();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let urls = cluster.urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let conn = rt.block_on(RedisConnection::cluster(&urls)).unwrap();
    let quota = Quota::per_second(0.01).burst(3.0).unwrap();
    let closed = RedisBuckets::new(conn.clone(), "closed", quota)
        .call_timeout(Duration::from_millis(300))
        .probe_interval(Duration::from_millis(200));
    let open = RedisBuckets::new(conn, "open", quota)
        .call_timeout(Duration::from_millis(300))
        .probe_interval(Duration::from_millis(200))
        .on_failure(Failure::FailOpen { local_share: 1.0 })
        .unwrap();
    rt.block_on(async {
        for i in 0..20 {
            let key = format!("t{i}");
            closed.try_admit(&key, 1.0).await.unwrap();
            open.try_admit(&key, 1.0).await.unwrap();
        }
    });

    for node in &mut cluster.nodes {
        node.kill();
    }
    rt.block_on(async {
        for i in 0..20 {
            let key = format!("t{i}");
            let e = closed.try_admit(&key, 1.0).await.unwrap_err();
            assert!(
                e.is_store_failure(),
                "fail-closed: a store failure, not a 429: {e}"
            );
            // Fail-open: local buckets of the key's size, fresh.
            for _ in 0..3 {
                open.try_admit(&key, 1.0).await.unwrap();
            }
            let e = open.try_admit(&key, 1.0).await.unwrap_err();
            assert!(
                matches!(e.as_admit(), Some(AdmitError::OverQuota(_))),
                "{e}"
            );
        }
        assert!(closed.in_fallback() && open.in_fallback());
    });

    for node in &mut cluster.nodes {
        node.restart();
    }
    let start = Instant::now();
    rt.block_on(async {
        loop {
            let both = closed.try_admit("back", 1.0).await.is_ok()
                && open.try_admit("back", 1.0).await.is_ok();
            if both && !closed.in_fallback() && !open.in_fallback() {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the cluster came back but the buckets did not"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    eprintln!(
        "cluster: buckets recovered {:?} after the masters restarted",
        start.elapsed()
    );
}
