//! The fleet through a Redis failover: two relays reach a primary with two
//! replicas through three sentinels (`--redis redis+sentinel://…`), each
//! 202 confirmed by a replica (`--redis-wait-replicas 1`). While webhooks
//! arrive at a steady pace the primary is SIGKILLed; the sentinels promote
//! a replica and the relays follow it. Every webhook answered 202 is
//! delivered (none lost), each at most twice (a delivery in flight at the
//! failover can be repeated); requests during the failover are refused
//! with 503 and a Retry-After, never left without an answer; `/readyz`
//! is ready again after it. Sentinels that do not answer leave the relay
//! not ready. Loopback, real time, bounded; counts only.

#![cfg(feature = "redis")]

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use crate::harness::{Relay, TempDir, argv, http};
use crate::load::burst;
use crate::receivers::{self, Log};
use crate::support_redis::{self, SentinelSet};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_follows_a_sentinel_failover_and_loses_no_202() {
    if !support_redis::available("a_fleet_follows_a_sentinel_failover_and_loses_no_202") {
        return;
    }
    let mut set = tokio::task::block_in_place(SentinelSet::start);
    let log = Arc::new(Log::default());
    let rx = receivers::ok(log.clone(), Duration::from_millis(5)).await;
    let dir = TempDir::new("fleet-sentinel");
    let line = |name: &str| {
        argv(&format!(
            "--queue redis --redis {} --node-name {name} --redis-wait-replicas 1 \
             --destination hooks=http://{rx}/hooks --drain-rate 200 --latency-budget 60s \
             --retries 8 --journal-dir {} --dead-letter-file {}",
            set.url(),
            dir.arg(&format!("journal-{name}")),
            dir.arg(&format!("dl-{name}.jsonl")),
        ))
    };
    let a = Relay::start_with(&line("a"), &[]).await;
    let b = Relay::start_with(&line("b"), &[]).await;

    // 40/s to each relay for 12 s; the primary dies 4 s in.
    let flood_a = tokio::spawn(burst(a.addr, 40, 12, |_| Vec::new()));
    let flood_b = tokio::spawn(burst(b.addr, 40, 12, |_| Vec::new()));
    tokio::time::sleep(Duration::from_secs(4)).await;
    let old = tokio::task::block_in_place(|| set.fail_over());
    let (fa, fb) = (flood_a.await.unwrap(), flood_b.await.unwrap());
    // Taken in the 4 s before the kill: the first 160 requests to each.
    let before = [&fa, &fb]
        .iter()
        .flat_map(|f| f.answers.iter())
        .filter(|(nth, status)| *nth < 160 && *status == 202)
        .count();

    // Both relays are ready again on the new primary (however long the
    // sentinels took on this machine), and take webhooks again: 40/s to
    // each for 3 s more, most of them taken.
    for relay in [&a, &b] {
        let mut ready = None;
        for _ in 0..300 {
            ready = http()
                .get(relay.admin_url("/readyz"))
                .send()
                .await
                .map(|r| r.status().as_u16())
                .ok();
            if ready == Some(200) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(ready, Some(200), "ready again after the failover");
    }
    // And each takes a webhook again: with a replica to confirm each one,
    // the remaining replica must first follow the new primary (503
    // `unreplicated` until then, however long it takes here).
    let mut probes = Vec::new();
    for relay in [&a, &b] {
        let mut taken = None;
        for _ in 0..150 {
            let (status, body) = relay
                .post(&[("content-type", "application/json")], "{\"probe\":true}")
                .await;
            if status == 202 {
                taken = body["id"].as_str().map(str::to_owned);
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        probes.push(taken.expect("a webhook taken within 30 s of the failover"));
    }
    let after_a = tokio::spawn(burst(a.addr, 40, 3, |_| Vec::new()));
    let after_b = tokio::spawn(burst(b.addr, 40, 3, |_| Vec::new()));
    let (ga, gb) = (after_a.await.unwrap(), after_b.await.unwrap());
    let after = ga.accepted_ids.len() + gb.accepted_ids.len();

    let accepted: HashSet<String> = [&fa, &fb, &ga, &gb]
        .iter()
        .flat_map(|f| f.accepted_ids.iter())
        .chain(&probes)
        .cloned()
        .collect();
    let refused = fa.count(503) + fb.count(503) + ga.count(503) + gb.count(503);
    eprintln!(
        "a: {:?} then {:?}; b: {:?} then {:?}; unanswered {}; old primary {old}",
        fa.statuses,
        ga.statuses,
        fb.statuses,
        gb.statuses,
        fa.errors + fb.errors + ga.errors + gb.errors
    );
    assert_eq!(
        fa.errors + fb.errors + ga.errors + gb.errors,
        0,
        "every request is answered"
    );
    // 320 requests in the 4 s before the kill; 240 in the 3 s after.
    assert!(before >= 200, "the fleet took webhooks before: {before}");
    assert!(after >= 120, "the fleet takes webhooks after: {after}");
    let others: u64 = [&fa, &fb, &ga, &gb]
        .iter()
        .flat_map(|f| f.statuses.iter())
        .filter(|(s, _)| **s != 202 && **s != 503)
        .map(|(_, n)| n)
        .sum();
    assert_eq!(others, 0, "only 202 or 503");

    // Every 202 reaches the receiver.
    let delivered = log
        .until(Duration::from_secs(60), |hits| {
            let keys: HashSet<&str> = hits.iter().map(|h| h.key.as_str()).collect();
            accepted.iter().all(|id| keys.contains(id.as_str()))
        })
        .await;
    let keys: HashMap<String, u32> = log.keys();
    let lost: Vec<&String> = accepted
        .iter()
        .filter(|id| !keys.contains_key(*id))
        .collect();
    let twice = keys.values().filter(|n| **n > 1).count();
    let most = keys.values().copied().max().unwrap_or(0);
    eprintln!(
        "202: {}, 503: {refused}, delivered: {} ({} requests), repeated: {twice}, lost: {}",
        accepted.len(),
        keys.len(),
        log.len(),
        lost.len()
    );
    assert!(
        delivered && lost.is_empty(),
        "lost {} of the 202s: {lost:?}",
        lost.len()
    );
    assert!(most <= 2, "a webhook was delivered {most} times");
}

/// Sentinels that do not answer: the relay starts, answers 503 (never a
/// 202 it cannot keep) and `/readyz` 503 naming `redis`, saying no
/// primary is known.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_primary_known_is_not_ready() {
    let port = support_redis::free_port();
    let dir = TempDir::new("fleet-sentinel-none");
    let relay = Relay::start_with(
        &argv(&format!(
            "--queue redis --redis redis+sentinel://127.0.0.1:{port}/hooks --node-name n \
             --destination hooks=http://127.0.0.1:9/hooks --redis-durability always \
             --journal-dir {} --dead-letter-file {}",
            dir.arg("journal"),
            dir.arg("dl.jsonl"),
        )),
        &[],
    )
    .await;
    let resp = http()
        .get(relay.admin_url("/readyz"))
        .send()
        .await
        .expect("readyz answers");
    let status = resp.status().as_u16();
    let body = resp.text().await.unwrap_or_default();
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("redis") && (body.contains("no primary") || body.contains("did not answer")),
        "{body}"
    );
    let (status, body) = relay
        .post(&[("content-type", "application/json")], "{\"n\":1}")
        .await;
    assert_eq!(status, 503, "{body}");
}
