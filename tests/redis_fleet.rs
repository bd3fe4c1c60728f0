//! The fleet limit through a real Redis: 3 nodes on separate runtimes, each
//! a destinations set with two destinations whose template takes the
//! fleet's permits (as the relay runs), share 300 jobs/s; Redis dies and
//! comes back. Real time, bounded.

use crate::support;

use std::time::Duration;

use dripfeed::global::Failure;
use support::fleet::{
    Node, Target, aggregate_check, assert_nothing_lost, fleet, measure, wait_until,
};
use support::redis::{RedisServer, available};

const GLOBAL: f64 = support::fleet::GLOBAL;

#[test]
fn three_nodes_share_300_per_second() {
    if !available("three_nodes_share_300_per_second") {
        return;
    }
    let redis = RedisServer::start();
    aggregate_check(Target::Single(redis.url()), "fleet");
    let gone = wait_until(Duration::from_secs(2), || {
        redis.cli(&["DBSIZE"]).trim() == "0"
    });
    assert!(
        gone.is_some(),
        "the bucket expires once its debt is zero: {} {}",
        redis.cli(&["HGETALL", "{dripfeed:rate:fleet}"]),
        redis.cli(&["PTTL", "{dripfeed:rate:fleet}"])
    );
}

#[test]
fn fail_open_falls_back_to_local_share_and_recovers() {
    if !available("fail_open_falls_back_to_local_share_and_recovers") {
        return;
    }
    let mut redis = RedisServer::start();
    let nodes = fleet(
        Target::Single(redis.url()),
        "open",
        Failure::FailOpen {
            local_share: 1.0 / 3.0,
        },
    );
    std::thread::sleep(Duration::from_secs(1));
    redis.kill();
    let fell = wait_until(Duration::from_secs(2), || {
        nodes.iter().all(|n| n.rate.is_fallback())
    })
    .expect("fallback");
    eprintln!("fail-open: every node fell back {fell:?} after the kill");
    assert!(
        fell <= Duration::from_secs(1),
        "fallback within 1 s: {fell:?}"
    );
    let (n, each, took) = measure(&nodes, Duration::from_secs(2));
    let each_rate: Vec<f64> = each
        .iter()
        .map(|e| *e as f64 / took.as_secs_f64())
        .collect();
    eprintln!("fail-open: {n} jobs in {took:?}, per node {each_rate:.1?}/s (local share 100/s)");
    for r in &each_rate {
        assert!(
            (85.0..=115.0).contains(r),
            "each node at its local share: {r:.1}"
        );
    }
    redis.restart();
    let back = wait_until(Duration::from_secs(3), || {
        nodes.iter().all(|n| !n.rate.is_fallback())
    })
    .expect("recovery");
    eprintln!("fail-open: back on the global limit {back:?} after the restart");
    assert!(
        back <= Duration::from_secs(2),
        "recovery within 2 s: {back:?}"
    );
    let (n, _, took) = measure(&nodes, Duration::from_secs(2));
    let rate = n as f64 / took.as_secs_f64();
    eprintln!("fail-open: after recovery {rate:.1}/s");
    assert!(
        (rate - GLOBAL).abs() <= GLOBAL * 0.1,
        "global limit again: {rate:.1}"
    );
    for r in nodes.into_iter().map(Node::stop) {
        assert_nothing_lost(&r);
        assert!(r.errors > 0);
    }
}

#[test]
fn fail_closed_pauses_and_recovers() {
    if !available("fail_closed_pauses_and_recovers") {
        return;
    }
    let mut redis = RedisServer::start();
    let nodes = fleet(Target::Single(redis.url()), "closed", Failure::FailClosed);
    std::thread::sleep(Duration::from_secs(1));
    redis.kill();
    let fell = wait_until(Duration::from_secs(2), || {
        nodes.iter().all(|n| n.rate.is_fallback())
    })
    .expect("fallback");
    eprintln!("fail-closed: every node fell back {fell:?} after the kill");
    assert!(
        fell <= Duration::from_secs(1),
        "fallback within 1 s: {fell:?}"
    );
    // What was leased before the failure may still go out; then nothing.
    std::thread::sleep(Duration::from_millis(100));
    let (n, _, took) = measure(&nodes, Duration::from_secs(1));
    eprintln!("fail-closed: {n} jobs in {took:?} while Redis was down");
    assert_eq!(n, 0, "paused while Redis is down");
    redis.restart();
    let back = wait_until(Duration::from_secs(3), || {
        nodes.iter().all(|n| !n.rate.is_fallback())
    })
    .expect("recovery");
    eprintln!("fail-closed: back on the global limit {back:?} after the restart");
    assert!(
        back <= Duration::from_secs(2),
        "recovery within 2 s: {back:?}"
    );
    let (n, _, took) = measure(&nodes, Duration::from_secs(2));
    let rate = n as f64 / took.as_secs_f64();
    eprintln!("fail-closed: after recovery {rate:.1}/s");
    assert!(
        (rate - GLOBAL).abs() <= GLOBAL * 0.1,
        "global limit again: {rate:.1}"
    );
    for r in nodes.into_iter().map(Node::stop) {
        assert_nothing_lost(&r);
    }
}
