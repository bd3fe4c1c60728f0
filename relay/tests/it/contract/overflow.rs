//! Overflow policies answer alike in both engines. A burst into a full
//! queue under head-drop: every webhook is answered 202 `queued`, the
//! newest are delivered and each evicted one is a dead letter (reason
//! `evicted`); under dead-letter: what arrives at a full queue is answered
//! 202 `deferred` and is a dead letter (reason `overflow`). Either way
//! every webhook ends in exactly one place, and the overflow is counted.
//! (Before, `--queue redis` refused both policies at start.)

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use super::{Bench, Engine, both, get_json, post, receiver};
use crate::harness::eventually;
use crate::receivers::Log;

/// The dead letters of `destination`: (id, reason) each.
async fn letters(bench: &Bench, destination: &str) -> Vec<(String, String)> {
    let url = bench
        .relay
        .admin_url(&format!("/v1/dead-letters?destination={destination}"));
    get_json(&url).await["dead_letters"]
        .as_array()
        .map(|all| {
            all.iter()
                .filter_map(|l| {
                    Some((
                        l["id"].as_str()?.to_owned(),
                        l["reason"].as_str()?.to_owned(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Posts `n` webhooks `{"n":i}` to `a` as fast as it answers: each one's
/// id and answered status (`queued`, `deferred`).
async fn burst(bench: &Bench, n: u64) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for i in 0..n {
        let p = post(&bench.relay, "a", &[], &format!("{{\"n\":{i}}}")).await;
        assert_eq!(p.status, 202, "{}", p.body);
        out.push((
            p.body["id"].as_str().unwrap_or_default().to_owned(),
            p.body["status"].as_str().unwrap_or_default().to_owned(),
        ));
    }
    out
}

/// Which webhooks (by `n`) the receiver got.
fn delivered(log: &Log) -> BTreeSet<u64> {
    log.hits()
        .iter()
        .filter_map(|h| {
            let v: serde_json::Value = serde_json::from_slice(&h.body).ok()?;
            v["n"].as_u64()
        })
        .collect()
}

both!(head_drop_keeps_the_newest_and_dead_letters_the_evicted);

/// A relay of `engine` whose destination `a` holds 4 webhooks drained at
/// 2/s (a burst of 16 overflows it), with the `overflow` policy, and the
/// log of its receiver.
async fn full_queue(engine: Engine, overflow: &str) -> (Arc<Log>, Bench) {
    let log = Arc::new(Log::default());
    let rx = receiver(log.clone(), 204, Duration::ZERO).await;
    let bench = Bench::start(
        engine,
        overflow,
        &format!(
            "--destination a=http://{rx}/a --drain-rate 2 --latency-budget 2s \
             --overflow {overflow} --retries 0"
        ),
    )
    .await;
    (log, bench)
}

async fn head_drop_keeps_the_newest_and_dead_letters_the_evicted(engine: Engine) {
    let (log, bench) = full_queue(engine, "head-drop").await;
    const N: u64 = 16;
    let sent = burst(&bench, N).await;
    assert!(sent.iter().all(|(_, s)| s == "queued"), "{sent:?}");
    // Every webhook ends delivered or evicted, once.
    let ended = eventually(Duration::from_secs(30), || async {
        delivered(&log).len() + letters(&bench, "a").await.len() >= N as usize
    })
    .await;
    let (got, dead) = (delivered(&log), letters(&bench, "a").await);
    assert!(ended, "delivered {got:?}, dead letters {dead:?}");
    assert_eq!(got.len() + dead.len(), N as usize, "{got:?} {dead:?}");
    assert_eq!(log.hits().len(), got.len(), "none delivered twice");
    assert!(dead.len() >= 3, "a burst of {N} into 4 evicts: {dead:?}");
    assert!(dead.iter().all(|(_, why)| why == "evicted"), "{dead:?}");
    assert!(got.contains(&(N - 1)), "the newest is delivered: {got:?}");
    let ids: BTreeSet<&String> = sent.iter().map(|(id, _)| id).collect();
    assert!(dead.iter().all(|(id, _)| ids.contains(id)), "{dead:?}");
    // Its status says so, and the overflow is counted.
    let first = &dead[0].0;
    let status = get_json(&bench.relay.admin_url(&format!("/v1/webhooks/{first}"))).await;
    assert_eq!(status["state"], "dead_lettered", "{status}");
    let m = bench.relay.metrics().await;
    let labels = [("destination", "a"), ("policy", "head_drop")];
    assert_eq!(
        m.get("leaky_bucket_overflow_total", &labels),
        dead.len() as f64
    );
}

both!(dead_letter_overflow_defers_what_arrives_at_a_full_queue);

async fn dead_letter_overflow_defers_what_arrives_at_a_full_queue(engine: Engine) {
    let (log, bench) = full_queue(engine, "dead-letter").await;
    const N: u64 = 16;
    let sent = burst(&bench, N).await;
    let deferred: BTreeSet<&String> = sent
        .iter()
        .filter(|(_, s)| s == "deferred")
        .map(|(id, _)| id)
        .collect();
    let queued = sent.iter().filter(|(_, s)| s == "queued").count();
    assert_eq!(queued + deferred.len(), N as usize, "{sent:?}");
    assert!(deferred.len() >= 3, "{sent:?}");
    let ended = eventually(Duration::from_secs(30), || async {
        delivered(&log).len() >= queued && letters(&bench, "a").await.len() >= deferred.len()
    })
    .await;
    let (got, dead) = (delivered(&log), letters(&bench, "a").await);
    assert!(ended, "delivered {got:?}, dead letters {dead:?}");
    assert_eq!(got.len(), queued, "every queued one delivered: {got:?}");
    let dead_ids: BTreeSet<&String> = dead.iter().map(|(id, _)| id).collect();
    assert_eq!(dead_ids, deferred, "the deferred ones are the dead letters");
    assert!(dead.iter().all(|(_, why)| why == "overflow"), "{dead:?}");
    let m = bench.relay.metrics().await;
    let labels = [("destination", "a"), ("policy", "dead_letter")];
    assert_eq!(
        m.get("leaky_bucket_overflow_total", &labels),
        deferred.len() as f64
    );
}
