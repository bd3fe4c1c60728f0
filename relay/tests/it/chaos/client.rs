//! The chaos run's client: posts webhooks `{"n": N}` at a steady rate,
//! each with `Idempotency-Key: chaos-N`, to one of the relays up now; a
//! request refused with 503 or not answered (a relay killed or stopped
//! under it) is tried again with the same key on another relay, up to 3
//! times a second apart. It keeps every answer.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::harness::http;

/// Tries per request.
const TRIES: usize = 4;

/// One try's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Answer {
    /// 202 and the webhook's id.
    Accepted(String),
    /// Another status and the problem's type (its last part).
    Refused(u16, String),
    /// No answer within 3 s (the relay killed or stopped).
    None,
}

/// Where the client may post: the relays' intake addresses (`None` while
/// one is down).
pub(super) type Targets = Arc<Mutex<Vec<Option<SocketAddr>>>>;

/// Every request's answers, by number.
pub(super) type Answers = BTreeMap<u64, Vec<Answer>>;

/// Posts `per_second` a second until `stop` says so; every answer.
pub(super) async fn post(
    targets: Targets,
    per_second: u32,
    mut stop: watch::Receiver<bool>,
) -> Answers {
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(per_second)));
    let mut tasks = JoinSet::new();
    let mut n = 0u64;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => break,
        }
        let targets = targets.clone();
        let nth = n;
        n += 1;
        tasks.spawn(async move { (nth, one(&targets, nth).await) });
    }
    let mut out = Answers::new();
    while let Some(done) = tasks.join_next().await {
        if let Ok((n, answers)) = done {
            out.insert(n, answers);
        }
    }
    out
}

/// Request `n`'s tries.
async fn one(targets: &Targets, n: u64) -> Vec<Answer> {
    let mut answers = Vec::new();
    for t in 0..TRIES {
        let up: Vec<SocketAddr> = targets.lock().unwrap().iter().flatten().copied().collect();
        let Some(addr) = up.get((n as usize + t) % up.len().max(1)).copied() else {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        let answer = send(addr, n).await;
        let again = matches!(answer, Answer::None | Answer::Refused(503, _));
        answers.push(answer);
        if !again {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    answers
}

async fn send(addr: SocketAddr, n: u64) -> Answer {
    let sent = http()
        .post(format!("http://{addr}/v1/webhooks/deliver"))
        .header("content-type", "application/json")
        .header("idempotency-key", format!("chaos-{n}"))
        .body(format!("{{\"n\":{n}}}"))
        .timeout(Duration::from_secs(3))
        .send()
        .await;
    let Ok(resp) = sent else {
        return Answer::None;
    };
    let status = resp.status().as_u16();
    let Ok(text) = resp.text().await else {
        return Answer::None;
    };
    let body: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    match (status, body["id"].as_str()) {
        (202, Some(id)) => Answer::Accepted(id.to_owned()),
        _ => {
            let kind = body["type"].as_str().unwrap_or_default();
            let kind = kind.rsplit(':').next().unwrap_or_default().to_owned();
            Answer::Refused(status, kind)
        }
    }
}
