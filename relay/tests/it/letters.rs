//! What the dead-letter tests share: a receiver that refuses the webhooks
//! a test marks for good (so each is dead-lettered at once) and takes the
//! others, one POST with the parts of its answer they check, and the lines
//! of a dead-letter file.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::IntoResponse;

use crate::harness::{Relay, http};
use crate::receivers::{self, Hit, Log};

/// What marks a body the receiver refuses.
const REFUSE: &str = "\"refuse\":true";

/// A receiver answering 400 (final: never retried) to a body marked
/// `"refuse":true`, 204 to the others.
pub(crate) async fn refusing(log: Arc<Log>) -> SocketAddr {
    let answer = |hit: &Hit, _| match String::from_utf8_lossy(&hit.body).contains(REFUSE) {
        true => StatusCode::BAD_REQUEST.into_response(),
        false => StatusCode::NO_CONTENT.into_response(),
    };
    receivers::recording(log, Duration::ZERO, Arc::new(answer)).await
}

/// What the relay answered to one webhook.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    /// The status.
    pub status: u16,
    /// A 202's id.
    pub id: Option<String>,
    /// A problem's `type`.
    pub kind: Option<String>,
    /// `Retry-After`, seconds.
    pub retry_after: Option<u64>,
}

impl Answer {
    /// A 503 whose problem `type` ends with `kind`.
    pub(crate) fn is_503(&self, kind: &str) -> bool {
        self.status == 503 && self.kind.as_deref() == Some(&format!("urn:dripfeed:problem:{kind}"))
    }
}

/// POSTs webhook `n`, which the receiver refuses, to `relay`.
pub(crate) async fn post(relay: &Relay, n: u64) -> Answer {
    post_body(relay, format!("{{{REFUSE},\"n\":{n}}}")).await
}

/// POSTs `body` to `relay`.
async fn post_body(relay: &Relay, body: String) -> Answer {
    let resp = http()
        .post(relay.url("/v1/webhooks/deliver"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("the relay answers");
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok()?.parse().ok());
    let text = resp.text().await.unwrap_or_default();
    let body: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let text = |k: &str| body[k].as_str().map(str::to_owned);
    Answer {
        status,
        id: text("id").filter(|_| status == 202),
        kind: text("type"),
        retry_after,
    }
}

/// Sends two webhooks the receiver takes, then webhook `n`, which it
/// refuses, each answered 202 awaited at the receiver before the next: a
/// destination's breaker opens after five failures in a row or when half
/// of the last twenty failed, and this keeps it closed. The first answer
/// that is not a 202, else webhook `n`'s.
pub(crate) async fn send(relay: &Relay, log: &Log, n: u64) -> Answer {
    for k in 0..2 {
        let a = post_body(relay, format!("{{\"ok\":true,\"n\":{n},\"k\":{k}}}")).await;
        if a.status != 202 {
            return a;
        }
        arrived(log, a.id.as_deref().unwrap_or_default()).await;
    }
    let a = post(relay, n).await;
    if let Some(id) = &a.id {
        arrived(log, id).await;
    }
    a
}

/// Waits until the receiver has answered webhook `id` (at most 10 s).
async fn arrived(log: &Log, id: &str) {
    let seen = log
        .until(Duration::from_secs(10), |hits| {
            hits.iter().any(|h| h.key == id)
        })
        .await;
    assert!(seen, "the receiver got webhook {id}");
}

/// The lines of a dead-letter file (none if it is missing): the ids of
/// those that parse, and how many do not.
pub(crate) fn lines(path: &Path) -> (Vec<String>, usize) {
    // Only a regular file: a path linked to /dev/full reads zeros forever.
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return (Vec::new(), 0);
    }
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut ids = Vec::new();
    let mut bad = 0;
    for line in text.lines() {
        match serde_json::from_str::<serde_json::Value>(line) {
            Ok(v) => ids.push(v["id"].as_str().unwrap_or_default().to_owned()),
            Err(_) => bad += 1,
        }
    }
    (ids, bad)
}

/// The ids in the dead-letter files at `paths`.
pub(crate) fn ids_in(paths: &[&Path]) -> HashSet<String> {
    paths.iter().flat_map(|p| lines(p).0).collect()
}
