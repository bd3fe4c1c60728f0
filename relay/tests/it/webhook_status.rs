//! `GET /v1/webhooks/{id}`: a webhook's status, followed from the 202 to
//! its end. Each destination drains one webhook a second, so the second
//! one posted waits queued; `ok` answers 204 after 600 ms (in flight), and
//! `bad` answers 503 with `Retry-After: 1` once (retry waiting, with when)
//! and then 400 (dead-lettered). Another tenant's key gets the same 404 as
//! an unknown id; the admin token sees every webhook on the admin listener.
//! A restart remembers the ended ones (written beside the journal).

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::harness::{Relay, TempDir, http};
use crate::receivers::{self, Hit, Log};

const ACME: &str = "acme-status-key";
const OTHER: &str = "other-status-key";
const ADMIN: &str = "admin-status-token";

fn digest(key: &str) -> String {
    Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// GET `url` with `token`: status and JSON body (`Null` if none).
async fn get(url: &str, token: Option<&str>) -> (u16, Value) {
    let mut req = http().get(url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.expect("the relay answers");
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// POSTs a webhook as acme to `destination`: its id.
async fn post(relay: &Relay, destination: &str) -> String {
    let resp = http()
        .post(relay.url("/v1/webhooks/deliver"))
        .bearer_auth(ACME)
        .header("x-destination", destination)
        .header("content-type", "application/json")
        .body("{\"n\":1}")
        .send()
        .await
        .expect("the relay answers");
    assert_eq!(resp.status().as_u16(), 202);
    let body: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
    body["id"].as_str().unwrap().to_owned()
}

/// Polls the status of `id` every 50 ms until it reaches `last` (at most
/// 20 s): the states seen, each once, in order, and the last answer.
async fn follow(relay: &Relay, id: &str, last: &str) -> (Vec<String>, Value) {
    let url = relay.url(&format!("/v1/webhooks/{id}"));
    let mut seen: Vec<String> = Vec::new();
    for _ in 0..400 {
        let (status, body) = get(&url, Some(ACME)).await;
        assert_eq!(status, 200, "{body}");
        let state = body["state"].as_str().unwrap_or("?").to_owned();
        if seen.last() != Some(&state) {
            seen.push(state.clone());
        }
        if state == last {
            return (seen, body);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{id} never reached {last}: {seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_is_followed_to_delivered_and_to_dead_lettered() {
    let (ok_log, bad_log) = (Arc::new(Log::default()), Arc::new(Log::default()));
    let ok = receivers::ok(ok_log.clone(), Duration::from_millis(600)).await;
    let bad = receivers::recording(
        bad_log.clone(),
        Duration::ZERO,
        Arc::new(|_: &Hit, tries| match tries {
            1 => (StatusCode::SERVICE_UNAVAILABLE, [("retry-after", "1")]).into_response(),
            _ => StatusCode::BAD_REQUEST.into_response(),
        }),
    )
    .await;
    let dir = TempDir::new("webhook-status");
    let file = dir.join("relay.toml");
    let text = format!(
        "admin_token_sha256 = \"{admin}\"\n\
         [[destinations]]\nname = \"ok\"\nurl = \"http://{ok}/hooks\"\nrate = 1\nbudget = \"10s\"\n\
         [[destinations]]\nname = \"bad\"\nurl = \"http://{bad}/hooks\"\nrate = 1\nbudget = \"10s\"\n\
         [[tenants]]\nname = \"acme\"\n[[tenants.keys]]\nsha256 = \"{acme}\"\n\
         [[tenants]]\nname = \"other\"\n[[tenants.keys]]\nsha256 = \"{other}\"\n",
        admin = digest(ADMIN),
        acme = digest(ACME),
        other = digest(OTHER),
    );
    std::fs::write(&file, text).unwrap();
    let args = format!(
        "--config {} --journal-dir {} --retry-min 1s --dead-letter-file {}",
        file.display(),
        dir.arg("journal"),
        dir.arg("dl.jsonl")
    );
    let relay = Relay::start(&args).await;

    // The first of each goes at once; the second waits a second, queued.
    let _first_ok = post(&relay, "ok").await;
    let delivered = post(&relay, "ok").await;
    let _first_bad = post(&relay, "bad").await;
    let dead = post(&relay, "bad").await;

    // Both followed at once, from the moment of their 202.
    let (to_delivered, to_dead) = tokio::join!(
        follow(&relay, &delivered, "delivered"),
        follow(&relay, &dead, "dead_lettered"),
    );
    let (seen, body) = to_delivered;
    assert_eq!(seen.first().map(String::as_str), Some("queued"), "{seen:?}");
    assert!(
        seen.iter()
            .all(|s| ["queued", "in_flight", "delivered"].contains(&s.as_str())),
        "{seen:?}"
    );
    assert_eq!(body["attempts"], 1, "{body}");
    assert_eq!(body["last_status"], 204, "{body}");
    assert_eq!(body["destination"], "ok", "{body}");
    assert!(body["ended_at"].is_string(), "{body}");

    let (seen, body) = to_dead;
    assert_eq!(seen.first().map(String::as_str), Some("queued"), "{seen:?}");
    assert!(seen.contains(&"retry_waiting".to_owned()), "{seen:?}");
    assert_eq!(body["attempts"], 2, "{body}");
    assert_eq!(body["last_status"], 400, "{body}");
    assert!(body["next_attempt_at"].is_null(), "{body}");

    // While one waits for its retry, the answer says when.
    let third = post(&relay, "bad").await;
    let (_, waiting) = follow(&relay, &third, "retry_waiting").await;
    assert!(waiting["next_attempt_at"].is_string(), "{waiting}");

    // Another tenant, an unknown id, a non-number: the same 404.
    for (id, key) in [
        (delivered.as_str(), OTHER),
        (dead.as_str(), OTHER),
        ("12345", ACME),
        ("not-a-number", ACME),
    ] {
        let (status, body) = get(&relay.url(&format!("/v1/webhooks/{id}")), Some(key)).await;
        assert_eq!(status, 404, "{id}: {body}");
        assert_eq!(body["type"], "urn:dripfeed:problem:unknown-webhook");
    }
    // No key: 401.
    let (status, _) = get(&relay.url(&format!("/v1/webhooks/{delivered}")), None).await;
    assert_eq!(status, 401);

    // The admin token sees every webhook; no token is a 401 there.
    let admin = |id: &str| relay.admin_url(&format!("/v1/webhooks/{id}"));
    let (status, body) = get(&admin(&dead), Some(ADMIN)).await;
    assert_eq!(
        (status, body["state"].as_str()),
        (200, Some("dead_lettered"))
    );
    assert_eq!(get(&admin(&dead), None).await.0, 401);
    assert_eq!(get(&admin("12345"), Some(ADMIN)).await.0, 404);

    // The statuses are counted.
    let m = relay.metrics().await;
    assert!(m.get("dripfeed_relay_webhook_statuses", &[("kind", "ended")]) >= 3.0);
    assert_eq!(ok_log.len(), 2);

    // A crash with three webhooks still held (ok drains one a second), and
    // a restart: what ended is remembered (kept beside the journal), with
    // its owner: acme still sees both, the other tenant still does not.
    // The three held ones are known from the start, before any attempt.
    let held = [
        post(&relay, "ok").await,
        post(&relay, "ok").await,
        post(&relay, "ok").await,
    ];
    let mut relay = relay;
    relay.kill().await;
    let relay = Relay::start(&args).await;
    for id in &held {
        let (status, body) = get(&relay.url(&format!("/v1/webhooks/{id}")), Some(ACME)).await;
        assert_eq!(status, 200, "{id}, recovered: {body}");
        assert_eq!(body["destination"], "ok", "{body}");
    }
    let last = &held[2];
    let (_, body) = follow(&relay, last, "delivered").await;
    assert_eq!(body["last_status"], 204, "{body}");
    for (id, state, last) in [
        (&delivered, "delivered", 204),
        (&dead, "dead_lettered", 400),
    ] {
        let url = relay.url(&format!("/v1/webhooks/{id}"));
        let (status, body) = get(&url, Some(ACME)).await;
        assert_eq!(status, 200, "{id} after a restart: {body}");
        assert_eq!(
            (body["state"].as_str(), body["last_status"].as_u64()),
            (Some(state), Some(last)),
            "{body}"
        );
        assert!(body["ended_at"].is_string(), "{body}");
        assert_eq!(get(&url, Some(OTHER)).await.0, 404);
    }
}
