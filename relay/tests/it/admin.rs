//! The admin listener, apart from intake: `/healthz`, `/readyz` and
//! `/metrics` answer without a token; `/v1/destinations` needs the admin
//! token whose SHA-256 is `--admin-token-sha256` (401 otherwise) and shows
//! each destination without its secret; intake no longer serves
//! `/metrics`. `/readyz` turns 503, naming `dead-letter`, once the
//! dead-letter files are full, and 200 again once the full file is moved
//! away.

use std::sync::Arc;
use std::time::Duration;

use crate::harness::{Relay, TempDir, digest, eventually, http};
use crate::letters::refusing;
use crate::receivers::Log;

const TOKEN: &str = "admin-token-for-tests";
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// GET `url` with an optional bearer token: status and body.
async fn get(url: &str, token: Option<&str>) -> (u16, String, Option<String>) {
    let mut req = http().get(url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.expect("the admin listener answers");
    let status = resp.status().as_u16();
    let challenge = resp
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    (status, resp.text().await.unwrap_or_default(), challenge)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_listener_serves_probes_metrics_and_destinations() {
    let log = Arc::new(Log::default());
    let rx = refusing(log.clone()).await;
    let dir = TempDir::new("admin");
    let digest = digest(TOKEN);
    let file = dir.join("relay.toml");
    let text = format!(
        "admin_token_sha256 = \"{digest}\"\n\n[[destinations]]\nname = \"billing\"\n\
         url = \"http://{rx}/hooks\"\nrate = 50\nsecret = \"{SECRET}\"\n\n\
         [[destinations]]\nname = \"shipping\"\nurl = \"http://{rx}/ship\"\n"
    );
    std::fs::write(&file, text).unwrap();
    // One dead-letter file of at most 1 byte: the first dead letter fills it.
    let relay = Relay::start(&format!(
        "--config {} --no-journal --retries 0 --dead-letter-file {} \
         --dead-letter-max-bytes 1 --dead-letter-keep 1",
        file.display(),
        dir.arg("dl.jsonl")
    ))
    .await;

    // Probes and metrics: no token.
    let (status, body, _) = get(&relay.admin_url("/healthz"), None).await;
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    let (status, body, _) = get(&relay.admin_url("/readyz"), None).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("ready"), "{body}");
    let page = relay.metrics_page().await;
    assert!(page.contains("dripfeed_relay_held_bytes"), "{page}");
    // Intake serves no metrics now.
    assert_eq!(get(&relay.url("/metrics"), None).await.0, 404);
    assert_eq!(
        get(&relay.url("/v1/destinations"), Some(TOKEN)).await.0,
        404
    );

    // The admin API: the token, or 401.
    let url = relay.admin_url("/v1/destinations");
    for token in [None, Some("wrong")] {
        let (status, body, challenge) = get(&url, token).await;
        assert_eq!(status, 401, "{token:?}: {body}");
        assert!(challenge.is_some_and(|c| c.starts_with("Bearer")));
        assert!(!body.contains("billing"), "{body}");
    }
    let (status, body, _) = get(&url, Some(TOKEN)).await;
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let all = v["destinations"].as_array().cloned().unwrap_or_default();
    let names: Vec<&str> = all.iter().filter_map(|d| d["name"].as_str()).collect();
    assert_eq!(names, ["billing", "shipping"]);
    assert_eq!(all[0]["rate"], 50.0);
    assert_eq!(all[0]["secret_set"], true);
    assert_eq!(all[1]["secret_set"], false);
    assert!(!body.contains("whsec_"), "a secret is never shown: {body}");
    let (status, one, _) = get(&relay.admin_url("/v1/destinations/shipping"), Some(TOKEN)).await;
    assert_eq!(status, 200, "{one}");
    assert!(one.contains(&format!("http://{rx}/ship")), "{one}");
    let (status, _, _) = get(&relay.admin_url("/v1/destinations/nope"), Some(TOKEN)).await;
    assert_eq!(status, 404);

    // A webhook the receiver refuses fills the only dead-letter file; the
    // next finds no room: /readyz answers 503 naming it.
    for _ in 0..2 {
        let refused = relay
            .post(&[("x-destination", "shipping")], "{\"refuse\":true}")
            .await;
        assert_eq!(refused.0, 202, "{}", refused.1);
    }
    let not_ready = eventually(Duration::from_secs(20), || async {
        get(&relay.admin_url("/readyz"), None).await.0 == 503
    })
    .await;
    let (status, body, _) = get(&relay.admin_url("/readyz"), None).await;
    assert!(not_ready, "{status} {body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["down"][0]["name"], "dead-letter", "{body}");
    assert_eq!(v["status"], 503);
    // And intake refuses (the same state): 503 dead-letter-full.
    let (status, _) = relay
        .post(&[("x-destination", "shipping")], "{\"n\":2}")
        .await;
    assert_eq!(status, 503);

    // The operator moves the full file away: the held line is written to a
    // new one and /readyz is 200 again.
    let dl = dir.join("dl.jsonl");
    std::fs::rename(&dl, dir.join("dl.jsonl.moved")).unwrap();
    let ready = eventually(Duration::from_secs(20), || async {
        get(&relay.admin_url("/readyz"), None).await.0 == 200
    })
    .await;
    assert!(ready, "{:?}", get(&relay.admin_url("/readyz"), None).await);
}
