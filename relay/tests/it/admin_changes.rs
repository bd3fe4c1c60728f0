//! The admin API changes destinations while webhooks flow: `PUT` makes
//! one (201) and changes it (200: a new URL, rate and secret from the next
//! delivery), refuses what the configuration would (400, 401, 422, the
//! private-address guard and `max_destinations` among it); `DELETE` closes
//! one at once (404 for new webhooks) and delivers or dead-letters what it
//! held. Every 202 is delivered or dead-lettered. A restart keeps every
//! change: the state file (mode 0600) is applied over the configuration,
//! a configured destination deleted through the API among it.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::harness::{Relay, TempDir, digest, eventually, http};
use crate::receivers::{Hit, Log, ok};

const TOKEN: &str = "admin-token-for-changes";
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// `method` on the admin API's `path` with the token (if any) and `body`:
/// status and JSON body.
async fn call(
    relay: &Relay,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> (u16, serde_json::Value) {
    let mut req = http().request(method, relay.admin_url(path));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(b) = body {
        req = req
            .header("content-type", "application/json")
            .body(b.to_owned());
    }
    let resp = req.send().await.expect("the admin listener answers");
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or_default())
}

async fn put(relay: &Relay, name: &str, body: &str) -> (u16, serde_json::Value) {
    let path = format!("/v1/destinations/{name}");
    call(relay, reqwest::Method::PUT, &path, Some(TOKEN), Some(body)).await
}

async fn delete(relay: &Relay, name: &str) -> (u16, serde_json::Value) {
    let path = format!("/v1/destinations/{name}");
    call(relay, reqwest::Method::DELETE, &path, Some(TOKEN), None).await
}

/// The destinations listed: name, then the whole view.
async fn listed(relay: &Relay) -> Vec<(String, serde_json::Value)> {
    let (status, v) = call(
        relay,
        reqwest::Method::GET,
        "/v1/destinations",
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(status, 200, "{v}");
    v["destinations"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|d| (d["name"].as_str().unwrap_or_default().to_owned(), d))
        .collect()
}

/// The ids of `destination`'s lines in the dead-letter file at `path`.
fn dead_for(path: &std::path::Path, destination: &str) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["destination"] == destination)
        .map(|v| v["id"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The keys among `hits` sent to the URL whose query is `query`.
fn got(hits: &[Hit], query: &str) -> HashSet<String> {
    hits.iter()
        .filter(|h| h.query == query)
        .map(|h| h.key.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destinations_change_under_load_and_a_restart_keeps_the_changes() {
    let log = Arc::new(Log::default());
    let rx = ok(log.clone(), Duration::ZERO).await;
    let dir = TempDir::new("admin-changes");
    let digest = digest(TOKEN);
    let file = dir.join("relay.toml");
    std::fs::write(
        &file,
        format!(
            "admin_token_sha256 = \"{digest}\"\n\n[[destinations]]\nname = \"billing\"\n\
             url = \"http://{rx}/hooks?d=billing\"\n"
        ),
    )
    .unwrap();
    let args = format!(
        "--config {} --journal-dir {} --dead-letter-file {} --retries 0 \
         --shutdown-grace 2s --max-destinations 4",
        file.display(),
        dir.arg("journal"),
        dir.arg("dl.jsonl")
    );
    let relay = Arc::new(Relay::start(&args).await);

    // Webhooks flow to billing the whole time.
    let stop = Arc::new(AtomicBool::new(false));
    let flow = {
        let (relay, stop) = (relay.clone(), stop.clone());
        tokio::spawn(async move {
            let mut ids = Vec::new();
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) && n < 2000 {
                let (status, id) = relay.post_for("billing", n).await;
                assert!(status == 202 || status == 503, "billing answered {status}");
                ids.extend(id);
                n += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            ids
        })
    };

    // Refused: no token, not JSON, bad fields, a private address, a bad name.
    let crm = format!("{{\"url\": \"http://{rx}/hooks?d=crm\", \"rate\": 100}}");
    let path = "/v1/destinations/crm";
    let (status, _) = call(&relay, reqwest::Method::PUT, path, None, Some(&crm)).await;
    assert_eq!(status, 401);
    let (status, v) = put(&relay, "crm", "{not json").await;
    assert_eq!(
        (status, v["type"].as_str()),
        (400, Some("urn:dripfeed:problem:bad-json"))
    );
    for bad in [
        "{\"url\": \"ftp://example.com/\"}".to_owned(),
        format!("{{\"url\": \"http://{rx}/\", \"rate\": -1}}"),
        format!("{{\"url\": \"http://{rx}/\", \"budget\": \"soon\"}}"),
        format!("{{\"url\": \"http://{rx}/\", \"previous_secret\": \"{SECRET}\"}}"),
        format!("{{\"url\": \"http://{rx}/\", \"colour\": \"red\"}}"),
        "{\"rate\": 5}".to_owned(),
    ] {
        let (status, v) = put(&relay, "crm", &bad).await;
        assert_eq!(status, 422, "{bad}: {v}");
        assert_eq!(
            v["type"], "urn:dripfeed:problem:bad-destination",
            "{bad}: {v}"
        );
    }
    for private in ["http://10.1.2.3/hooks", "http://169.254.169.254/latest"] {
        let (status, v) = put(&relay, "crm", &format!("{{\"url\": \"{private}\"}}")).await;
        assert_eq!(status, 422, "{private}: {v}");
        assert_eq!(v["type"], "urn:dripfeed:problem:private-destination");
    }
    let (status, _) = put(&relay, "not%20a%20name", &crm).await;
    assert_eq!(status, 422);
    assert_eq!(relay.post_for("crm", 0).await.0, 404, "nothing was made");

    // Made: 201, and webhooks for it are taken and delivered.
    let (status, v) = put(&relay, "crm", &crm).await;
    assert_eq!(status, 201, "{v}");
    assert_eq!(
        (v["rate"].as_f64(), v["secret_set"].as_bool()),
        (Some(100.0), Some(false))
    );
    assert!(
        v["origin"]
            .as_str()
            .unwrap_or_default()
            .contains("admin API"),
        "{v}"
    );
    let mut crm_ids = Vec::new();
    for n in 0..5 {
        let (status, id) = relay.post_for("crm", n).await;
        assert_eq!(status, 202);
        crm_ids.extend(id);
    }
    assert!(
        log.until(Duration::from_secs(20), |hits| got(hits, "d=crm").len()
            == 5)
            .await
    );

    // Changed: 200; the next deliveries go to the new URL, signed.
    let changed = format!(
        "{{\"url\": \"http://{rx}/hooks?d=crm2\", \"rate\": 150, \"secret\": \"{SECRET}\"}}"
    );
    let (status, v) = put(&relay, "crm", &changed).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (v["rate"].as_f64(), v["secret_set"].as_bool()),
        (Some(150.0), Some(true))
    );
    assert!(
        !v.to_string().contains("whsec_"),
        "a secret is never shown: {v}"
    );
    let live = v["live"]["rate_now"].as_f64();
    assert!(
        live.is_none() || live == Some(150.0),
        "applied at once: {v}"
    );
    for n in 5..10 {
        let (status, id) = relay.post_for("crm", n).await;
        assert_eq!(status, 202);
        crm_ids.extend(id);
    }
    assert!(
        log.until(Duration::from_secs(20), |hits| got(hits, "d=crm2").len()
            == 5)
            .await
    );
    let signed = log
        .hits()
        .into_iter()
        .filter(|h| h.query == "d=crm2")
        .all(|h| h.headers.contains_key("webhook-signature"));
    assert!(signed, "deliveries after the change are signed");

    // max_destinations (4): billing, crm, slow, extra; a fifth is refused.
    let slow =
        format!("{{\"url\": \"http://{rx}/hooks?d=slow\", \"rate\": 2, \"budget\": \"30s\"}}");
    assert_eq!(put(&relay, "slow", &slow).await.0, 201);
    let extra = format!("{{\"url\": \"http://{rx}/hooks?d=extra\"}}");
    assert_eq!(put(&relay, "extra", &extra).await.0, 201);
    let (status, v) = put(&relay, "fifth", &extra).await;
    assert_eq!(
        (status, v["type"].as_str()),
        (422, Some("urn:dripfeed:problem:too-many-destinations"))
    );
    let names: Vec<String> = listed(&relay).await.into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["billing", "crm", "slow", "extra"]);

    // slow holds 24 webhooks at 2/s: a new rate applies to its running
    // throttle at once.
    let mut slow_ids = Vec::new();
    for n in 0..24 {
        let (status, id) = relay.post_for("slow", n).await;
        assert_eq!(status, 202, "slow {n}");
        slow_ids.extend(id);
    }
    let faster =
        format!("{{\"url\": \"http://{rx}/hooks?d=slow\", \"rate\": 3, \"budget\": \"30s\"}}");
    let (status, v) = put(&relay, "slow", &faster).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["live"]["active"], true, "{v}");
    assert_eq!(v["live"]["rate_now"], 3.0, "applied at once: {v}");

    // Deleted while it holds webhooks: 404 at once for new ones; what it
    // held is delivered within the grace (2 s at 3/s), the rest
    // dead-lettered, each once.
    let (status, v) = delete(&relay, "slow").await;
    assert_eq!(status, 202, "{v}");
    assert!(v["held"].as_u64().unwrap_or(0) > 6, "{v}");
    let (status, _) = relay.post_for("slow", 99).await;
    assert_eq!(status, 404, "a deleted destination takes nothing");
    assert_eq!(delete(&relay, "slow").await.0, 404, "deleted once");
    let (status, v) = put(&relay, "slow", &slow).await;
    assert_eq!(
        (status, v["type"].as_str()),
        (409, Some("urn:dripfeed:problem:destination-deleting"))
    );
    assert_eq!(delete(&relay, "extra").await.0, 202);
    let dl = dir.join("dl.jsonl");
    let slow_ended = eventually(Duration::from_secs(30), || async {
        got(&log.hits(), "d=slow").len() + dead_for(&dl, "slow").len() >= slow_ids.len()
    })
    .await;
    let (delivered, dead) = (got(&log.hits(), "d=slow"), dead_for(&dl, "slow"));
    assert!(
        slow_ended,
        "{} delivered + {} dead-lettered of {}",
        delivered.len(),
        dead.len(),
        slow_ids.len()
    );
    assert!(
        !delivered.is_empty() && !dead.is_empty(),
        "some delivered in the grace, the rest dead-lettered"
    );
    assert_eq!(delivered.len() + dead.len(), slow_ids.len(), "each once");
    let ended: HashSet<String> = delivered.into_iter().chain(dead).collect();
    assert_eq!(ended, slow_ids.iter().cloned().collect(), "every 202 ended");
    let gone = eventually(Duration::from_secs(10), || async {
        listed(&relay)
            .await
            .iter()
            .all(|(n, _)| n != "slow" && n != "extra")
    })
    .await;
    assert!(gone, "deleted destinations leave the listing once drained");
    // Room again: made anew once drained.
    assert_eq!(put(&relay, "extra", &extra).await.0, 201);
    assert_eq!(delete(&relay, "extra").await.0, 202);

    // Every 202 of the flow delivered; then billing (configured) deleted.
    stop.store(true, Ordering::Relaxed);
    let billing_ids = flow.await.unwrap();
    assert!(
        billing_ids.len() > 50,
        "the flow ran: {}",
        billing_ids.len()
    );
    let all_billing = log
        .until(Duration::from_secs(30), |hits| {
            got(hits, "d=billing").len() >= billing_ids.len()
        })
        .await;
    assert!(all_billing);
    assert_eq!(
        got(&log.hits(), "d=billing"),
        billing_ids.iter().cloned().collect()
    );
    assert_eq!(
        got(&log.hits(), "d=crm").len() + got(&log.hits(), "d=crm2").len(),
        crm_ids.len()
    );
    assert_eq!(delete(&relay, "billing").await.0, 202);

    // A restart keeps every change: crm as changed, billing gone although
    // the file names it. The registry holds secrets: mode 0600.
    relay.signal("TERM");
    let mut relay = Arc::into_inner(relay).expect("the flow ended");
    assert!(relay.exit(Duration::from_secs(30)).await.success());
    let state = dir.join("journal").join("registry.kv");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&state).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", state.display());
    }
    // print-config shows what a start applies: the kept changes (while
    // no relay runs on the registry; one that does holds it, and
    // print-config says their changes are not shown).
    let argv: Vec<String> = crate::harness::argv(&args);
    let mut printed: Vec<&str> = vec!["print-config"];
    printed.extend(argv.iter().map(String::as_str));
    let (code, out, err) = crate::harness::run(&printed, &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("\"crm\"") && out.contains("admin API"),
        "{out}"
    );
    assert!(!out.contains("\"billing\""), "{out}");
    let relay = Relay::start(&args).await;
    let (code, _, err) = crate::harness::run(&printed, &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("not shown"), "{err}");
    let after = listed(&relay).await;
    let names: Vec<&str> = after.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["crm"]);
    let crm_view = &after[0].1;
    assert_eq!(crm_view["rate"], 150.0);
    assert_eq!(crm_view["secret_set"], true);
    assert!(
        crm_view["url"]
            .as_str()
            .unwrap_or_default()
            .ends_with("d=crm2"),
        "{crm_view}"
    );
    assert_eq!(relay.post_for("billing", 1).await.0, 404);
    let (status, id) = relay.post_for("crm", 100).await;
    assert_eq!(status, 202);
    let id = id.unwrap_or_default();
    let arrived = log
        .until(Duration::from_secs(20), |hits| {
            hits.iter().any(|h| {
                h.key == id && h.query == "d=crm2" && h.headers.contains_key("webhook-signature")
            })
        })
        .await;
    assert!(arrived, "delivered where the API last sent crm, signed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_state_file_changes_are_refused() {
    let log = Arc::new(Log::default());
    let rx = ok(log, Duration::ZERO).await;
    let dir = TempDir::new("admin-no-state");
    let relay = Relay::start(&format!(
        "--no-journal --downstream http://{rx}/hooks --dead-letter-file {}",
        dir.arg("dl.jsonl")
    ))
    .await;
    let body = format!("{{\"url\": \"http://{rx}/other\"}}");
    let path = "/v1/destinations/crm";
    let (status, v) = call(&relay, reqwest::Method::PUT, path, None, Some(&body)).await;
    assert_eq!(
        (status, v["type"].as_str()),
        (409, Some("urn:dripfeed:problem:no-state-file")),
        "{v}"
    );
    let path = "/v1/destinations/default";
    let (status, _) = call(&relay, reqwest::Method::DELETE, path, None, None).await;
    assert_eq!(status, 409);
    assert_eq!(
        relay.post(&[], "{}").await.0,
        202,
        "default still takes webhooks"
    );
}
