//! `queue = redis`: two relays share one queue in Redis Streams. Webhooks
//! posted to one are delivered by either; a relay killed (SIGKILL) while it
//! holds webhooks it claimed loses none of them: the other takes them over
//! once they have been pending longer than a delivery can take, and every
//! 202 reaches the receiver. The fleet's bound answers 503 with
//! Retry-After, and an idempotency key is the fleet's: a retry sent to the
//! other relay is the same webhook.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use crate::harness::{Relay, TempDir, argv};
use crate::receivers::{self, Log};
use crate::support_redis;

/// Posts a webhook to `relay` (with an idempotency key, if given): status
/// and the id a 202 named.
async fn post(relay: &Relay, n: u64, key: Option<&str>) -> (u16, Option<String>) {
    let mut headers = vec![("content-type", "application/json")];
    if let Some(k) = key {
        headers.push(("idempotency-key", k));
    }
    let (status, body) = relay.post(&headers, &format!("{{\"n\":{n}}}")).await;
    (status, body["id"].as_str().map(str::to_owned))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_killed_with_webhooks_in_hand_loses_none_of_them() {
    if !support_redis::available("a_relay_killed_with_webhooks_in_hand_loses_none_of_them") {
        return;
    }
    let redis = support_redis::RedisServer::start();
    let log = Arc::new(Log::default());
    // Each delivery takes 1.5 s: a relay killed now holds what it claimed,
    // unanswered.
    let rx = receivers::ok(log.clone(), Duration::from_millis(1500)).await;
    let dir = TempDir::new("shared-queue");
    let node = |name: &str| {
        argv(&format!(
            "--queue redis --redis {} --node-name {name} --destination billing=http://{rx}/hooks \
             --drain-rate 20 --latency-budget 1s --deliver-timeout 2s --retries 2 \
             --journal-dir {} --dead-letter-file {}",
            redis.url(),
            dir.arg(&format!("journal-{name}")),
            dir.arg(&format!("dl-{name}.jsonl")),
        ))
    };
    let mut a = Relay::start_with(&node("a"), &[]).await;
    // The fleet's bound is budget × rate = 20: the 21st webhook is refused.
    let mut ids = Vec::new();
    for n in 0..20 {
        let (status, id) = post(&a, n, None).await;
        assert_eq!(status, 202, "webhook {n}");
        ids.extend(id);
    }
    let (status, body) = a.post(&[("content-type", "application/json")], "{}").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["type"], "urn:dripfeed:problem:overloaded");
    // a has claimed and started some (its deliveries hang at the receiver
    // for 1.5 s): killed now, they are in nobody's hands.
    tokio::time::sleep(Duration::from_millis(400)).await;
    a.kill().await;
    let b = Relay::start_with(&node("b"), &[]).await;
    // An idempotency key is the fleet's (once b has made room).
    let mut first = None;
    for _ in 0..100 {
        match post(&b, 100, Some("order-100")).await {
            (202, id) => {
                first = id;
                break;
            }
            (503, _) => tokio::time::sleep(Duration::from_millis(200)).await,
            (other, _) => panic!("b answered {other}"),
        }
    }
    assert!(first.is_some(), "b took the webhook once it had room");
    let (status, again) = post(&b, 100, Some("order-100")).await;
    assert_eq!(
        (status, &again),
        (202, &first),
        "a repeat names the first id"
    );
    ids.extend(first);
    // b delivers everything: what was queued and what a had in hand.
    let all = log
        .until(Duration::from_secs(60), |hits| {
            let got: HashSet<&str> = hits.iter().map(|h| h.key.as_str()).collect();
            ids.iter().all(|id| got.contains(id.as_str()))
        })
        .await;
    let got: HashSet<String> = log.hits().into_iter().map(|h| h.key).collect();
    let missing: Vec<&String> = ids.iter().filter(|id| !got.contains(*id)).collect();
    assert!(
        all,
        "{} of {} 202s never arrived: {missing:?}",
        missing.len(),
        ids.len()
    );
    let reclaimed = b
        .err
        .all()
        .iter()
        .any(|l| l.contains("took over webhooks a relay left pending"));
    assert!(reclaimed, "b took over a's webhooks: {:?}", b.err.all());
    let dead = std::fs::read_to_string(dir.join("dl-b.jsonl")).unwrap_or_default();
    assert_eq!(dead.lines().count(), 0, "nothing dead-lettered: {dead}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_shared_queue_cannot_keep_is_refused_at_start() {
    let run = |extra: String| async move {
        let args = format!(
            "check-config /dev/null --downstream http://127.0.0.1:9/ --allow-destination-cidr 127.0.0.0/8 --queue redis {extra}"
        );
        let args: Vec<String> = argv(&args);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        crate::harness::run(&args, &[]).await
    };
    let (code, _, err) = run(String::new()).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("queue = redis needs redis"), "{err}");
    let redis = "--redis redis://127.0.0.1:1/";
    for (flags, says) in [
        ("--overflow head-drop", "tail-drop"),
        ("--redis-failure open", "open cannot be kept"),
        ("--adaptive", "not shared by the fleet yet"),
        ("--tenant-rate 5", "tenant quotas are not taken"),
    ] {
        let (code, _, err) = run(format!("{redis} {flags}")).await;
        assert_eq!(code, 2, "{flags}: {err}");
        assert!(err.contains(says), "{flags}: {err}");
    }
    let (code, out, err) = run(redis.to_owned()).await;
    assert_eq!(code, 0, "{out}{err}");
}
