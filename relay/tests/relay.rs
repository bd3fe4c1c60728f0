//! The webhook relay on loopback: a burst ten times the drain rate, real time,
//! bounded in count and time; asserts counts and generous bounds only.

#[path = "../src/app.rs"]
#[allow(dead_code)]
mod app;
#[path = "../src/budget.rs"]
#[allow(dead_code)]
mod budget;
#[path = "../src/dead_letter.rs"]
#[allow(dead_code)]
mod dead_letter;
#[path = "../src/demo.rs"]
#[allow(dead_code)]
mod demo;
#[path = "../src/fanout.rs"]
#[allow(dead_code)]
mod fanout;
#[path = "../src/idempotency.rs"]
mod idempotency;
#[path = "../src/latency.rs"]
mod latency;
#[path = "../src/receiver.rs"]
#[allow(dead_code)]
mod receiver;
#[path = "../src/redrive.rs"]
mod redrive;
#[path = "../src/tenants.rs"]
#[allow(dead_code)]
mod tenants;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use app::{Relay, RelayConfig};
use dripfeed::Overflow;

/// The relay both tests start: tail-drop, 32 in flight, a 64 MiB byte
/// budget, no tenants, no retries, delivering to `downstream`.
fn config(dead_letter_file: std::path::PathBuf, downstream: String) -> RelayConfig {
    RelayConfig {
        drain_rate: 100.0,
        latency_budget: Duration::from_secs(1),
        overflow: Overflow::TailDrop,
        dead_letter_file,
        max_in_flight: 32,
        max_queue_bytes: 64 << 20,
        downstream,
        tenant_header: "x-tenant".into(),
        deliver_timeout: Duration::from_secs(5),
        adaptive: None,
        tenant_quota: None,
        retry: None,
        journal: None,
        fanout: None,
    }
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_ten_times_the_drain_rate_loses_nothing_and_says_when_to_retry() {
    const RATE: f64 = 100.0;
    let prometheus = metrics_exporter_prometheus::PrometheusBuilder::new()
        .set_buckets_for_metric(
            metrics_exporter_prometheus::Matcher::Suffix("_seconds".into()),
            &[0.001, 0.01, 0.1, 1.0, 10.0],
        )
        .unwrap()
        .install_recorder()
        .unwrap();
    let rx = receiver::Receiver::new(10_000.0);
    let rx_addr = receiver::serve("127.0.0.1:0".parse().unwrap(), rx.clone())
        .await
        .unwrap();
    let dl = std::env::temp_dir().join(format!("dripfeed-relay-test-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&dl);
    let relay = Relay::start(RelayConfig {
        drain_rate: RATE,
        tenant_quota: Some(dripfeed::keyed::Quota::new(40.0, 20.0).unwrap()),
        ..config(dl.clone(), format!("http://{rx_addr}/hooks"))
    })
    .await
    .unwrap();
    let bound = relay.throttle.capacity();
    assert_eq!(bound, 100);
    let stop = Arc::new(tokio::sync::Notify::new());
    let s2 = stop.clone();
    let (addr, server) = app::serve(
        "127.0.0.1:0".parse().unwrap(),
        app::router(relay.clone(), Some(prometheus)),
        async move { s2.notified().await },
    )
    .await
    .unwrap();

    // watch the depth the whole time
    let worst = Arc::new(AtomicUsize::new(0));
    let watching = Arc::new(AtomicBool::new(true));
    let watcher = {
        let (relay, worst, watching) = (relay.clone(), worst.clone(), watching.clone());
        tokio::spawn(async move {
            while watching.load(Ordering::Relaxed) {
                worst.fetch_max(relay.throttle.stats().depth() as usize, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    };

    let mut rss_after = Vec::new();
    let mut accepted = 0;
    let mut accepted_ids = std::collections::HashSet::new();
    for round in 0..2 {
        // half from one hot tenant (far over its 20/s), half from 50 polite ones
        let b = demo::burst(addr, &relay, 1000, 2, |n| {
            Some(if n % 2 == 0 {
                "hot".to_owned()
            } else {
                format!("t{}", n % 100)
            })
        })
        .await;
        assert_eq!(b.errors, 0, "round {round}: connection errors");
        let (ok, full, quota) = (b.count(202), b.count(503), b.count(429));
        assert_eq!(ok + full + quota, 2000, "round {round}: {:?}", b.statuses);
        assert!((150..=500).contains(&ok), "round {round}: {:?}", b.statuses);
        assert!(
            quota >= 600,
            "round {round}: the hot tenant is held to its quota: {:?}",
            b.statuses
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
        let (lo, hi) = ((bound as f64 - 2.0) / RATE, 1.2 * bound as f64 / RATE + 1.0);
        for secs in b.waits(503) {
            let secs = secs as f64;
            assert!(
                secs >= lo && secs <= hi,
                "503 Retry-After {secs} outside [{lo}, {hi}]"
            );
        }
        // the hot tenant's exact wait for one more webhook is at most 1/20 s,
        // so the header (whole seconds, rounded up) says 1
        for secs in b.waits(429) {
            assert_eq!(secs, 1, "429 Retry-After {secs}");
        }
        accepted += b.count(202);
        assert_eq!(
            b.accepted_ids.len() as u64,
            b.count(202),
            "each 202 names its job"
        );
        accepted_ids.extend(b.accepted_ids.iter().cloned());
        relay.drained(Duration::from_secs(20)).await;
        assert_eq!(
            rx.stats().ok,
            accepted,
            "round {round}: receiver count == 202s"
        );
        rss_after.push(rss_kib());
    }
    watching.store(false, Ordering::Relaxed);
    watcher.await.unwrap();
    assert!(
        worst.load(Ordering::Relaxed) <= bound,
        "depth reached {}",
        worst.load(Ordering::Relaxed)
    );
    let growth = rss_after[1] as i64 - rss_after[0] as i64;
    assert!(
        growth.abs() <= 5 * 1024,
        "RSS moved {growth} KiB between identical bursts: {rss_after:?}"
    );

    // a body over 1 MiB is refused with 413 and a problem document
    let client = reqwest::Client::new();
    let big = client
        .post(format!("http://{addr}/v1/webhooks/deliver"))
        .body(vec![b'x'; app::MAX_BODY + 1])
        .send()
        .await
        .unwrap();
    assert_eq!(big.status().as_u16(), 413);
    assert_eq!(big.headers()["content-type"], "application/problem+json");

    // the metrics page has the design's names and passes promtool
    let page = client
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for name in [
        "leaky_bucket_queue_depth",
        "leaky_bucket_queue_capacity",
        "leaky_bucket_drain_rate",
        "leaky_bucket_admitted_total",
        "leaky_bucket_jobs_total{throttle=\"webhook_relay\",outcome=\"delivered\"}",
        "leaky_bucket_overflow_total{throttle=\"webhook_relay\",policy=\"tail_drop\"}",
        "leaky_bucket_rejected_total{throttle=\"webhook_relay\",reason=\"overloaded\"}",
        "leaky_bucket_queue_wait_seconds_bucket",
        "leaky_bucket_delivery_seconds_bucket",
    ] {
        assert!(page.contains(name), "{name} missing from /metrics");
    }
    promtool_check(&page);

    let report = relay.throttle.shutdown(Duration::from_secs(5)).await;
    assert_eq!(report.stats.delivered(), accepted);
    assert_eq!(
        rx.delivered_keys(),
        accepted_ids,
        "the receiver's idempotency keys are the ids of the 202s"
    );
    let p99 = relay
        .latencies
        .take_p99()
        .expect("deliveries recorded their latency");
    assert!(p99 < Duration::from_secs(10), "loopback p99 {p99:?}");
    assert_eq!(relay.latencies.take_p99(), None, "read and reset");
    // after shutdown: 503, closed
    let late = client
        .post(format!("http://{addr}/v1/webhooks/deliver"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(late.status().as_u16(), 503);
    let problem: serde_json::Value = serde_json::from_str(&late.text().await.unwrap()).unwrap();
    assert_eq!(problem["type"], "urn:dripfeed:problem:closed");
    stop.notify_one();
    server.await.unwrap();
    let _ = std::fs::remove_file(&dl);
}

/// Runs `promtool check metrics` on the page; in CI it must be there.
fn promtool_check(page: &str) {
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

/// A receiver that fails the first try of three webhooks in four (503 with
/// `Retry-After: 0`, 429 without a hint, a dropped connection), keyed by the
/// idempotency key each delivery carries: with retries the relay delivers
/// every accepted webhook and dead-letters none, each is delivered once, and
/// retries never push the receiver above the drain rate in any second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flaky_receiver_gets_every_webhook_through_retries() {
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::IntoResponse;
    use std::collections::HashMap;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Flaky {
        tries: Mutex<HashMap<String, u32>>,
        ok: Mutex<HashMap<String, u32>>,
        arrivals: Mutex<Vec<std::time::Instant>>,
    }
    let flaky = Arc::new(Flaky::default());
    let state = flaky.clone();
    let app = axum::Router::new().fallback(axum::routing::post(
        move |headers: HeaderMap, _body: axum::body::Bytes| {
            let state = state.clone();
            async move {
                let key = headers
                    .get("idempotency-key")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_owned();
                let n: u64 = key.parse().unwrap_or(0);
                state
                    .arrivals
                    .lock()
                    .unwrap()
                    .push(std::time::Instant::now());
                let tries = {
                    let mut t = state.tries.lock().unwrap();
                    let e = t.entry(key.clone()).or_default();
                    *e += 1;
                    *e
                };
                match (n % 4, tries) {
                    (1, 1) => {
                        (StatusCode::SERVICE_UNAVAILABLE, [("retry-after", "0")]).into_response()
                    }
                    (2, 1) => StatusCode::TOO_MANY_REQUESTS.into_response(),
                    // The connection is dropped without an answer (the
                    // connection's task ends with this panic).
                    (3, 1) => panic!("dropping the connection"),
                    _ => {
                        *state.ok.lock().unwrap().entry(key).or_default() += 1;
                        StatusCode::NO_CONTENT.into_response()
                    }
                }
            }
        },
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let rx_addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });

    let dl = std::env::temp_dir().join(format!(
        "dripfeed-relay-retries-{}.jsonl",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&dl);
    const RATE: f64 = 100.0;
    let relay = Relay::start(RelayConfig {
        drain_rate: RATE,
        latency_budget: Duration::from_secs(4),
        retry: Some(
            dripfeed::RetryPolicy::new(4)
                .backoff(Duration::from_millis(20), Duration::from_millis(200)),
        ),
        ..config(dl.clone(), format!("http://{rx_addr}/hooks"))
    })
    .await
    .unwrap();
    let stop = Arc::new(tokio::sync::Notify::new());
    let s2 = stop.clone();
    let (addr, server) = app::serve(
        "127.0.0.1:0".parse().unwrap(),
        app::router(relay.clone(), None),
        async move { s2.notified().await },
    )
    .await
    .unwrap();

    let b = demo::burst(addr, &relay, 300, 1, |_| None).await;
    let accepted = b.count(202);
    assert_eq!(accepted, 300, "all fit: {:?}", b.statuses);
    relay.drained(Duration::from_secs(20)).await;
    let report = relay.throttle.shutdown(Duration::from_secs(5)).await;
    let dead = relay.sink.written().await;
    stop.notify_one();
    let _ = server.await;
    let _ = std::fs::remove_file(&dl);

    let ok = flaky.ok.lock().unwrap().clone();
    assert_eq!(report.stats.delivered(), accepted);
    assert_eq!(dead, 0, "nothing dead-lettered");
    assert_eq!(
        ok.len() as u64,
        accepted,
        "every webhook reached the receiver"
    );
    assert!(ok.values().all(|&n| n == 1), "each answered 2xx once");
    let ids: std::collections::HashSet<String> = b.accepted_ids.iter().cloned().collect();
    assert!(ok.keys().all(|k| ids.contains(k)), "keys are the 202 ids");
    // About three in four failed once and were retried.
    let retried = report.stats.retried();
    assert!((150..=300).contains(&retried), "retried {retried}");
    // Retries go through the same pacer: at most the drain rate (and the
    // pacing contract's ⌈1.01 R⌉ + 1, plus network jitter) in any second.
    let arrivals = flaky.arrivals.lock().unwrap().clone();
    let worst = arrivals
        .iter()
        .map(|&t| {
            arrivals
                .iter()
                .filter(|&&u| u >= t && u < t + Duration::from_secs(1))
                .count()
        })
        .max()
        .unwrap_or(0);
    assert!(
        worst as f64 <= RATE * 1.1,
        "{worst} requests in one second at {RATE}/s"
    );
}

/// Webhooks a receiver refuses for good (410) are dead-lettered with their
/// id, destination, attempts and last status; once it is healthy,
/// `--redrive` admits them again under the same ids, and refuses to read
/// the relay's own dead-letter file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_name_their_webhook_and_redrive_delivers_them_under_their_ids() {
    use axum::http::{HeaderMap, StatusCode};
    use std::collections::HashSet;
    use std::sync::Mutex;

    let healthy = Arc::new(AtomicBool::new(false));
    let delivered = Arc::new(Mutex::new(Vec::<String>::new()));
    let (h, d) = (healthy.clone(), delivered.clone());
    let app = axum::Router::new().fallback(axum::routing::post(move |headers: HeaderMap| {
        let (h, d) = (h.clone(), d.clone());
        async move {
            if !h.load(Ordering::Relaxed) {
                return StatusCode::GONE; // final: not retried
            }
            let key = headers.get("idempotency-key").and_then(|v| v.to_str().ok());
            d.lock().unwrap().push(key.unwrap_or("").to_owned());
            StatusCode::NO_CONTENT
        }
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let rx_addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let tmp = std::env::temp_dir();
    let pid = std::process::id();
    let dl = tmp.join(format!("dripfeed-relay-redrive-{pid}.jsonl"));
    let dl2 = tmp.join(format!("dripfeed-relay-redrive-{pid}-2.jsonl"));
    let _ = std::fs::remove_file(&dl);
    let _ = std::fs::remove_file(&dl2);
    let downstream = format!("http://{rx_addr}/hooks");
    let relay = Relay::start(RelayConfig {
        retry: Some(dripfeed::RetryPolicy::new(4)),
        ..config(dl.clone(), downstream.clone())
    })
    .await
    .unwrap();
    let (addr, server) = app::serve(
        "127.0.0.1:0".parse().unwrap(),
        app::router(relay.clone(), None),
        std::future::pending(),
    )
    .await
    .unwrap();
    let b = demo::burst(addr, &relay, 100, 1, |_| None).await;
    let n = b.count(202);
    assert!(n >= 90, "accepted {n}: {:?}", b.statuses);
    relay.throttle.shutdown(Duration::from_secs(10)).await;
    assert_eq!(relay.sink.written().await, n);
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&dl)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ids: HashSet<String> = b.accepted_ids.iter().cloned().collect();
    for line in &lines {
        assert!(ids.contains(line["id"].as_str().unwrap()), "{line}");
        assert_eq!(line["destination"], downstream.as_str());
        assert_eq!(
            (line["attempts"].as_u64(), line["last_status"].as_u64()),
            (Some(1), Some(410))
        );
    }
    server.abort();

    // The receiver is healthy again: a second relay redrives the file.
    healthy.store(true, Ordering::Relaxed);
    let again = Relay::start(config(dl2.clone(), downstream)).await.unwrap();
    let own = redrive::redrive(&again, &dl2).await;
    assert!(own.is_err(), "its own dead-letter file is refused");
    let done = redrive::redrive(&again, &dl).await.unwrap();
    assert_eq!(
        done,
        redrive::Redriven {
            readmitted: n,
            refused: 0,
            unreadable: 0
        }
    );
    let report = again.throttle.shutdown(Duration::from_secs(10)).await;
    assert_eq!(report.stats.delivered(), n);
    let seen: HashSet<String> = delivered.lock().unwrap().iter().cloned().collect();
    assert_eq!(seen, ids, "delivered under the ids their 202s named");
    for f in [&dl, &dl2] {
        let _ = std::fs::remove_file(f);
    }
}
