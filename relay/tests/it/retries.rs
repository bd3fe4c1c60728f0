//! Retries through a flaky receiver, and dead letters redriven under the
//! ids their 202s named.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::IntoResponse;

use crate::harness::{Relay, TempDir, run};
use crate::load::burst;
use crate::receivers::{self, Hit, Log};

const DEFAULT: (&str, &str) = ("destination", "default");

/// A receiver that fails the first try of three webhooks in four (503 with
/// `Retry-After: 0`, 429 without a hint, a dropped connection), keyed by
/// the idempotency key each delivery carries: with retries the relay
/// delivers every accepted webhook and dead-letters none, each is answered
/// 2xx once, and retries never push the receiver above the drain rate in
/// any second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flaky_receiver_gets_every_webhook_through_retries() {
    const RATE: f64 = 100.0;
    let log = Arc::new(Log::default());
    let answer = |hit: &Hit, tries: usize| {
        let n: u64 = hit.key.parse().unwrap_or(0);
        match (n % 4, tries) {
            (1, 1) => (StatusCode::SERVICE_UNAVAILABLE, [("retry-after", "0")]).into_response(),
            (2, 1) => StatusCode::TOO_MANY_REQUESTS.into_response(),
            // The connection is dropped without an answer (the
            // connection's task ends with this panic).
            (3, 1) => panic!("dropping the connection"),
            _ => StatusCode::NO_CONTENT.into_response(),
        }
    };
    let rx = receivers::recording(log.clone(), Duration::ZERO, Arc::new(answer)).await;
    let dir = TempDir::new("retries");
    let downstream = format!("http://{rx}/hooks");
    let dead_letters = dir.arg("dead-letter.jsonl");
    let mut relay = Relay::start(&format!(
        "--downstream {downstream} --drain-rate 100 --latency-budget 4s \
            --max-in-flight 32 --retries 3 --retry-min 20ms --retry-max 200ms \
            --no-journal --dead-letter-file {dead_letters}"
    ))
    .await;
    let b = burst(relay.addr, 300, 1, |_| Vec::new()).await;
    let accepted = b.count(202);
    assert_eq!(accepted, 300, "all fit: {:?}", b.statuses);
    let ids: HashSet<String> = b.accepted_ids.iter().cloned().collect();
    let answered_ok = |hits: &[Hit]| {
        let first_failed = |h: &Hit| h.key.parse::<u64>().unwrap_or(0) % 4 != 0;
        let mut tries: HashMap<&str, usize> = HashMap::new();
        let mut ok = HashSet::new();
        for h in hits {
            let t = tries.entry(h.key.as_str()).or_default();
            *t += 1;
            if !(first_failed(h) && *t == 1) {
                ok.insert(h.key.clone());
            }
        }
        ok
    };
    let all_ok = log
        .until(Duration::from_secs(30), |hits| {
            answered_ok(hits).len() >= 300
        })
        .await;
    assert!(
        all_ok,
        "every webhook reached the receiver: {} of 300",
        answered_ok(&log.hits()).len()
    );
    let m = relay.metrics().await;
    relay.signal("TERM");
    assert!(relay.exit(Duration::from_secs(30)).await.success());
    let done = relay
        .out
        .find(Duration::from_secs(1), |l| l.starts_with("delivered "))
        .await
        .unwrap();
    assert!(
        done.starts_with("delivered 300,") && done.ends_with("(0 lines this run)"),
        "nothing dead-lettered: {done}"
    );

    let hits = log.hits();
    let ok = answered_ok(&hits);
    assert_eq!(ok, ids, "the keys answered 2xx are the 202s' ids");
    let mut answered: HashMap<&str, usize> = HashMap::new();
    for h in &hits {
        *answered.entry(h.key.as_str()).or_default() += 1;
    }
    assert!(
        answered.values().all(|&n| n <= 2),
        "each answered 2xx once, after at most one failure"
    );
    // About three in four failed once and were retried.
    let retried = m.get("leaky_bucket_retries_total", &[DEFAULT]);
    assert!((150.0..=300.0).contains(&retried), "retried {retried}");
    // Retries go through the same pacer: the relay emits at most
    // ⌈1.01 R⌉ + 1 in any second. Arrivals at the receiver, another process
    // on a busy 2-core machine, bunch by scheduling jitter; retries that
    // bypassed the pacer would add about 75/s on top (175 in a second).
    let arrivals: Vec<_> = hits.iter().map(|h| h.at).collect();
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
        worst as f64 <= RATE * 1.25,
        "{worst} requests in one second at {RATE}/s"
    );
}

/// Webhooks a receiver refuses for good (410) are dead-lettered with their
/// id, destination, attempts and last status; once it is healthy,
/// `--redrive` admits them again under the same ids, and a relay refuses to
/// redrive its own dead-letter file (exit 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_name_their_webhook_and_redrive_delivers_them_under_their_ids() {
    let healthy = Arc::new(AtomicBool::new(false));
    let log = Arc::new(Log::default());
    let h = healthy.clone();
    let answer = move |_: &Hit, _| match h.load(Ordering::Relaxed) {
        true => StatusCode::NO_CONTENT.into_response(),
        false => StatusCode::GONE.into_response(), // final: not retried
    };
    let rx = receivers::recording(log.clone(), Duration::ZERO, Arc::new(answer)).await;
    let dir = TempDir::new("redrive");
    let downstream = format!("http://{rx}/hooks");
    let (dl, dl2) = (dir.arg("dead-letter.jsonl"), dir.arg("dead-letter-2.jsonl"));
    let mut relay = Relay::start(&format!(
        "--downstream {downstream} --retries 3 --no-journal --shutdown-grace 2s \
            --dead-letter-file {dl}"
    ))
    .await;
    let b = burst(relay.addr, 100, 1, |_| Vec::new()).await;
    let n = b.count(202);
    assert!(n >= 90, "accepted {n}: {:?}", b.statuses);
    relay.signal("TERM");
    assert!(relay.exit(Duration::from_secs(30)).await.success());
    let done = relay
        .out
        .find(Duration::from_secs(1), |l| l.starts_with("delivered "))
        .await
        .unwrap();
    assert!(done.ends_with(&format!("({n} lines this run)")), "{done}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&dl)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ids: HashSet<String> = b.accepted_ids.iter().cloned().collect();
    let mut tried = 0;
    for line in &lines {
        assert!(ids.contains(line["id"].as_str().unwrap()), "{line}");
        assert_eq!(line["destination"], "default");
        // Tried once and refused for good; or held by the destination's
        // breaker (open after five failures) and left at shutdown.
        match line["attempts"].as_u64() {
            Some(1) => {
                assert_eq!(line["last_status"], 410, "{line}");
                assert_eq!(line["reason"], "failed", "{line}");
                tried += 1;
            }
            Some(0) => assert_eq!(line["reason"], "shutdown", "{line}"),
            _ => panic!("{line}"),
        }
    }
    assert!(tried >= 5, "tried {tried}");
    assert_eq!(log.len(), tried, "every attempt reached the receiver once");

    // A relay may not redrive the file it writes its own dead letters to.
    let (code, _, err) = run(
        &[
            "--allow-destination-cidr",
            "127.0.0.0/8",
            "--downstream",
            &downstream,
            "--redrive",
            &dl,
            "--dead-letter-file",
            &dl,
            "--no-journal",
        ],
        &[],
    )
    .await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("own dead_letter_file"), "{err}");

    // The receiver is healthy again: a second relay redrives the file.
    healthy.store(true, Ordering::Relaxed);
    let before = log.len();
    let relay = Relay::start(&format!(
        "--downstream {downstream} --redrive {dl} --dead-letter-file {dl2} --no-journal"
    ))
    .await;
    let redriven = relay
        .out
        .find(Duration::from_secs(30), |l| l.starts_with("redrive "))
        .await
        .unwrap();
    assert!(
        redriven.contains(&format!(
            ": {n} re-admitted, 0 sent again since, 0 refused, 0 for destinations no longer there, 0 unreadable lines, 0 redriven before, 0 kept"
        )),
        "{redriven}"
    );
    let all = log
        .until(Duration::from_secs(30), |hits| {
            hits.len() >= before + n as usize
        })
        .await;
    assert!(all, "redriven: {} of {n}", log.len() - before);
    let seen: HashSet<String> = log.hits()[before..].iter().map(|h| h.key.clone()).collect();
    assert_eq!(seen, ids, "delivered under the ids their 202s named");
}

/// A webhook that failed twice before a restart (SIGTERM, its retry an
/// hour away) makes only the attempts it has left after it: the journal
/// kept its count, so a relay restarted between retries does not give its
/// failing webhooks a fresh set of attempts each time; and its next
/// attempt waits for its time (here cut to the restart's `retry_max`),
/// its status saying so meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_leaves_a_failing_webhook_only_the_attempts_it_had_left() {
    let log = Arc::new(Log::default());
    // 503 each time; after the second try, "come back in an hour".
    let answer = |_: &Hit, tries: usize| {
        let after = if tries == 2 { "3600" } else { "0" };
        (StatusCode::SERVICE_UNAVAILABLE, [("retry-after", after)]).into_response()
    };
    let rx = receivers::recording(log.clone(), Duration::ZERO, Arc::new(answer)).await;
    let dir = TempDir::new("retry-count");
    let args = format!(
        "--downstream http://{rx}/hooks --retries 3 --retry-min 10ms --retry-max 3600s \
         --journal-dir {} --dead-letter-file {} --shutdown-grace 5s",
        dir.arg("journal"),
        dir.arg("dl.jsonl")
    );
    let mut relay = Relay::start(&args).await;
    let b = burst(relay.addr, 1, 1, |_| Vec::new()).await;
    assert_eq!(b.count(202), 1, "{:?}", b.statuses);
    assert!(log.until(Duration::from_secs(30), |h| h.len() >= 2).await);
    relay.signal("TERM");
    assert!(relay.exit(Duration::from_secs(30)).await.success());
    assert_eq!(log.len(), 2, "its third try waits an hour");

    // Started again with a longest wait of 2 s: the hour asked for is cut
    // to it (with the hour it would wait the hour, as the receiver asked).
    let mut relay = Relay::start(&args.replace("--retry-max 3600s", "--retry-max 2s")).await;
    // Its status says what it tried and that it waits (it said queued,
    // no attempt, until its next one).
    let id = b.accepted_ids.first().cloned().unwrap_or_default();
    let resp = crate::harness::http()
        .get(relay.url(&format!("/v1/webhooks/{id}")))
        .send()
        .await
        .expect("answers");
    let status: serde_json::Value =
        serde_json::from_str(&resp.text().await.unwrap_or_default()).unwrap_or_default();
    assert!(status["attempts"].as_u64() >= Some(2), "{status}");
    let dead = dir.join("dl.jsonl");
    let lettered = || async { std::fs::read_to_string(&dead).is_ok_and(|t| !t.trim().is_empty()) };
    assert!(
        crate::harness::eventually(Duration::from_secs(30), lettered).await,
        "dead-lettered after its last attempts"
    );
    let text = std::fs::read_to_string(&dead).unwrap();
    let line: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(
        line["id"].as_str(),
        b.accepted_ids.first().map(String::as_str)
    );
    assert_eq!(line["attempts"], 4, "{line}");
    assert_eq!(line["reason"], "failed", "{line}");
    assert_eq!(log.len(), 4, "attempts 3 and 4 only after the restart");
    relay.signal("TERM");
    assert!(relay.exit(Duration::from_secs(30)).await.success());
}
