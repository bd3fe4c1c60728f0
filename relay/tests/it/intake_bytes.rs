//! Memory bounded in bytes: keys and tenant names over 256 bytes are a
//! 400; the bytes of keys held count in `dripfeed_relay_held_bytes` with
//! the bodies; a refused request's key is released at once; bodies are
//! limited by `--max-body-bytes`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::harness::{Relay, TempDir, eventually, http};
use crate::intake_keys::post_raw;
use crate::receivers::{self, Log};

const HELD: &str = "dripfeed_relay_held_bytes";
const KEYS: &str = "dripfeed_relay_idempotency_keys";

/// A relay delivering to `rx`, in memory, with `extra` flags.
async fn relay(rx: SocketAddr, dir: &TempDir, extra: &str) -> Relay {
    Relay::start(&format!(
        "--downstream http://{rx}/hooks --no-journal --retries 0 --deliver-timeout 60s \
         --dead-letter-file {} {extra}",
        dir.arg("dead-letter.jsonl"),
    ))
    .await
}

/// A 300-byte `Idempotency-Key` or tenant name is a 400 with a problem
/// body; 256 bytes of each are taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_and_tenant_names_over_256_bytes_are_refused() {
    let log = Arc::new(Log::default());
    let rx = receivers::ok(log, Duration::ZERO).await;
    let dir = TempDir::new("long-names");
    let relay = relay(rx, &dir, "").await;
    let long = "k".repeat(300);
    let fits = "k".repeat(256);
    for header in ["idempotency-key", "x-tenant"] {
        let (status, body) = post_raw(relay.addr, &[(header, long.as_bytes())], "{}").await;
        assert_eq!(status, 400, "{header} of 300 bytes: {body}");
        assert!(
            body["type"]
                .as_str()
                .is_some_and(|t| t.starts_with("urn:dripfeed:problem:")),
            "{body}"
        );
        assert!(
            !body.to_string().contains(&long),
            "the problem does not echo it"
        );
        let (status, body) = post_raw(relay.addr, &[(header, fits.as_bytes())], "{}").await;
        assert_eq!(status, 202, "{header} of 256 bytes: {body}");
    }
}

/// With the queue full, 200 requests with distinct 250-byte keys are all
/// refused 503, and leave the bytes held and the keys remembered where
/// they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_key_is_released_at_once() {
    let rx = receivers::dead().await;
    let dir = TempDir::new("refused-key");
    let relay = relay(
        rx,
        &dir,
        "--drain-rate 1 --latency-budget 1s --max-in-flight 1",
    )
    .await;
    // One in flight (never answered), one queued, then 503s.
    let full = eventually(Duration::from_secs(20), || async {
        relay.post(&[], "{}").await.0 == 503
    })
    .await;
    assert!(full, "the queue fills");
    let m = relay.metrics().await;
    let (held, keys) = (m.find(HELD, &[]), m.find(KEYS, &[]));
    assert!(held.is_some() && keys.is_some(), "the gauges exist");
    let mut refused = 0;
    for i in 0..200 {
        let key = format!("{i:03}-{}", "r".repeat(246));
        let (status, _) = post_raw(relay.addr, &[("idempotency-key", key.as_bytes())], "{}").await;
        refused += u32::from(status == 503);
    }
    assert_eq!(refused, 200, "every keyed request is refused");
    let m = relay.metrics().await;
    eprintln!(
        "held bytes {held:?} -> {:?}, keys {keys:?} -> {:?}",
        m.find(HELD, &[]),
        m.find(KEYS, &[])
    );
    assert_eq!(m.find(HELD, &[]), held, "no bytes retained");
    assert_eq!(m.find(KEYS, &[]), keys, "no keys retained");
}

/// Ten webhooks with 200-byte keys add at least 2,000 bytes more to
/// `dripfeed_relay_held_bytes` than ten without.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bytes_held_include_keys() {
    let rx = receivers::dead().await;
    let dir = TempDir::new("held-keys");
    let relay = relay(rx, &dir, "--drain-rate 1000 --max-in-flight 64").await;
    let held = || async { relay.metrics().await.find(HELD, &[]).unwrap_or(-1.0) };
    let h0 = held().await;
    for _ in 0..10 {
        assert_eq!(relay.post(&[], "0123456789").await.0, 202);
    }
    let h1 = held().await;
    for i in 0..10 {
        let key = format!("{i:02}-{}", "h".repeat(197));
        let (status, _) = post_raw(
            relay.addr,
            &[("idempotency-key", key.as_bytes())],
            "0123456789",
        )
        .await;
        assert_eq!(status, 202);
    }
    let h2 = held().await;
    eprintln!("held bytes: {h0} idle, {h1} with 10 webhooks, {h2} with 10 keyed more");
    assert!(h0 >= 0.0, "the gauge exists");
    assert!(h1 - h0 >= 100.0, "bodies count");
    assert!(h2 - h1 >= (h1 - h0) + 2000.0, "keys count: {h0} {h1} {h2}");
}

/// `--max-body-bytes 1000`: 1,000 bytes are taken, 1,001 are a 413.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_body_limit_is_a_setting() {
    let log = Arc::new(Log::default());
    let rx = receivers::ok(log, Duration::ZERO).await;
    let dir = TempDir::new("body-limit");
    let relay = relay(rx, &dir, "--max-body-bytes 1000").await;
    let send = |n: usize| {
        http()
            .post(relay.url("/v1/webhooks/deliver"))
            .body("b".repeat(n))
            .send()
    };
    let at = send(1000).await.expect("an answer").status().as_u16();
    let over = send(1001).await.expect("an answer").status().as_u16();
    assert_eq!((at, over), (202, 413));
}
