//! `queue = redis`: two relays share one queue in Redis Streams. Webhooks
//! posted to one are delivered by either; a relay killed (SIGKILL) while it
//! holds webhooks it claimed loses none of them: the other takes them over
//! once they have been pending longer than a delivery can take, and every
//! 202 reaches the receiver. The fleet's bound answers 503 with
//! Retry-After, and an idempotency key is the fleet's: a retry sent to the
//! other relay is the same webhook.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::harness::{Relay, TempDir, argv, eventually};
use crate::receivers;
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

/// A receiver that never answers the first try of a webhook (the relay
/// holding it times out, or dies holding it) and answers 204 to every
/// later try: `answered` counts, per idempotency key, the tries it took.
async fn first_try_hangs(answered: Arc<Mutex<HashMap<String, u32>>>) -> std::net::SocketAddr {
    let tries: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let app = axum::Router::new().fallback(move |headers: axum::http::HeaderMap| {
        let (tries, answered) = (tries.clone(), answered.clone());
        async move {
            let key = headers
                .get("idempotency-key")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            let n = {
                let mut t = tries.lock().unwrap();
                let n = t.entry(key.clone()).or_default();
                *n += 1;
                *n
            };
            if n == 1 {
                // Never answered, never counted (even if the task outlives
                // the relay that sent it).
                tokio::time::sleep(Duration::from_secs(60)).await;
                return axum::http::StatusCode::GATEWAY_TIMEOUT;
            }
            *answered.lock().unwrap().entry(key).or_default() += 1;
            axum::http::StatusCode::NO_CONTENT
        }
    });
    receivers::serve(app).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_killed_with_webhooks_in_hand_loses_none_of_them() {
    if !support_redis::available("a_relay_killed_with_webhooks_in_hand_loses_none_of_them") {
        return;
    }
    let redis = support_redis::RedisServer::start();
    let answered: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let rx = first_try_hangs(answered.clone()).await;
    let dir = TempDir::new("shared-queue");
    let node = |name: &str| {
        argv(&format!(
            "--queue redis --redis {} --node-name {name} --destination billing=http://{rx}/hooks \
             --drain-rate 20 --latency-budget 1s --deliver-timeout 2s --retries 2 --retry-min 500ms \
             --journal-dir {} --dead-letter-file {}",
            redis.url(),
            dir.arg(&format!("journal-{name}")),
            dir.arg(&format!("dl-{name}.jsonl")),
        ))
    };
    let mut a = Relay::start_with(&node("a"), &[]).await;
    // The fleet's bound is budget × rate = 20; nothing is acknowledged yet
    // (first tries hang), so the 21st webhook is refused.
    let mut ids = Vec::new();
    for n in 0..20 {
        let (status, id) = post(&a, n, None).await;
        assert_eq!(status, 202, "webhook {n}");
        ids.extend(id);
    }
    let (status, body) = a.post(&[("content-type", "application/json")], "{}").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["type"], "urn:dripfeed:problem:overloaded");
    // a has claimed some and is delivering them (their first tries hang):
    // killed now, they are pending in Redis in a dead relay's name.
    let claimed = eventually(Duration::from_secs(10), || async {
        let pending = redis.cli(&["XPENDING", "dripfeed:q:{billing}:s", "dripfeed"]);
        pending
            .lines()
            .next()
            .is_some_and(|n| n.trim().parse::<u32>().is_ok_and(|n| n > 0))
    })
    .await;
    assert!(claimed, "a claimed webhooks");
    a.kill().await;
    let b = Relay::start_with(&node("b"), &[]).await;
    // An idempotency key is the fleet's (once there is room again).
    let mut first = None;
    for _ in 0..150 {
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
    // Every 202 is answered by the receiver, exactly once: b delivered what
    // was queued and what a had in hand.
    let all = eventually(Duration::from_secs(60), || async {
        let done = answered.lock().unwrap();
        ids.iter().all(|id| done.contains_key(id))
    })
    .await;
    let done = answered.lock().unwrap().clone();
    let missing: Vec<&String> = ids.iter().filter(|id| !done.contains_key(*id)).collect();
    assert!(
        all,
        "{} of {} 202s never answered: {missing:?}",
        missing.len(),
        ids.len()
    );
    let twice: Vec<_> = done.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "answered more than once: {twice:?}");
    let reclaimed = b
        .err
        .all()
        .iter()
        .any(|l| l.contains("took over a webhook a relay left pending"));
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
        ("--redis-failure open", "open cannot be kept"),
        (
            "--redis redis://127.0.0.1:1/,redis://127.0.0.1:2/ --redis-wait-replicas 1",
            "not available with a cluster",
        ),
    ] {
        let line = match flags.starts_with("--redis ") {
            true => flags.to_owned(),
            false => format!("{redis} {flags}"),
        };
        let (code, _, err) = run(line).await;
        assert_eq!(code, 2, "{flags}: {err}");
        assert!(err.contains(says), "{flags}: {err}");
    }
    let (code, out, err) = run(redis.to_owned()).await;
    assert_eq!(code, 0, "{out}{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_asks_the_shared_queues_redis() {
    if !support_redis::available("readyz_asks_the_shared_queues_redis") {
        return;
    }
    let mut redis = support_redis::RedisServer::start();
    let dir = TempDir::new("shared-readyz");
    let relay = Relay::start_with(
        &argv(&format!(
            "--queue redis --redis {} --node-name r --destination billing=http://127.0.0.1:9/hooks \
             --journal-dir {} --dead-letter-file {}",
            redis.url(),
            dir.arg("journal"),
            dir.arg("dl.jsonl"),
        )),
        &[],
    )
    .await;
    let readyz = || async {
        let resp = crate::harness::http()
            .get(relay.admin_url("/readyz"))
            .send()
            .await
            .expect("the admin listener answers");
        let status = resp.status().as_u16();
        (status, resp.text().await.unwrap_or_default())
    };
    assert_eq!(readyz().await.0, 200);
    redis.kill();
    let down = eventually(Duration::from_secs(20), || async {
        readyz().await.0 == 503
    })
    .await;
    let (status, body) = readyz().await;
    assert!(down, "{status} {body}");
    assert!(body.contains("shared queue"), "{body}");
    // Intake refuses rather than promise: 503, never a 202 it cannot keep.
    let (status, _) = relay
        .post(&[("content-type", "application/json")], "{}")
        .await;
    assert_eq!(status, 503);
    redis.restart();
    let up = eventually(Duration::from_secs(20), || async {
        readyz().await.0 == 200
    })
    .await;
    assert!(up, "{:?}", readyz().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_202_waits_for_the_replicas_asked_for() {
    if !support_redis::available("a_202_waits_for_the_replicas_asked_for") {
        return;
    }
    let primary = support_redis::RedisServer::start();
    let mut replica = support_redis::RedisServer::start_replica_of(&primary);
    let dir = TempDir::new("shared-replicas");
    let relay = Relay::start_with(
        &argv(&format!(
            "--queue redis --redis {} --node-name r --redis-wait-replicas 1 \
             --destination billing=http://127.0.0.1:9/hooks --drain-rate 0.01 --latency-budget 10000s \
             --journal-dir {} --dead-letter-file {}",
            primary.url(),
            dir.arg("journal"),
            dir.arg("dl.jsonl"),
        )),
        &[],
    )
    .await;
    // Once the replica has synced, a webhook is confirmed by it: 202.
    let synced = eventually(Duration::from_secs(20), || async {
        post(&relay, 1, None).await.0 == 202
    })
    .await;
    let last = relay
        .post(&[("content-type", "application/json")], "{\"n\":1}")
        .await;
    assert!(synced, "a replica confirms webhooks: {last:?}");
    // Without it, a 202 cannot be kept as asked: 503 unreplicated.
    replica.kill();
    let (status, body) = relay
        .post(&[("content-type", "application/json")], "{\"n\":2}")
        .await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["type"], "urn:dripfeed:problem:unreplicated");
    // A retry with the same key is not answered 202 either: the repeat
    // waits for the replicas too.
    for _ in 0..2 {
        let (status, body) = relay
            .post(
                &[
                    ("content-type", "application/json"),
                    ("idempotency-key", "k-unreplicated"),
                ],
                "{\"n\":3}",
            )
            .await;
        assert_eq!(status, 503, "{body}");
        assert_eq!(
            body["type"],
            "urn:dripfeed:problem:unreplicated",
            "{:?}",
            relay.err.all()
        );
    }
    let m = relay.metrics().await;
    for purpose in ["queue_admit", "queue_wait"] {
        let trips = m.get("dripfeed_redis_round_trips_total", &[("purpose", purpose)]);
        assert!(trips >= 2.0, "{purpose}: {trips} round trips");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_quotas_are_the_fleets_and_a_repeat_costs_nothing() {
    if !support_redis::available("tenant_quotas_are_the_fleets_and_a_repeat_costs_nothing") {
        return;
    }
    let redis = support_redis::RedisServer::start();
    let dir = TempDir::new("shared-quotas");
    let node = |name: &str| {
        argv(&format!(
            "--queue redis --redis {} --node-name {name} --tenant-rate 0.001 --tenant-burst 2 \
             --destination billing=http://127.0.0.1:9/hooks --drain-rate 0.01 --latency-budget 10000s \
             --journal-dir {} --dead-letter-file {}",
            redis.url(),
            dir.arg(&format!("journal-{name}")),
            dir.arg(&format!("dl-{name}.jsonl")),
        ))
    };
    let a = Relay::start_with(&node("a"), &[]).await;
    let b = Relay::start_with(&node("b"), &[]).await;
    let send = |relay: &Relay, tenant: &'static str, key: Option<&'static str>| {
        let url = relay.url("/v1/webhooks/deliver");
        async move {
            let mut req = crate::harness::http()
                .post(url)
                .header("content-type", "application/json")
                .header("x-tenant", tenant)
                .body("{}");
            if let Some(k) = key {
                req = req.header("idempotency-key", k);
            }
            let resp = req.send().await.expect("the relay answers");
            let status = resp.status().as_u16();
            let retry = resp.headers().get("retry-after").is_some();
            let body: serde_json::Value =
                serde_json::from_str(&resp.text().await.unwrap_or_default()).unwrap_or_default();
            (status, body, retry)
        }
    };
    // acme's burst of 2 is spent on a; b refuses its third with 429.
    assert_eq!(send(&a, "acme", None).await.0, 202);
    assert_eq!(send(&a, "acme", None).await.0, 202);
    let (status, body, retry) = send(&b, "acme", None).await;
    assert_eq!((status, retry), (429, true), "{body}");
    assert_eq!(body["type"], "urn:dripfeed:problem:over-quota");
    assert_eq!(
        send(&b, "other", None).await.0,
        202,
        "another tenant's quota"
    );
    // A repeat (on the other relay) answers the first id and is not
    // charged: zed still has room for one more.
    let (s1, first, _) = send(&a, "zed", Some("k-1")).await;
    let (s2, again, _) = send(&b, "zed", Some("k-1")).await;
    assert_eq!((s1, s2), (202, 202));
    assert_eq!(first["id"], again["id"]);
    assert_eq!(again["status"], "duplicate");
    assert_eq!(
        send(&b, "zed", None).await.0,
        202,
        "the repeat cost nothing"
    );
    assert_eq!(send(&b, "zed", None).await.0, 429);
    let trips = b
        .metrics()
        .await
        .get("dripfeed_redis_round_trips_total", &[("purpose", "quota")]);
    assert!(trips >= 4.0, "quota round trips: {trips}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_are_the_fleets_and_a_redrive_from_any_relay_keeps_their_ids() {
    use axum::response::IntoResponse;
    use sha2::{Digest, Sha256};
    use std::sync::atomic::{AtomicBool, Ordering};
    if !support_redis::available(
        "dead_letters_are_the_fleets_and_a_redrive_from_any_relay_keeps_their_ids",
    ) {
        return;
    }
    const TOKEN: &str = "shared-redrive-token";
    let redis = support_redis::RedisServer::start();
    let log = Arc::new(receivers::Log::default());
    // Refuses (400, final) until healed.
    let healed = Arc::new(AtomicBool::new(false));
    let healthy = healed.clone();
    let rx = receivers::recording(
        log.clone(),
        Duration::ZERO,
        Arc::new(
            move |_: &receivers::Hit, _| match healthy.load(Ordering::Relaxed) {
                true => axum::http::StatusCode::NO_CONTENT.into_response(),
                false => axum::http::StatusCode::BAD_REQUEST.into_response(),
            },
        ),
    )
    .await;
    let dir = TempDir::new("shared-redrive");
    let digest: String = Sha256::digest(TOKEN.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let file = dir.join("relay.toml");
    std::fs::write(
        &file,
        format!(
            "admin_token_sha256 = \"{digest}\"\n\
             [[destinations]]\nname = \"billing\"\nurl = \"http://{rx}/b\"\n"
        ),
    )
    .unwrap();
    let node = |name: &str| {
        argv(&format!(
            "--config {} --queue redis --redis {} --node-name {name} --drain-rate 50 \
             --journal-dir {} --dead-letter-file {}",
            file.display(),
            redis.url(),
            dir.arg(&format!("journal-{name}")),
            dir.arg(&format!("dl-{name}.jsonl")),
        ))
    };
    let a = Relay::start_with(&node("a"), &[]).await;
    let mut ids = Vec::new();
    for n in 0..3 {
        let (status, id) = post(&a, n, None).await;
        assert_eq!(status, 202);
        ids.extend(id);
    }
    let status_of = |relay: &Relay, id: &str| {
        let url = relay.url(&format!("/v1/webhooks/{id}"));
        async move {
            let resp = crate::harness::http()
                .get(url)
                .send()
                .await
                .expect("answers");
            let body: serde_json::Value =
                serde_json::from_str(&resp.text().await.unwrap_or_default()).unwrap_or_default();
            body
        }
    };
    let b = Relay::start_with(&node("b"), &[]).await;
    let letters = |relay: &Relay, query: &str| {
        let url = relay.admin_url(&format!("/v1/dead-letters{query}"));
        async move {
            let resp = crate::harness::http()
                .get(url)
                .bearer_auth(TOKEN)
                .send()
                .await
                .expect("the admin listener answers");
            assert_eq!(resp.status().as_u16(), 200);
            let page: serde_json::Value =
                serde_json::from_str(&resp.text().await.unwrap_or_default()).unwrap_or_default();
            page
        }
    };
    // Dead-lettered by a, listed by b: the fleet's, in Redis.
    let dead = eventually(Duration::from_secs(20), || async {
        letters(&b, "").await["dead_letters"]
            .as_array()
            .is_some_and(|l| l.len() == 3)
    })
    .await;
    assert!(dead, "three dead letters: {}", letters(&b, "").await);
    let page = letters(&b, "?limit=2").await;
    assert_eq!(page["more"], true, "{page}");
    let first = &page["dead_letters"][0];
    assert_eq!(
        (
            &first["reason"],
            &first["last_status"],
            &first["destination"]
        ),
        (
            &serde_json::json!("failed"),
            &serde_json::json!(400),
            &serde_json::json!("billing")
        ),
        "{page}"
    );
    assert_eq!(first["body"], "{\"n\":0}");
    let cursor = page["next_cursor"].as_str().expect("a cursor").to_owned();
    let rest = letters(&b, &format!("?cursor={cursor}")).await;
    assert_eq!(
        rest["dead_letters"].as_array().map(Vec::len),
        Some(1),
        "{rest}"
    );
    let file = std::fs::read_to_string(dir.join("dl-a.jsonl")).unwrap_or_default();
    assert!(file.is_empty(), "not in a's file: {file}");
    for id in &ids {
        let s = status_of(&b, id).await;
        assert_eq!(s["state"], "dead_lettered", "{s}");
        assert_eq!(s["last_status"], 400, "{s}");
    }
    healed.store(true, Ordering::Relaxed);
    let resp = crate::harness::http()
        .post(b.admin_url("/v1/dead-letters/redrive"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(r#"{"destination":"billing"}"#)
        .send()
        .await
        .expect("the admin listener answers");
    assert_eq!(resp.status().as_u16(), 200);
    let done: serde_json::Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
    assert_eq!(
        (done["readmitted"].as_u64(), done["refused"].as_u64()),
        (Some(3), Some(0)),
        "{done}"
    );
    // Back in the fleet's queue with their ids: delivered (by a or b), and
    // b answers for them.
    let delivered = log
        .until(Duration::from_secs(20), |hits| {
            // Each id twice: refused (400) once, then taken (204).
            ids.iter()
                .all(|id| hits.iter().filter(|h| &h.key == id).count() >= 2)
        })
        .await;
    assert!(delivered, "each id tried again: {:?}", log.keys());
    let settled = eventually(Duration::from_secs(10), || async {
        let mut all = true;
        for id in &ids {
            all &= status_of(&b, id).await["state"] == "delivered";
        }
        all
    })
    .await;
    assert!(
        settled,
        "b says delivered: {}",
        status_of(&b, &ids[0]).await
    );
    let after = letters(&a, "").await;
    assert_eq!(
        after["dead_letters"].as_array().map(Vec::len),
        Some(0),
        "{after}"
    );
}
