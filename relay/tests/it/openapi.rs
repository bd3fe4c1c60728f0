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

/// A relay with one destination and nothing kept, in a directory of its
/// own (`tag`).
async fn started(tag: &str) -> (TempDir, Relay) {
    let dir = TempDir::new(tag);
    let relay = Relay::start(&format!(
        "--downstream http://127.0.0.1:9/hooks --no-journal --dead-letter-file {}",
        dir.arg("dl.jsonl")
    ))
    .await;
    (dir, relay)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_listener_serves_its_checked_in_document() {
    let (_dir, relay) = started("openapi").await;
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

/// What no route serves is still a problem, as every refusal is: a path
/// nothing serves is a 404 `not-found`, a method a route does not serve a
/// 405 `method-not-allowed` with `Allow`, on both listeners (a client
/// reading `application/problem+json` never meets an empty body).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_no_route_serves_is_a_problem() {
    let (_dir, relay) = started("openapi-none").await;
    for base in [relay.url(""), relay.admin_url("")] {
        let resp = http()
            .get(format!("{base}/v1/nothing"))
            .send()
            .await
            .expect("the relay answers");
        let kind = resp.headers()["content-type"].to_str().unwrap().to_owned();
        assert_eq!(
            (resp.status().as_u16(), kind.as_str()),
            (404, "application/problem+json")
        );
        let v: serde_json::Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
        assert_eq!(v["type"], "urn:dripfeed:problem:not-found", "{v}");
        assert_eq!(v["status"], 404, "{v}");
    }
    for url in [relay.url("/openapi.json"), relay.admin_url("/openapi.json")] {
        let resp = http().delete(&url).send().await.expect("the relay answers");
        assert_eq!(resp.status().as_u16(), 405, "{url}");
        let allow = resp
            .headers()
            .get("allow")
            .map(|v| v.to_str().unwrap().to_owned());
        assert!(allow.is_some_and(|a| a.contains("GET")), "{url}");
        let v: serde_json::Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
        assert_eq!(v["type"], "urn:dripfeed:problem:method-not-allowed", "{v}");
    }
}
