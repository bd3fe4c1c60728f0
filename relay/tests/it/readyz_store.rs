//! `/readyz` asks the shared tenant store: with Redis stopped it answers
//! 503 naming `redis` (failing closed: the store errs; failing open: it
//! answers from this relay's fallback, so the fleet no longer shares its
//! quotas), and 200 once Redis is back.

use std::sync::Arc;
use std::time::Duration;

use crate::harness::{Relay, TempDir, argv, eventually, http};
use crate::receivers::{self, Log};
use crate::support_redis;

/// `/readyz`'s status and body.
async fn readyz(relay: &Relay) -> (u16, String) {
    match http().get(relay.admin_url("/readyz")).send().await {
        Ok(resp) => (
            resp.status().as_u16(),
            resp.text().await.unwrap_or_default(),
        ),
        Err(e) => (0, e.to_string()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_is_503_while_redis_is_stopped_and_200_once_it_is_back() {
    if !support_redis::available("readyz_is_503_while_redis_is_stopped_and_200_once_it_is_back") {
        return;
    }
    let mut redis = support_redis::RedisServer::start();
    let url = redis.url();
    let rx = receivers::ok(Arc::new(Log::default()), Duration::ZERO).await;
    let dir = TempDir::new("readyz-store");
    let mut relays = Vec::new();
    for failure in ["closed", "open"] {
        let args = argv(&format!(
            "--no-journal --tenant-rate 20 --redis {url} --redis-failure {failure} \
             --downstream http://{rx}/hooks --dead-letter-file {}",
            dir.arg(&format!("dl-{failure}.jsonl"))
        ));
        relays.push(Relay::start_with(&args, &[]).await);
    }
    for relay in &relays {
        let (status, body) = readyz(relay).await;
        assert_eq!(status, 200, "{body}");
    }

    redis.kill();
    for relay in &relays {
        let down = eventually(Duration::from_secs(20), || async {
            readyz(relay).await.0 == 503
        })
        .await;
        let (status, body) = readyz(relay).await;
        assert!(down, "{status} {body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        assert_eq!(v["down"][0]["name"], "redis", "{body}");
    }

    redis.restart();
    for relay in &relays {
        let up = eventually(Duration::from_secs(30), || async {
            readyz(relay).await.0 == 200
        })
        .await;
        assert!(up, "{:?}", readyz(relay).await);
    }
}
