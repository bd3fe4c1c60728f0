//! What a queued webhook costs, counted by the allocator (the relay built
//! with `heap-count`, as `cargo test --all-features` builds it): a relay
//! whose drain is nearly stopped takes 3,000 webhooks of 1 KiB, and the
//! heap it holds grows by at most the body + 384 bytes each (the per-job
//! overhead `max_queue_bytes` charges). Connections are closed before each
//! reading, so only what the queue holds is counted; the ring (sized for
//! the budget) is made by the first webhook, before the first reading, and
//! there is no journal: this is the marginal cost of a queued webhook.

#![cfg(feature = "heap-count")]

use std::sync::Arc;
use std::time::Duration;

use crate::harness::{Relay, TempDir, eventually, http};
use crate::receivers::{Log, ok};

const BODY: usize = 1024;
const JOBS: usize = 3000;

/// The heap the relay holds now (a fresh connection, closed after).
async fn heap(relay: &Relay) -> f64 {
    relay.metrics().await.get("dripfeed_relay_heap_bytes", &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_webhook_costs_its_body_and_at_most_384_bytes() {
    let rx = ok(Arc::new(Log::default()), Duration::ZERO).await;
    let dir = TempDir::new("memory");
    let relay = Relay::start(&format!(
        "--downstream http://{rx}/hooks --no-journal --drain-rate 0.1 --latency-budget 100000s \
         --dead-letter-file {}",
        dir.arg("dl.jsonl")
    ))
    .await;
    let body = format!("{{\"pad\":\"{}\"}}", "x".repeat(BODY - 10));
    assert_eq!(body.len(), BODY);
    let url = relay.url("/v1/webhooks/deliver");
    let post = |client: reqwest::Client| {
        let (url, body) = (url.clone(), body.clone());
        async move {
            let resp = client
                .post(url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .expect("the relay answers");
            resp.status().as_u16()
        }
    };
    // The destination's throttle (its ring, sized for the budget) exists
    // from the first webhook on: made before the first reading.
    assert_eq!(post(http()).await, 202);
    let idle = eventually(Duration::from_secs(20), || async {
        let m = relay.metrics().await;
        m.get("dripfeed_relay_connections", &[("listener", "intake")]) == 0.0
    })
    .await;
    assert!(idle, "the first connection closed");
    let before = heap(&relay).await;
    assert!(before > 0.0, "the relay counts its heap");
    let client = http();
    for chunk in 0..JOBS / 100 {
        let mut sends = tokio::task::JoinSet::new();
        for _ in 0..100 {
            sends.spawn(post(client.clone()));
        }
        let statuses = sends.join_all().await;
        assert!(
            statuses.iter().all(|s| *s == 202),
            "chunk {chunk}: {statuses:?}"
        );
    }
    drop(client); // its connections close: their buffers leave the relay
    let closed = eventually(Duration::from_secs(20), || async {
        let m = relay.metrics().await;
        m.get("dripfeed_relay_connections", &[("listener", "intake")]) == 0.0
    })
    .await;
    assert!(closed, "the intake connections closed");
    let after = heap(&relay).await;
    let per_job = (after - before) / JOBS as f64;
    println!("heap per queued webhook: {per_job:.0} B ({before} -> {after})");
    assert!(
        per_job <= (BODY + 384) as f64,
        "a queued webhook of {BODY} B holds {per_job:.0} B of heap"
    );
    assert!(per_job >= BODY as f64, "the body is held: {per_job:.0} B");
}
