//! The fleet's breaker: three relays share one per destination in Redis.
//! A receiver that answers 500 gets the few attempts that open it and
//! then one probe at a time for the whole fleet (not three relays each
//! retrying at full pace); every relay shows it open; once the receiver
//! recovers, a probe closes it and every webhook is delivered. The fleet
//! also records how long each webhook waited in its queue. Loopback, real
//! time, bounded; counts only.

#![cfg(feature = "redis")]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::IntoResponse;

use crate::harness::{Relay, TempDir, argv, http};
use crate::receivers::{self, Hit, Log};
use crate::support_redis::{self, RedisServer};

async fn breaker_of(relay: &Relay) -> String {
    let url = relay.admin_url("/v1/destinations/hooks");
    let text = http().get(url).send().await.unwrap().text().await.unwrap();
    let body: serde_json::Value = serde_json::from_str(&text).unwrap();
    body["live"]["breaker"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// `name` of destination `hooks`, summed over `relays`.
async fn summed(relays: &[Relay], name: &str) -> f64 {
    let mut sum = 0.0;
    for r in relays {
        sum += r
            .metrics()
            .await
            .find(name, &[("destination", "hooks")])
            .unwrap_or(0.0);
    }
    sum
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_relays_share_one_breaker() {
    if !support_redis::available("three_relays_share_one_breaker") {
        return;
    }
    let redis = RedisServer::start();
    let up = Arc::new(AtomicBool::new(false));
    let log = Arc::new(Log::default());
    let answer = {
        let up = up.clone();
        Arc::new(move |_: &Hit, _: usize| match up.load(Ordering::Relaxed) {
            true => StatusCode::NO_CONTENT.into_response(),
            false => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        })
    };
    let rx = receivers::recording(log.clone(), Duration::ZERO, answer).await;
    let dir = TempDir::new("fleet-breaker");
    let line = |i: usize| {
        argv(&format!(
            "--queue redis --redis {} --node-name b{i} --destination hooks=http://{rx}/hooks \
             --drain-rate 50 --latency-budget 60s --retries 50 --retry-min 100ms --retry-max 200ms \
             --breaker-max-cool-down 2s --max-in-flight-per-destination 1 \
             --journal-dir {} --dead-letter-file {}",
            redis.url(),
            dir.arg(&format!("journal-{i}")),
            dir.arg(&format!("dl-{i}.jsonl")),
        ))
    };
    let mut relays = Vec::new();
    for i in 0..3 {
        relays.push(Relay::start_with(&line(i), &[]).await);
    }
    let mut ids = Vec::new();
    for n in 0..30 {
        let (status, body) = relays[n % 3]
            .post(
                &[("content-type", "application/json")],
                &format!("{{\"n\":{n}}}"),
            )
            .await;
        assert_eq!(status, 202, "{body}");
        ids.push(body["id"].as_str().unwrap_or_default().to_owned());
    }
    // 6 s of a receiver answering 500: at 50/s with retries every 100 to
    // 200 ms, three relays without a shared breaker would make hundreds
    // of attempts. With it: the few that open it, what was in flight on
    // each relay, and one probe per cool-down (1 s, then 2 s).
    tokio::time::sleep(Duration::from_secs(6)).await;
    let attempts = log.len();
    let opened = summed(&relays, "leaky_bucket_breaker_opened_total").await;
    // Since the first attempt: 6 s and a little, or more on a busy
    // machine where posting the 30 took a while (the breaker opens
    // meanwhile). At most one opening per cool-down, and a few attempts
    // each: the bounds grow with it (5 openings and 20 attempts at 6 s).
    let window = log
        .hits()
        .iter()
        .map(|h| h.at)
        .min()
        .map_or(0.0, |first| first.elapsed().as_secs_f64());
    let mut states = Vec::new();
    for r in &relays {
        states.push(breaker_of(r).await);
    }
    let in_redis = redis.cli(&["HGET", "dripfeed:q:{hooks}:b", "n"]);
    eprintln!(
        "attempts {attempts}, opened {opened} (redis {in_redis:?}) in {window:.1} s, states {states:?}"
    );
    assert!(
        attempts >= 5,
        "the breaker opened on evidence: {attempts} attempts"
    );
    assert!(
        attempts as f64 <= 14.0 + window,
        "{attempts} attempts on a failing receiver in {window:.1} s"
    );
    assert!(
        (1.0..=2.0 + window / 2.0).contains(&opened),
        "opened {opened} times in {window:.1} s"
    );
    assert_eq!(
        in_redis.trim().parse::<f64>().ok(),
        Some(opened),
        "each opening counted once, by the relay that opened it"
    );
    // Every relay knows: each was sending, and learnt it from its answers.
    assert!(
        states.iter().all(|s| s != "closed"),
        "every relay sees the breaker open or probing: {states:?}"
    );

    // The receiver recovers: a probe closes the breaker and every webhook
    // arrives, answered 204 now.
    let recovered = std::time::Instant::now();
    up.store(true, Ordering::Relaxed);
    let all = log
        .until(Duration::from_secs(30), |hits| {
            ids.iter()
                .all(|id| hits.iter().any(|h| &h.key == id && h.at >= recovered))
        })
        .await;
    let since: std::collections::HashSet<String> = log
        .hits()
        .into_iter()
        .filter(|h| h.at >= recovered)
        .map(|h| h.key)
        .collect();
    let missing = ids.iter().filter(|id| !since.contains(*id)).count();
    assert!(
        all,
        "{missing} webhooks not delivered after the receiver recovered"
    );
    let mut closed = false;
    for _ in 0..50 {
        let mut now = Vec::new();
        for r in &relays {
            now.push(breaker_of(r).await);
        }
        if now.iter().all(|s| s == "closed") {
            closed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(closed, "the breaker closed on every relay that sent since");
    // Each webhook's wait in the fleet's queue was recorded.
    let waits = summed(&relays, "leaky_bucket_queue_wait_seconds_count").await;
    assert!(waits >= 30.0, "queue waits recorded: {waits}");
}
