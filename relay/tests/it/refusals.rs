//! Every refusal is an RFC 9457 problem and in the document: a 4 MiB body
//! to the admin API is a 413 problem (before, axum's plain-text "Failed to
//! buffer the request body", and 413 was not documented); an
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
    let big = format!("{{\"rate\": 5, \"pad\": \"{}\"}}", "x".repeat(4 << 20));
    for (method, path) in [
        ("PATCH", "/v1/destinations/billing"),
        ("PUT", "/v1/destinations/billing"),
        ("POST", "/v1/dead-letters/redrive"),
    ] {
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
            "{answer:.300}"
        );
        assert!(
            answer.contains("urn:dripfeed:problem:too-large"),
            "{answer:.300}"
        );
    }
    // Documented where it can be answered.
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
    for (path, method) in [
        ("/v1/destinations/{name}", "patch"),
        ("/v1/destinations/{name}", "put"),
        ("/v1/dead-letters/redrive", "post"),
    ] {
        assert!(
            doc["paths"][path][method]["responses"]["413"].is_object(),
            "{method} {path} documents its 413"
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
                ("content-type", "application/json"),
            ],
            "{}",
        )
        .await;
    assert_eq!(status, 202, "{body}");
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
