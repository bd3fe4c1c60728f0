//! `queue = redis`: destinations changed through the admin API of any
//! relay are the fleet's. A destination made on one relay takes webhooks
//! on another within a second or so (the bound asserted is generous); a
//! new URL reaches every relay; a deletion closes the destination on every
//! relay (404), refuses to make it again while the fleet ends it, and
//! dead-letters what its queue held once the grace has passed, into the
//! fleet's dead letters; a relay started later reads every change from
//! Redis over its configuration, a configured destination deleted through
//! the API among them.

#![cfg(feature = "redis")]

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use axum::response::IntoResponse;

use crate::harness::{Relay, TempDir, argv, digest, eventually, http};
use crate::receivers::{self, Hit, Log, ok};
use crate::support_redis;

const TOKEN: &str = "fleet-admin-token";

/// `method` on `relay`'s admin API at `path`: status and JSON body.
async fn call(
    relay: &Relay,
    method: reqwest::Method,
    path: &str,
    body: Option<String>,
) -> (u16, serde_json::Value) {
    let mut req = http()
        .request(method, relay.admin_url(path))
        .bearer_auth(TOKEN);
    if let Some(b) = body {
        req = req.header("content-type", "application/json").body(b);
    }
    let resp = req.send().await.expect("the admin listener answers");
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or_default())
}

async fn put(relay: &Relay, name: &str, url: &str) -> (u16, serde_json::Value) {
    let body = serde_json::json!({ "url": url, "rate": 50 }).to_string();
    let path = format!("/v1/destinations/{name}");
    call(relay, reqwest::Method::PUT, &path, Some(body)).await
}

/// The URL `relay` lists for `name`, if it lists it.
async fn listed_url(relay: &Relay, name: &str) -> Option<String> {
    let (_, v) = call(relay, reqwest::Method::GET, "/v1/destinations", None).await;
    v["destinations"]
        .as_array()?
        .iter()
        .find(|d| d["name"] == name)
        .and_then(|d| d["url"].as_str().map(str::to_owned))
}

/// The keys `hits` sent with `query`.
fn got(hits: &[Hit], query: &str) -> HashSet<String> {
    hits.iter()
        .filter(|h| h.query == query)
        .map(|h| h.key.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destinations_changed_on_one_relay_reach_the_fleet() {
    if !support_redis::available("destinations_changed_on_one_relay_reach_the_fleet") {
        return;
    }
    let redis = support_redis::RedisServer::start();
    let log = Arc::new(Log::default());
    let rx = ok(log.clone(), Duration::ZERO).await;
    // `first` never takes a webhook: each waits for a retry until deleted.
    let down = Arc::new(Log::default());
    let busy = receivers::recording(
        down.clone(),
        Duration::ZERO,
        Arc::new(|_: &Hit, _| StatusCode::SERVICE_UNAVAILABLE.into_response()),
    )
    .await;
    let dir = TempDir::new("shared-changes");
    let node = |name: &str| {
        argv(&format!(
            "--queue redis --redis {} --node-name {name} --destination first=http://{busy}/h?d=first \
             --drain-rate 50 --retry-min 200ms --retry-max 1s --shutdown-grace 2s \
             --admin-token-sha256 {} --journal-dir {} --dead-letter-file {}",
            redis.url(),
            digest(TOKEN),
            dir.arg(&format!("journal-{name}")),
            dir.arg(&format!("dl-{name}.jsonl")),
        ))
    };
    let a = Relay::start_with(&node("a"), &[]).await;
    let b = Relay::start_with(&node("b"), &[]).await;
    let mut held = Vec::new();
    for n in 0..5 {
        let (status, id) = a.post_for("first", n).await;
        assert_eq!(status, 202);
        held.extend(id);
    }

    // Made on a: b takes webhooks for it soon after.
    let second = format!("http://{rx}/h?d=second");
    let (status, v) = put(&a, "second", &second).await;
    assert_eq!(status, 201, "{v}");
    assert!(
        v["origin"].as_str().unwrap_or_default().contains("Redis"),
        "{v}"
    );
    let made = Instant::now();
    let reached = eventually(Duration::from_secs(10), || async {
        b.post_for("second", 100).await.0 == 202
    })
    .await;
    assert!(reached, "b takes webhooks for second");
    let took = made.elapsed();
    eprintln!("a destination made on a took webhooks on b after {took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    let mut sent = HashSet::new();
    for n in 0..10 {
        let relay = if n % 2 == 0 { &a } else { &b };
        let (status, id) = relay.post_for("second", n).await;
        assert_eq!(status, 202);
        sent.extend(id);
    }
    let delivered = log
        .until(Duration::from_secs(20), |hits| {
            sent.is_subset(&got(hits, "d=second"))
        })
        .await;
    assert!(delivered, "every webhook for second delivered");

    // Changed on b: a delivers to the new URL.
    let moved = format!("http://{rx}/h?d=second2");
    let (status, v) = put(&b, "second", &moved).await;
    assert_eq!(status, 200, "{v}");
    let seen = eventually(Duration::from_secs(10), || async {
        listed_url(&a, "second").await.as_deref() == Some(moved.as_str())
    })
    .await;
    assert!(seen, "a lists the new URL");
    let mut later = HashSet::new();
    for n in 20..25 {
        let (status, id) = a.post_for("second", n).await;
        assert_eq!(status, 202);
        later.extend(id);
    }
    let delivered = log
        .until(Duration::from_secs(20), |hits| {
            later.is_subset(&got(hits, "d=second2"))
        })
        .await;
    assert!(delivered, "delivered to the new URL");

    // Made on both at once: one is made, the other changes it (having read
    // it) or is refused (409) for having read it absent; never two makes.
    let (on_a, on_b) = (
        format!("http://{rx}/h?d=third-a"),
        format!("http://{rx}/h?d=third-b"),
    );
    let ((sa, _), (sb, vb)) = tokio::join!(put(&a, "third", &on_a), put(&b, "third", &on_b));
    let mut both = [sa, sb];
    both.sort();
    assert!(both == [200, 201] || both == [201, 409], "{both:?}: {vb}");
    let agreed = eventually(Duration::from_secs(10), || async {
        let (x, y) = (listed_url(&a, "third").await, listed_url(&b, "third").await);
        x.is_some() && x == y
    })
    .await;
    assert!(agreed, "both relays list the same third");

    // The configured `first` deleted on b: closed on a too, not made again
    // while the fleet ends it, its held webhooks dead-lettered after the
    // grace, each once, in the fleet's dead letters.
    let (status, v) = call(&b, reqwest::Method::DELETE, "/v1/destinations/first", None).await;
    assert_eq!(status, 202, "{v}");
    assert_eq!(v["held"], 5, "{v}");
    // Until a learns of it, a takes webhooks for first: they end the same.
    let deleted = Instant::now();
    let until = deleted + Duration::from_secs(10);
    loop {
        match a.post_for("first", 99).await {
            (404, _) => break,
            (202, id) => held.extend(id),
            (other, _) => panic!("a answered {other}"),
        }
        assert!(Instant::now() < until, "a answers 404 for first");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!(
        "a destination deleted on b was closed on a after {:?}",
        deleted.elapsed()
    );
    let (status, v) = put(&a, "first", &second).await;
    assert_eq!(status, 409, "{v}");
    assert_eq!(v["type"], "urn:dripfeed:problem:destination-deleting");
    let want: HashSet<String> = held.iter().cloned().collect();
    let until = Instant::now() + Duration::from_secs(30);
    let letters = loop {
        let (_, page) = call(&a, reqwest::Method::GET, "/v1/dead-letters?limit=100", None).await;
        let letters = page["dead_letters"].as_array().cloned().unwrap_or_default();
        let ids: HashSet<String> = letters
            .iter()
            .filter(|l| l["destination"] == "first")
            .filter_map(|l| l["id"].as_str().map(str::to_owned))
            .collect();
        if ids == want {
            break letters;
        }
        assert!(Instant::now() < until, "not dead-lettered: {letters:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let of_first: Vec<_> = letters
        .iter()
        .filter(|l| l["destination"] == "first")
        .collect();
    assert_eq!(of_first.len(), held.len(), "each once: {of_first:?}");
    assert!(
        of_first
            .iter()
            .all(|l| l["reason"] == "destination-deleted"),
        "{of_first:?}"
    );
    assert!(!down.hits().is_empty(), "first was tried before");

    // A relay started now reads the fleet's changes over its configuration.
    let c = Relay::start_with(&node("c"), &[]).await;
    assert_eq!(
        c.post_for("first", 0).await.0,
        404,
        "deleted, though configured"
    );
    assert_eq!(
        listed_url(&c, "second").await.as_deref(),
        Some(moved.as_str())
    );
    let (status, id) = c.post_for("second", 30).await;
    assert_eq!(status, 202);
    let id = id.unwrap_or_default();
    let delivered = log
        .until(Duration::from_secs(20), |hits| {
            got(hits, "d=second2").contains(&id)
        })
        .await;
    assert!(delivered);
    // Once the fleet has ended it, the name may be made again.
    let remade = eventually(Duration::from_secs(20), || async {
        put(&c, "first", &second).await.0 == 201
    })
    .await;
    assert!(remade, "first made again");
    let open = eventually(Duration::from_secs(10), || async {
        b.post_for("first", 40).await.0 == 202
    })
    .await;
    assert!(open, "b takes webhooks for first again");
}
