//! A 202 is a promise: the relay, run as a child process with its journal,
//! is flooded, killed with SIGKILL mid-burst, and started again on the same
//! directory; every webhook it answered 202 must reach the receiver, with
//! no more duplicates than the deliveries that were running and a batch of
//! ends not yet journaled. With destinations, each must also reach it
//! through the destination it named.
//!
//! Real time and real processes (a loopback integration test): bounded in
//! time and count, asserting counts only.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::HeaderMap;
use axum::routing::post;

use crate::harness::{Relay, argv, http};

/// Waits until `done` holds, re-checking whenever `changed` is notified, for at most `limit`.
async fn until(changed: &tokio::sync::Notify, limit: Duration, done: impl Fn() -> bool) -> bool {
    let wait = async {
        loop {
            let more = changed.notified();
            if done() {
                return;
            }
            more.await;
        }
    };
    tokio::time::timeout(limit, wait).await.is_ok()
}

/// Deliveries the receiver saw, by idempotency key, and the query of the
/// URL each key was delivered to (which destination sent it).
#[derive(Default)]
struct Seen {
    keys: Mutex<HashMap<String, u32>>,
    routes: Mutex<HashMap<String, String>>,
    more: tokio::sync::Notify,
}

async fn receiver(seen: Arc<Seen>) -> std::net::SocketAddr {
    let app = Router::new().route(
        "/hooks",
        post(move |uri: axum::http::Uri, headers: HeaderMap| {
            let seen = seen.clone();
            async move {
                // Slow enough that deliveries are running when the relay dies.
                tokio::time::sleep(Duration::from_millis(20)).await;
                if let Some(key) = headers.get("idempotency-key").and_then(|v| v.to_str().ok()) {
                    *seen.keys.lock().unwrap().entry(key.to_owned()).or_default() += 1;
                    let route = uri.query().unwrap_or_default().to_owned();
                    seen.routes.lock().unwrap().insert(key.to_owned(), route);
                    seen.more.notify_waiters();
                }
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

const MAX_IN_FLIGHT: usize = 16;

/// Duplicates allowed after the kill: the deliveries running then, plus
/// those that had landed but whose ends the journal's writer had not yet
/// written (the README's "at most `--max-in-flight` plus a batch"): at the
/// drain's 400/s, 8 is 20 ms of them, a writer thread kept off the CPU for
/// a few scheduler slices on two busy cores.
const MAX_DUPLICATES: usize = MAX_IN_FLIGHT + 8;

/// Starts the relay on the journal `dir` delivering to `downstream`.
async fn start_relay(dir: &std::path::Path, downstream: std::net::SocketAddr) -> Relay {
    let url = format!("http://{downstream}/hooks");
    start_relay_with(dir, &["--downstream".into(), url]).await
}

/// Starts the relay on the journal `dir` with `target` (its receivers' flags).
async fn start_relay_with(dir: &std::path::Path, target: &[String]) -> Relay {
    let dead_letter = dir.with_extension("dead-letter.jsonl");
    let mut args = argv(&format!(
        "--drain-rate 400 --latency-budget 10s --max-in-flight {MAX_IN_FLIGHT} \
         --retries 3 --retry-min 50ms --retry-max 1s --journal-dir {} --dead-letter-file {}",
        dir.display(),
        dead_letter.display()
    ));
    args.extend_from_slice(target);
    Relay::start_with(&args, &[]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_webhook_answered_202_survives_a_sigkill() {
    let seen = Arc::new(Seen::default());
    let downstream = receiver(seen.clone()).await;
    let target = ["--downstream".into(), format!("http://{downstream}/hooks")];
    crash_and_restart("crash", &target, &[], &seen).await;
}

/// With destinations, one journal holds every destination's webhooks: after
/// the kill each one is delivered by the destination it was sent to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_destinations_every_202_survives_a_sigkill_and_keeps_its_destination() {
    let seen = Arc::new(Seen::default());
    let downstream = receiver(seen.clone()).await;
    let mut target = Vec::new();
    for d in ["a", "b"] {
        target.push("--destination".to_owned());
        target.push(format!("{d}=http://{downstream}/hooks?d={d}"));
    }
    target.extend(["--max-in-flight-per-destination".into(), "8".into()]);
    crash_and_restart("crash-fanout", &target, &["a", "b"], &seen).await;
    let routes = seen.routes.lock().unwrap();
    assert!(
        routes.values().any(|r| r == "d=a") && routes.values().any(|r| r == "d=b"),
        "both destinations delivered"
    );
}

/// Floods the relay started with `target`, kills it mid-burst, starts it
/// again on the same journal, and checks every 202 reached the receiver
/// (through the destination it named, when `dests` is not empty) with no
/// more duplicates than the deliveries running at the kill.
async fn crash_and_restart(name: &str, target: &[String], dests: &[&str], seen: &Arc<Seen>) {
    let dir = std::env::temp_dir().join(format!("dripfeed-relay-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut relay = start_relay_with(&dir, target).await;
    let addr = relay.addr;

    // 32 senders flood it; each 202 names the webhook's id.
    let accepted = Arc::new(Mutex::new(Vec::<(String, String)>::new()));
    let flooding = Arc::new(AtomicBool::new(true));
    let got = Arc::new(tokio::sync::Notify::new());
    let client = http();
    let mut senders = Vec::new();
    for s in 0..32 {
        let (client, accepted, flooding) = (client.clone(), accepted.clone(), flooding.clone());
        let got = got.clone();
        let url = format!("http://{addr}/v1/webhooks/deliver");
        let dest = dests.get(s % dests.len().max(1)).map(|d| d.to_string());
        senders.push(tokio::spawn(async move {
            let mut n = 0;
            while flooding.load(Ordering::Relaxed) {
                n += 1;
                let body = format!("{{\"sender\":{s},\"n\":{n}}}");
                let mut req = client.post(&url).body(body);
                if let Some(d) = &dest {
                    req = req.header("x-destination", d);
                }
                let Ok(resp) = req.send().await else {
                    return; // the relay died
                };
                if resp.status().as_u16() == 202
                    && let Ok(text) = resp.text().await
                    && let Ok(v) = serde_json::from_str::<serde_json::Value>(&text)
                    && let Some(id) = v["id"].as_str()
                {
                    let route = dest.as_ref().map(|d| format!("d={d}")).unwrap_or_default();
                    accepted.lock().unwrap().push((id.to_owned(), route));
                    got.notify_waiters();
                }
            }
        }));
    }
    // Kill it mid-burst: some delivered, some queued, some in flight.
    let burst = || accepted.lock().unwrap().len() >= 1500;
    assert!(
        until(&got, Duration::from_secs(60), burst).await,
        "the relay accepted too little in 60 s"
    );
    // The journal's group commits are on /metrics.
    let syncs = relay
        .metrics()
        .await
        .find("leaky_bucket_journal_syncs_total", &[])
        .unwrap_or(0.0);
    let answered = accepted.lock().unwrap().len();
    eprintln!("{name}: {syncs} journal fsyncs for {answered} answered 202");
    assert!(syncs >= 1.0, "the journal's fsyncs are counted: {syncs}");
    relay.kill().await; // SIGKILL
    flooding.store(false, Ordering::Relaxed);
    for s in senders {
        let _ = s.await;
    }
    let accepted = accepted.lock().unwrap().clone();
    let delivered_before = seen.keys.lock().unwrap().len();
    assert!(
        delivered_before < accepted.len(),
        "killed mid-burst: {delivered_before} of {} delivered",
        accepted.len()
    );

    // The same directory again: what was unfinished is delivered.
    let _relay = start_relay_with(&dir, target).await;
    let all = || {
        let keys = seen.keys.lock().unwrap();
        accepted.iter().all(|(id, _)| keys.contains_key(id))
    };
    if !until(&seen.more, Duration::from_secs(60), all).await {
        let keys = seen.keys.lock().unwrap();
        let missing = accepted
            .iter()
            .filter(|(id, _)| !keys.contains_key(id))
            .count();
        panic!(
            "{missing} of {} accepted webhooks never arrived",
            accepted.len()
        );
    }
    let routes = seen.routes.lock().unwrap();
    let misrouted = accepted.iter().filter(|(id, r)| routes[id] != *r).count();
    assert_eq!(
        misrouted, 0,
        "every webhook went to the destination it named"
    );
    let keys = seen.keys.lock().unwrap();
    let duplicates: u32 = keys.values().map(|n| n - 1).sum();
    assert!(
        duplicates as usize <= MAX_DUPLICATES,
        "{duplicates} duplicates; at most the {MAX_IN_FLIGHT} deliveries running at the kill and a batch of ends"
    );
    eprintln!(
        "{name}: accepted {}, delivered before the kill {delivered_before}, duplicates {duplicates}",
        accepted.len()
    );
    drop((keys, routes));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(dir.with_extension("dead-letter.jsonl"));
}

async fn post_keyed(addr: &str, key: &str, body: &str) -> (u16, serde_json::Value) {
    let resp = http()
        .post(format!("http://{addr}/v1/webhooks/deliver"))
        .header("idempotency-key", key)
        .body(body.to_owned())
        .send()
        .await
        .expect("the relay answers");
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or_default())
}

/// A sender's retried POST (same `Idempotency-Key`) is answered 202 with
/// the first id and enqueues nothing, before and after a restart; the same
/// key with another body is a 422. One delivery in all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_idempotency_key_is_one_webhook_across_a_restart() {
    let dir = std::env::temp_dir().join(format!("dripfeed-relay-idem-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let seen = Arc::new(Seen::default());
    let downstream = receiver(seen.clone()).await;
    let mut relay = start_relay(&dir, downstream).await;
    let addr = relay.addr.to_string();

    let (status, first) = post_keyed(&addr, "order-17", "{\"paid\":true}").await;
    assert_eq!(status, 202, "{first}");
    let id = first["id"].as_str().unwrap().to_owned();
    let (status, again) = post_keyed(&addr, "order-17", "{\"paid\":true}").await;
    assert_eq!((status, again["id"].as_str()), (202, Some(id.as_str())));
    let (status, other) = post_keyed(&addr, "order-17", "{\"paid\":false}").await;
    assert_eq!(status, 422, "{other}");

    // A graceful restart (SIGTERM): the key outlives the process.
    relay.signal("TERM");
    assert!(relay.exit(Duration::from_secs(30)).await.success());
    let relay = start_relay(&dir, downstream).await;
    let addr = relay.addr.to_string();
    let (status, after) = post_keyed(&addr, "order-17", "{\"paid\":true}").await;
    assert_eq!((status, after["id"].as_str()), (202, Some(id.as_str())));

    let delivered = || seen.keys.lock().unwrap().contains_key(&id);
    assert!(
        until(&seen.more, Duration::from_secs(30), delivered).await,
        "the webhook was not delivered in 30 s"
    );
    let keys = seen.keys.lock().unwrap().clone();
    assert_eq!(keys.len(), 1, "one webhook in all: {keys:?}");
    assert_eq!(keys[&id], 1, "delivered once");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(dir.with_extension("dead-letter.jsonl"));
}

/// The journal's directory deleted while the relay runs (the journal makes
/// it again): a key accepted before is still remembered after a restart (a
/// new body is a 422, the same one the first id), because the keys' file
/// is made again with every key the relay remembers (before, the key was
/// forgotten and the new body taken as a second webhook). A change made
/// through the admin API then is kept too (the registry's file made
/// again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_outlive_their_directory_deleted_while_running() {
    let dir = std::env::temp_dir().join(format!("dripfeed-relay-idem-gone-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let seen = Arc::new(Seen::default());
    let downstream = receiver(seen.clone()).await;
    let mut relay = start_relay(&dir, downstream).await;
    let addr = relay.addr.to_string();
    let (status, first) = post_keyed(&addr, "order-1", "{\"paid\":true}").await;
    assert_eq!(status, 202, "{first}");
    let id = first["id"].as_str().unwrap().to_owned();

    std::fs::remove_dir_all(&dir).unwrap();
    // Taken again once the journal has made its directory again.
    let mut taken = false;
    for n in 0..300 {
        let (status, _) = post_keyed(&addr, &format!("later-{n}"), "{}").await;
        if status == 202 {
            taken = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(taken, "the relay never took a webhook again");
    // A change answered now is kept: the registry's file is made again
    // (before, it went on into the deleted file and was lost at restart).
    let changed = http()
        .patch(relay.admin_url("/v1/destinations/default"))
        .header("content-type", "application/merge-patch+json")
        .body("{\"rate\": 77}")
        .send()
        .await
        .unwrap();
    assert_eq!(changed.status(), 200);

    relay.signal("TERM");
    assert!(relay.exit(Duration::from_secs(30)).await.success());
    let relay = start_relay(&dir, downstream).await;
    let addr = relay.addr.to_string();
    let (status, other) = post_keyed(&addr, "order-1", "{\"paid\":false}").await;
    assert_eq!(status, 422, "the key is remembered: {other}");
    let (status, again) = post_keyed(&addr, "order-1", "{\"paid\":true}").await;
    assert_eq!((status, again["id"].as_str()), (202, Some(id.as_str())));
    let kept = http()
        .get(relay.admin_url("/v1/destinations/default"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let kept: serde_json::Value = serde_json::from_str(&kept).unwrap();
    assert_eq!(
        kept["rate"], 77.0,
        "the change outlived the restart: {kept}"
    );
    drop(relay);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(dir.with_extension("dead-letter.jsonl"));
}
