//! A receiver that answers with a redirect does not send the webhook
//! anywhere else: a 3xx is a final failure, dead-lettered with its status,
//! never followed (a 301/302/303 would become a body-less GET counted as
//! delivered; a 307/308 would re-send the body, its signature and its
//! idempotency key to whatever origin the receiver names).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::IntoResponse;

use crate::harness::{Relay, TempDir, eventually};
use crate::receivers::{self, Hit, Log};

const STATUSES: [u16; 5] = [301, 302, 303, 307, 308];
const EACH: u64 = 4;

/// Five destinations on one receiver, each answering one redirect status
/// (`?s=301` …) with a `Location` at a second receiver: the second
/// receiver gets nothing, each webhook is tried once and dead-lettered
/// with its destination's status, and none is counted delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_are_never_followed_and_dead_letter_with_their_status() {
    let elsewhere = Arc::new(Log::default());
    let other = receivers::ok(elsewhere.clone(), Duration::ZERO).await;
    let log = Arc::new(Log::default());
    let answer = move |hit: &Hit, _| {
        let status = hit.query.trim_start_matches("s=").parse().unwrap_or(500);
        let location = format!("http://{other}/stolen?{}", hit.query);
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, [("location", location)]).into_response()
    };
    let rx = receivers::recording(log.clone(), Duration::ZERO, Arc::new(answer)).await;
    let dir = TempDir::new("redirects");
    let dl = dir.join("dead-letter.jsonl");
    let mut args = format!(
        "--retries 3 --retry-min 10ms --retry-max 50ms --journal-dir {} --dead-letter-file {}",
        dir.arg("journal"),
        dl.display()
    );
    for s in STATUSES {
        args.push_str(&format!(" --destination r{s}=http://{rx}/hooks?s={s}"));
    }
    let relay = Relay::start(&args).await;
    let mut accepted: HashMap<String, u16> = HashMap::new();
    for s in STATUSES {
        for n in 0..EACH {
            let (status, body) = relay
                .post(
                    &[("x-destination", &format!("r{s}"))],
                    &format!("{{\"n\":{n}}}"),
                )
                .await;
            assert_eq!(status, 202, "{body}");
            accepted.insert(body["id"].as_str().unwrap_or_default().to_owned(), s);
        }
    }
    let total = accepted.len();
    let all = eventually(Duration::from_secs(20), || async {
        let text = std::fs::read_to_string(&dl).unwrap_or_default();
        text.lines().count() >= total
    })
    .await;
    let m = relay.metrics().await;
    let delivered = m.get("leaky_bucket_jobs_total", &[("outcome", "delivered")]);
    let text = std::fs::read_to_string(&dl).unwrap_or_default();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    println!(
        "redirects: {total} accepted, {} requests elsewhere, {delivered} counted delivered, {} dead-lettered",
        elsewhere.len(),
        lines.len()
    );
    assert_eq!(
        elsewhere.len(),
        0,
        "a redirect was followed: {:?}",
        elsewhere.hits().first().map(|h| h.query.clone())
    );
    assert_eq!(delivered, 0.0, "a redirect counted as delivered");
    assert!(all, "dead-lettered {} of {total}", lines.len());
    assert_eq!(lines.len(), total, "{text}");
    for line in &lines {
        let id = line["id"].as_str().unwrap_or_default();
        let status = accepted.get(id).copied().unwrap_or(0);
        assert_eq!(line["last_status"], status, "{line}");
        assert_eq!(line["attempts"], 1, "a 3xx is final, not retried: {line}");
        assert_eq!(line["reason"], "failed", "{line}");
        assert_eq!(line["destination"], format!("r{status}"), "{line}");
    }
    assert_eq!(log.len(), total, "each tried once");
}
