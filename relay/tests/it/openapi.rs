//! `GET /openapi.json`: each listener serves its own OpenAPI 3.1 document,
//! the one checked in (`relay/openapi.json` for intake,
//! `relay/openapi-admin.json` for admin), without a key or token.

use crate::harness::{Relay, TempDir, http};

/// GET `url`: status and body.
async fn get(url: &str) -> (u16, String) {
    let resp = http().get(url).send().await.expect("the relay answers");
    (
        resp.status().as_u16(),
        resp.text().await.unwrap_or_default(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_listener_serves_its_checked_in_document() {
    let dir = TempDir::new("openapi");
    let relay = Relay::start(&format!(
        "--downstream http://127.0.0.1:9/hooks --no-journal --dead-letter-file {}",
        dir.arg("dl.jsonl")
    ))
    .await;
    let root = env!("CARGO_MANIFEST_DIR");
    for (url, file) in [
        (relay.url("/openapi.json"), "openapi.json"),
        (relay.admin_url("/openapi.json"), "openapi-admin.json"),
    ] {
        let (status, served) = get(&url).await;
        assert_eq!(status, 200, "{url}");
        let checked_in = std::fs::read_to_string(format!("{root}/{file}")).unwrap();
        assert!(
            served == checked_in,
            "{url} differs from relay/{file}: regenerate it (UPDATE_OPENAPI=1 cargo test -p dripfeed-relay openapi)"
        );
        let doc: serde_json::Value = serde_json::from_str(&served).unwrap();
        assert_eq!(doc["openapi"], "3.1.0");
    }
}
