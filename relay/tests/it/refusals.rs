//! Every refusal is an RFC 9457 problem and in the document: a 4 MiB body
//! to any admin operation that takes one is a 413 problem (before, axum's
//! plain-text "Failed to buffer the request body" on an application's PUT,
//! resend and recover, and 413 was not documented on the last two); an
//! `Idempotency-Key` with a space inside is a 400 (the book says visible
//! ASCII; before, `a b` was taken).

use crate::harness::{Relay, TempDir, digest, http};

const TOKEN: &str = "refusals-admin-token";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_admin_bodies_and_spaced_keys_are_refused_as_problems() {
    let dir = TempDir::new("refusals");
    let relay = Relay::start(&format!(
        "--destination billing=http://127.0.0.1:9/h --admin-token-sha256 {} --journal-dir {} \
         --dead-letter-file {}",
        digest(TOKEN),
        dir.arg("journal"),
        dir.arg("dl.jsonl")
    ))
    .await;
    // An application with an endpoint, so every route gets as far as its body.
    let admin = |path: &str| {
        http()
            .put(relay.admin_url(path))
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
    };
    let made = admin("/v1/applications/acme").send().await.unwrap();
    assert_eq!(made.status(), 201);
    let hook = admin("/v1/applications/acme/endpoints/acme-hook")
        .body(r#"{"url": "http://127.0.0.1:9/acme"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(hook.status(), 201);
    let doc: serde_json::Value = serde_json::from_str(
        &http()
            .get(relay.admin_url("/openapi.json"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    // Every operation that takes a body, as its document lists them.
    let mut taking = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if op.get("requestBody").is_some() {
                taking.push((method.to_ascii_uppercase(), path.clone()));
            }
        }
    }
    assert!(taking.len() >= 8, "{taking:?}");
    let big = format!("{{\"rate\": 5, \"pad\": \"{}\"}}", "x".repeat(4 << 20));
    for (method, template) in &taking {
        let path = template
            .replace("{app}", "acme")
            .replace("{id}", "1")
            .replace(
                "{name}",
                match template.starts_with("/v1/applications") {
                    true => "acme-hook",
                    false => "billing",
                },
            );
        let head = format!(
            "{method} {path} HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer {TOKEN}\r\n\
             content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            big.len()
        );
        let answer = sent_whole(relay.admin.unwrap(), head, big.clone()).await;
        assert!(
            answer.starts_with("HTTP/1.1 413"),
            "{method} {path}: {answer:.300}"
        );
        let lower = answer.to_ascii_lowercase();
        assert!(
            lower.contains("content-type: application/problem+json"),
            "{method} {path}: {answer:.300}"
        );
        assert!(
            answer.contains("urn:dripfeed:problem:too-large"),
            "{method} {path}: {answer:.300}"
        );
        // Documented where it can be answered.
        let method = method.to_ascii_lowercase();
        assert!(
            doc["paths"][template][&method]["responses"]["413"].is_object(),
            "{method} {template} documents its 413"
        );
    }

    // An Idempotency-Key with a space inside it is refused; around it, trimmed.
    let (status, body) = relay
        .post(
            &[
                ("idempotency-key", "a b"),
                ("content-type", "application/json"),
            ],
            "{}",
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["type"], "urn:dripfeed:problem:bad-idempotency-key",
        "{body}"
    );
    let (status, body) = relay
        .post(
            &[
                ("idempotency-key", "a-b"),
                ("x-destination", "billing"),
                ("content-type", "application/json"),
            ],
            "{}",
        )
        .await;
    assert_eq!(status, 202, "{body}");
    // Given twice, it says so (it said "not visible ASCII").
    let (status, body) = relay
        .post(
            &[
                ("idempotency-key", "alpha"),
                ("idempotency-key", "beta"),
                ("content-type", "application/json"),
            ],
            "{}",
        )
        .await;
    assert_eq!(status, 400, "{body}");
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("more than once"), "{body}");
}

/// Writes `head` and `body` to `addr` (a write the server cuts short is
/// fine: it may answer before reading it all) while reading its whole
/// answer, at most 10 s.
async fn sent_whole(addr: std::net::SocketAddr, head: String, body: String) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("a connection");
    let (mut rd, mut wr) = stream.into_split();
    let writer = tokio::spawn(async move {
        let _ = wr.write_all(head.as_bytes()).await;
        let _ = wr.write_all(body.as_bytes()).await;
    });
    let mut got = Vec::new();
    let read = rd.read_to_end(&mut got);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), read).await;
    writer.abort();
    String::from_utf8_lossy(&got).into_owned()
}
