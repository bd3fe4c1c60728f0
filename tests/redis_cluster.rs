//! The fleet limit and the per-key buckets against a real 3-master Redis
//! Cluster: keys are hash-tagged per bucket, so buckets spread across slots.

mod support;

use dripfeed::global::{RedisBuckets, RedisConnection};
use dripfeed::keyed::Quota;
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
        let buckets = RedisBuckets::new(conn, "tenant", Quota::new(2.0, 0.01).unwrap());
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
