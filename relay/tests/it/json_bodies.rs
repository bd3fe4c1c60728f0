//! A body labelled JSON must be JSON: 400 `bad-json` otherwise (the
//! receiver could not read it either); another content type is taken as it
//! came. Found by schemathesis (scripts/fuzz_api.sh).

use crate::harness::{Relay, TempDir, http};

/// POSTs `body` as `content_type`: the status and body.
async fn post(relay: &Relay, content_type: &str, body: &'static str) -> (u16, String) {
    let resp = http()
        .post(relay.url("/v1/webhooks/deliver"))
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .expect("the relay answers");
    (
        resp.status().as_u16(),
        resp.text().await.unwrap_or_default(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_labelled_json_must_be_json() {
    let dir = TempDir::new("json-bodies");
    let relay = Relay::start(&format!(
        "--downstream http://127.0.0.1:9/hooks --no-journal --retries 0 --dead-letter-file {}",
        dir.arg("dl.jsonl")
    ))
    .await;
    for (ct, body, want) in [
        ("application/json", "{\"a\":1}", 202),
        ("application/json; charset=utf-8", "[1,2]", 202),
        ("application/json", "\u{0}", 400),
        ("application/json", "", 400),
        ("application/cloudevents+json", "{", 400),
        ("text/plain", "{", 202),
        ("application/octet-stream", "\u{0}", 202),
    ] {
        let (status, answer) = post(&relay, ct, body).await;
        assert_eq!(status, want, "{ct} {body:?}: {answer}");
        if want == 400 {
            assert!(answer.contains("urn:dripfeed:problem:bad-json"), "{answer}");
        }
    }
}
