//! A Redis that stalls past the time a command may take (here stopped for
//! 4 s by SIGSTOP, as a long fork or a paused VM would): the webhooks posted
//! meanwhile are answered 503 `unanswered`, naming the id each may have
//! been queued under, since Redis runs their admissions when it resumes
//! and they are delivered at once. Before, they were answered 503 `unavailable`
//! ("cannot take webhooks now"), and a sender that retried had each
//! delivered twice under two ids (an outside probe: about 100 of them
//! each stall).
//!
//! Real time and real processes (a loopback integration test): bounded in
//! time and count, asserting counts only.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use crate::harness::{Relay, argv};
use crate::receivers::{self, Log};
use crate::support_redis;

/// Webhooks posted while Redis is stopped.
const DURING: usize = 6;
/// Webhooks posted as it resumes.
const AFTER: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_redis_ran_late_is_answered_as_perhaps_queued_and_named() {
    if !support_redis::available("a_webhook_redis_ran_late_is_answered_as_perhaps_queued_and_named")
    {
        return;
    }
    let redis = support_redis::RedisServer::start();
    let log = Arc::new(Log::default());
    let rx = receivers::ok(log.clone(), Duration::ZERO).await;
    let relay = Relay::start_with(
        &argv(&format!(
            "--queue redis --redis {} --destination hooks=http://{rx}/hooks --no-journal --retries 0 \
             --dead-letter-file /dev/null",
            redis.url()
        )),
        &[],
    )
    .await;
    let post = |n: usize| {
        let body = format!("{{\"n\":{n}}}");
        let relay = &relay;
        async move {
            relay
                .post(&[("content-type", "application/json")], &body)
                .await
        }
    };
    let (status, first) = post(0).await;
    assert_eq!(status, 202, "{first}");
    let mut named: HashSet<String> = HashSet::new();
    named.insert(first["id"].as_str().unwrap_or_default().to_owned());

    // Redis stopped for 4 s: each admission waits past its 2 s.
    let info = redis.cli(&["INFO", "server"]);
    let pid = info
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .map(|p| p.trim().to_owned())
        .expect("redis names its process");
    let signal = |sig: &str| {
        let done = std::process::Command::new("kill")
            .args([sig, pid.as_str()])
            .status()
            .expect("kill runs");
        assert!(done.success(), "kill {sig} {pid}");
    };
    signal("-STOP");
    let resume = async {
        tokio::time::sleep(Duration::from_secs(4)).await;
        signal("-CONT");
    };
    let (answers, ()) = tokio::join!(
        futures_util::future::join_all((1..=DURING).map(post)),
        resume
    );
    // And at once after it: the first claim that works takes these.
    let after = futures_util::future::join_all((DURING + 1..=DURING + AFTER).map(post)).await;
    let mut unanswered = 0;
    for (status, body) in answers.iter().chain(&after) {
        match (status, body["type"].as_str()) {
            (202, _) => {
                named.insert(body["id"].as_str().unwrap_or_default().to_owned());
            }
            (503, Some("urn:dripfeed:problem:unanswered")) => {
                unanswered += 1;
                let detail = body["detail"].as_str().unwrap_or_default();
                let id = detail
                    .split("queued as ")
                    .nth(1)
                    .and_then(|rest| rest.split(' ').next())
                    .unwrap_or_default();
                assert!(!id.is_empty(), "the id is named: {body}");
                named.insert(id.to_owned());
            }
            other => panic!("neither taken nor perhaps taken: {other:?} {body}"),
        }
    }
    assert!(
        unanswered > 0,
        "the pause outlasts an admission: {answers:?}"
    );

    // Redis resumes and runs them: each named webhook arrives, none other,
    // and soon: a claim it ran after the relay stopped waiting is taken up
    // at once, not after a take-over scan's 15 s (it took 16 s).
    let all = log
        .until(Duration::from_secs(12), |hits| {
            let got: HashSet<&str> = hits.iter().map(|h| h.key.as_str()).collect();
            named.iter().all(|id| got.contains(id.as_str()))
        })
        .await;
    let got: HashSet<String> = log.keys().into_keys().collect();
    assert!(all, "named {named:?}, received {got:?}");
    assert!(got.is_subset(&named), "received {got:?}, named {named:?}");
    assert_eq!(got.len(), 1 + DURING + AFTER, "each posted webhook");
    // Once: none was on its way at the stop (what the claim after it took
    // and what the drain took up of its own are one list, not two; a
    // second went out within 100 ms of the first).
    let more = log
        .until(Duration::from_secs(2), |hits| {
            hits.len() > 1 + DURING + AFTER
        })
        .await;
    let twice: Vec<_> = log.keys().into_iter().filter(|(_, n)| *n > 1).collect();
    assert!(!more || !twice.is_empty(), "a request beside the webhooks");
    assert!(twice.is_empty(), "delivered more than once: {twice:?}");
}
