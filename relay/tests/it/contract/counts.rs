//! Refusals, overflow, admissions, deliveries and dead letters are counted
//! under the library's series names in both engines; every `Retry-After`
//! is spread (refused senders do not all come back together); a
//! destination's view shows its counts (the fleet's, in fleet mode); and a
//! sum over the relays of a fleet counts each webhook once, the fleet's
//! depth under a name of its own, the same on every relay.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use super::{Bench, Engine, both, post, receiver};
use crate::harness::eventually;
use crate::receivers::Log;

both!(refusals_and_ends_are_counted_alike);

async fn refusals_and_ends_are_counted_alike(engine: Engine) {
    let ok = Arc::new(Log::default());
    let rx = receiver(ok.clone(), 204, Duration::ZERO).await;
    let failing = Arc::new(Log::default());
    let bad = receiver(failing.clone(), 400, Duration::ZERO).await;
    // a: 2/s for 2 s, a queue of 4; b refuses every webhook for good.
    let bench = Bench::start(
        engine,
        "counts",
        &format!(
            "--destination a=http://{rx}/a --destination b=http://{bad}/b --drain-rate 2 \
             --latency-budget 2s --retries 0"
        ),
    )
    .await;
    let relay = &bench.relay;
    let (mut accepted, mut refused) = (0u64, 0u64);
    let mut told = BTreeSet::new();
    for n in 0..40 {
        let p = post(relay, "a", &[], &format!("{{\"n\":{n}}}")).await;
        match p.status {
            202 => accepted += 1,
            503 => {
                assert_eq!(
                    p.body["type"], "urn:dripfeed:problem:overloaded",
                    "{}",
                    p.body
                );
                refused += 1;
                told.insert(p.retry_after.expect("a 503 says when to retry"));
            }
            other => panic!("{other}: {}", p.body),
        }
    }
    assert!(
        accepted >= 4 && refused >= 20,
        "{accepted} accepted, {refused} refused"
    );
    assert!(
        told.len() >= 2,
        "Retry-After spreads refused senders: {told:?} over {refused} refusals"
    );
    for n in 0..3 {
        assert_eq!(
            post(relay, "b", &[], &format!("{{\"n\":{n}}}"))
                .await
                .status,
            202
        );
    }

    // Every 202 delivered or dead-lettered, and counted as such.
    let done = ok
        .until(Duration::from_secs(40), |hits| {
            hits.len() as u64 >= accepted
        })
        .await;
    assert!(done, "{} of {accepted} delivered", ok.len());
    let counted = eventually(Duration::from_secs(10), || async {
        let m = relay.metrics().await;
        let a = [("destination", "a")];
        let b = [("destination", "b")];
        let jobs = |labels: &[(&str, &str)], outcome| {
            let mut l = labels.to_vec();
            l.push(("outcome", outcome));
            m.get("leaky_bucket_jobs_total", &l)
        };
        m.get("leaky_bucket_admitted_total", &a) == accepted as f64
            && m.get(
                "leaky_bucket_rejected_total",
                &[("destination", "a"), ("reason", "overloaded")],
            ) == refused as f64
            && m.get(
                "leaky_bucket_overflow_total",
                &[("destination", "a"), ("policy", "tail_drop")],
            ) == refused as f64
            && jobs(&a, "delivered") == accepted as f64
            && jobs(&a, "refused") == refused as f64
            && jobs(&b, "dead_lettered") == 3.0
            && m.get("leaky_bucket_emitted_total", &a) >= accepted as f64
    })
    .await;
    let page = relay.metrics_page().await;
    let ours: Vec<&str> = page
        .lines()
        .filter(|l| l.starts_with("leaky_bucket_") && !l.contains("_bucket{"))
        .collect();
    assert!(
        counted,
        "the series count what happened:\n{}",
        ours.join("\n")
    );

    // The destination's view: its counts (the fleet's, in fleet mode).
    let a = bench.live("a").await;
    assert_eq!(a["accepted"], accepted, "{a}");
    assert_eq!(a["refused"], refused, "{a}");
    assert_eq!(a["delivered"], accepted, "{a}");
    let b = bench.live("b").await;
    assert_eq!(
        (b["accepted"].as_u64(), b["dead_lettered"].as_u64()),
        (Some(3), Some(3)),
        "{b}"
    );
}

/// A fleet of two relays: each counts what it admitted (the sum counts
/// each webhook once); the fleet's depth is the same on both, under its
/// own name; each relay's view shows the fleet's counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_counts_each_webhook_once() {
    if !crate::support_redis::available("a_fleet_counts_each_webhook_once") {
        return;
    }
    // A receiver that never answers: nothing is delivered, the queue stays.
    let rx = crate::receivers::dead().await;
    let bench = Bench::start(
        Engine::Fleet,
        "fleet-counts",
        &format!("--destination a=http://{rx}/a --drain-rate 1 --latency-budget 100s --deliver-timeout 30s"),
    )
    .await;
    let other = bench.another("n2").await;
    for n in 0..6 {
        assert_eq!(
            post(&bench.relay, "a", &[], &format!("{{\"n\":{n}}}"))
                .await
                .status,
            202
        );
    }
    for n in 0..4 {
        assert_eq!(
            post(&other, "a", &[], &format!("{{\"n\":{n}}}"))
                .await
                .status,
            202
        );
    }
    let a = [("destination", "a")];
    let (m1, m2) = (bench.relay.metrics().await, other.metrics().await);
    assert_eq!(m1.get("leaky_bucket_admitted_total", &a), 6.0);
    assert_eq!(m2.get("leaky_bucket_admitted_total", &a), 4.0);
    let same = eventually(Duration::from_secs(10), || async {
        let (m1, m2) = (bench.relay.metrics().await, other.metrics().await);
        let fleet = |m: &crate::harness::Metrics| m.find("dripfeed_relay_fleet_queue_depth", &a);
        fleet(&m1) == Some(10.0) && fleet(&m2) == Some(10.0)
    })
    .await;
    assert!(
        same,
        "the fleet's depth, the same on both relays:\n{}",
        other.metrics_page().await
    );
    let m1 = bench.relay.metrics().await;
    assert!(
        m1.get("leaky_bucket_queue_depth", &a) <= 2.0,
        "a relay's own depth is what it claimed, not the fleet's"
    );
    for relay in [&bench.relay, &other] {
        let live = super::get_json(&relay.admin_url("/v1/destinations/a")).await["live"].clone();
        assert_eq!(live["accepted"], 10, "{live}");
        assert_eq!(live["capacity"], 100, "{live}");
    }
}
