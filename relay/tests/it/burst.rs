//! A burst ten times the drain rate through the relay: every 202 is
//! delivered under its id, every refusal says when to retry, the queue never
//! passes its bound, memory stays flat between identical bursts, `/metrics`
//! passes promtool; and a relay shutting down answers 503 `closed`.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::harness::{Relay, TempDir, eventually, http};
use crate::load::burst;
use crate::receivers::{self, Log};

const RATE: f64 = 100.0;
const DEFAULT: (&str, &str) = ("destination", "default");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_ten_times_the_drain_rate_loses_nothing_and_says_when_to_retry() {
    let log = Arc::new(Log::default());
    let rx = receivers::ok(log.clone(), Duration::ZERO).await;
    let dir = TempDir::new("burst");
    let downstream = format!("http://{rx}/hooks");
    let dead_letters = dir.arg("dead-letter.jsonl");
    let relay = Arc::new(
        Relay::start(&format!(
            "--downstream {downstream} --drain-rate 100 --latency-budget 1s \
            --max-in-flight 32 --retries 0 --no-journal --deliver-timeout 5s \
            --tenant-rate 20 --tenant-burst 40 --tenant-header x-tenant \
            --dead-letter-file {dead_letters} --status-line"
        ))
        .await,
    );
    let started = relay
        .out
        .find(Duration::from_secs(5), |l| l.starts_with("delivering to "))
        .await;
    let started = started.expect("the line saying where it delivers");
    assert!(
        started.ends_with("at 100/s, capacity 100 (1s budget), overflow tail-drop"),
        "{started}"
    );
    let bound = 100.0;

    // Watch the depth the drain publishes the whole time.
    let watching = Arc::new(AtomicBool::new(true));
    let watcher = {
        let (relay, watching) = (relay.clone(), watching.clone());
        tokio::spawn(async move {
            let mut worst = 0.0f64;
            while watching.load(Ordering::Relaxed) {
                let m = relay.metrics().await;
                worst = worst.max(m.get("leaky_bucket_queue_depth", &[DEFAULT]));
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            worst
        })
    };

    let mut rss_after = Vec::new();
    let mut accepted = 0;
    let mut accepted_ids = HashSet::new();
    for round in 0..2 {
        // half from one hot tenant (far over its 20/s), half from 50 polite ones
        let b = burst(relay.addr, 1000, 2, |n| {
            let tenant = if n % 2 == 0 {
                "hot".to_owned()
            } else {
                format!("t{}", n % 100)
            };
            vec![("x-tenant", tenant)]
        })
        .await;
        assert_eq!(b.errors, 0, "round {round}: connection errors");
        let (ok, full, quota) = (b.count(202), b.count(503), b.count(429));
        assert_eq!(ok + full + quota, 2000, "round {round}: {:?}", b.statuses);
        assert!((150..=500).contains(&ok), "round {round}: {:?}", b.statuses);
        // The hot tenant (every even request) gets no more than its quota
        // (a burst of 40, then 20/s for 2 s), refused with 429 when over it
        // and with 503 when the queue is near its bound and it holds more
        // than its share; the polite tenants get the rest of the queue.
        let hot_ok = b
            .answers
            .iter()
            .filter(|(n, s)| n % 2 == 0 && *s == 202)
            .count();
        let polite_ok = b
            .answers
            .iter()
            .filter(|(n, s)| n % 2 == 1 && *s == 202)
            .count();
        assert!(
            hot_ok <= 40 + 2 * 20 + 5,
            "round {round}: hot admitted {hot_ok}"
        );
        assert!(
            polite_ok > hot_ok,
            "round {round}: the polite tenants are not crowded out: {polite_ok} vs {hot_ok}"
        );
        assert_eq!(
            b.waits(503).len() as u64,
            full,
            "every 503 carries Retry-After"
        );
        assert_eq!(
            b.waits(429).len() as u64,
            quota,
            "every 429 carries Retry-After"
        );
        let (lo, hi) = ((bound - 2.0) / RATE, 1.2 * bound / RATE + 2.0);
        for secs in b.waits(503) {
            let secs = secs as f64;
            assert!(
                secs >= lo && secs <= hi,
                "503 Retry-After {secs} outside [{lo}, {hi}]"
            );
        }
        // the hot tenant's exact wait for one more webhook is at most 1/20 s,
        // so the header (whole seconds, rounded up, spread by 1 s) says 1 or 2
        for secs in b.waits(429) {
            assert!(secs == 1 || secs == 2, "429 Retry-After {secs}");
        }
        accepted += ok;
        assert_eq!(
            b.accepted_ids.len() as u64,
            ok,
            "each 202 names its webhook"
        );
        accepted_ids.extend(b.accepted_ids.iter().cloned());
        let all = accepted as usize;
        let arrived = log
            .until(Duration::from_secs(20), |hits| hits.len() >= all)
            .await;
        assert!(
            arrived,
            "round {round}: the receiver got {} of {accepted}",
            log.len()
        );
        rss_after.push(relay.rss_kib());
    }
    watching.store(false, Ordering::Relaxed);
    let worst = watcher.await.unwrap();
    assert!(worst <= bound, "depth reached {worst}");
    assert!(worst >= bound * 0.5, "the queue filled: {worst}");
    let growth = rss_after[1] as i64 - rss_after[0] as i64;
    assert!(
        growth.abs() <= 5 * 1024,
        "RSS moved {growth} KiB between identical bursts: {rss_after:?}"
    );
    let keys: HashSet<String> = log.keys().into_keys().collect();
    assert_eq!(
        keys, accepted_ids,
        "the receiver's idempotency keys are the ids of the 202s"
    );
    assert_eq!(log.len(), accepted_ids.len(), "each delivered once");

    // a body over 1 MiB is refused with 413 and a problem document
    let big = http()
        .post(relay.url("/v1/webhooks/deliver"))
        .body(vec![b'x'; (1 << 20) + 1])
        .send()
        .await
        .unwrap();
    assert_eq!(big.status().as_u16(), 413);
    assert_eq!(big.headers()["content-type"], "application/problem+json");

    // the metrics page has the design's names, one series per destination
    let page = relay.metrics_page().await;
    for name in [
        "leaky_bucket_queue_depth",
        "leaky_bucket_queue_capacity",
        "leaky_bucket_drain_rate",
        "leaky_bucket_admitted_total",
        "leaky_bucket_queue_wait_seconds_bucket",
        "leaky_bucket_delivery_seconds_bucket",
    ] {
        assert!(page.contains(name), "{name} missing from /metrics");
    }
    let m = crate::harness::Metrics::parse(&page);
    let jobs = |outcome: &str| {
        m.get(
            "leaky_bucket_jobs_total",
            &[("throttle", "webhook_relay"), DEFAULT, ("outcome", outcome)],
        )
    };
    assert_eq!(
        jobs("delivered"),
        accepted as f64,
        "delivered, by the metrics"
    );
    let overflow = m.get(
        "leaky_bucket_overflow_total",
        &[DEFAULT, ("policy", "tail_drop")],
    );
    let overloaded = m.get(
        "leaky_bucket_rejected_total",
        &[DEFAULT, ("reason", "overloaded")],
    );
    assert!(
        overflow > 0.0 && overloaded > 0.0,
        "tail-drop refusals are counted"
    );
    assert!(
        m.find("leaky_bucket_jobs_total", &[("destination", "_other")])
            .is_none()
    );
    promtool_check(&page);

    // the status line reports the deliveries' p99
    let p99 = relay
        .out
        .find(Duration::from_secs(5), |l| {
            l.contains(" p99 ") && !l.contains("p99       -")
        })
        .await;
    let p99 = p99.expect("a status line with a p99");
    let ms: f64 = p99
        .split(" p99 ")
        .nth(1)
        .and_then(|r| r.trim_start().split("ms").next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::MAX);
    assert!(ms < 10_000.0, "loopback p99 {ms} ms: {p99}");

    // a graceful stop: it says what it delivered
    let mut relay = Arc::into_inner(relay).expect("the watcher is done");
    relay.signal("TERM");
    assert!(relay.exit(Duration::from_secs(30)).await.success());
    let done = relay
        .out
        .find(Duration::from_secs(1), |l| l.starts_with("delivered "))
        .await
        .unwrap();
    assert!(
        done.starts_with(&format!(
            "delivered {accepted}, kept in the journal for the next start 0"
        )),
        "{done}"
    );
}

/// Runs `promtool check metrics` on the page; under CI it must be there.
pub(crate) fn promtool_check(page: &str) {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) if std::env::var("CI").as_deref() != Ok("true") => {
            eprintln!("promtool not found ({e}); skipping the check outside CI");
            return;
        }
        Err(e) => panic!("promtool is required in CI: {e}"),
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(page.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Shutdown closes admission first: while the relay drains, a new webhook
/// is answered 503 `closed`; after the grace what is left goes to the
/// dead-letter file (no journal) and the relay exits 0. (A delivery
/// running at the end of the grace runs to its deliver timeout first.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_shutting_down_answers_503_closed_and_keeps_what_is_left() {
    let rx = receivers::dead().await;
    let dir = TempDir::new("closing");
    let downstream = format!("http://{rx}/hooks");
    let dead_letters = dir.arg("dead-letter.jsonl");
    let mut relay = Relay::start(&format!(
        "--downstream {downstream} --deliver-timeout 3s --shutdown-grace 2s \
            --retries 0 --no-journal --dead-letter-file {dead_letters}"
    ))
    .await;
    for _ in 0..3 {
        assert_eq!(relay.post(&[], "{}").await.0, 202);
    }
    let hanging = eventually(Duration::from_secs(10), || async {
        relay
            .metrics()
            .await
            .get("leaky_bucket_in_flight", &[DEFAULT])
            >= 1.0
    })
    .await;
    assert!(hanging, "a delivery is running against the dead receiver");
    relay.signal("TERM");
    let draining = relay
        .out
        .find(Duration::from_secs(10), |l| l.starts_with("shutting down"))
        .await;
    assert!(draining.is_some(), "it says it is shutting down");
    let (status, problem) = relay.post(&[], "{}").await;
    assert_eq!(status, 503, "{problem}");
    assert_eq!(problem["type"], "urn:dripfeed:problem:closed");
    assert!(relay.exit(Duration::from_secs(30)).await.success());
    let done = relay
        .out
        .find(Duration::from_secs(1), |l| l.starts_with("delivered "))
        .await
        .unwrap();
    assert!(done.ends_with("(3 lines this run)"), "{done}");
    let lines = std::fs::read_to_string(dir.join("dead-letter.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 3, "{lines}");
}
