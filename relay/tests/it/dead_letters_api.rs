//! `GET /v1/dead-letters` on the admin listener: every dead-letter line,
//! oldest first, a page at a time through the cursors, across rotated
//! files (here a file holds about three lines); `destination=` filters;
//! a bad limit is a 400, a cursor the relay did not give a 422; the admin
//! token is needed.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::Value;

use crate::harness::{Relay, TempDir, digest, eventually, http};
use crate::receivers::{self, Hit, Log};

const TOKEN: &str = "dead-letters-admin-token";

/// GET `url` with the token (or none): status and JSON body.
async fn get(url: &str, token: Option<&str>) -> (u16, Value) {
    let mut req = http().get(url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.expect("the admin listener answers");
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// POSTs a webhook to `destination`: its id.
async fn post(relay: &Relay, destination: &str, n: u32) -> String {
    let resp = http()
        .post(relay.url("/v1/webhooks/deliver"))
        .header("x-destination", destination)
        .header("content-type", "application/json")
        .body(format!("{{\"n\":{n}}}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 202);
    let body: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
    body["id"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_are_paged_oldest_first_across_rotated_files() {
    let log = Arc::new(Log::default());
    // Refuses (400) until healed.
    let healed = Arc::new(AtomicBool::new(false));
    let healthy = healed.clone();
    let rx = receivers::recording(
        log.clone(),
        Duration::ZERO,
        Arc::new(move |_: &Hit, _| match healthy.load(Ordering::Relaxed) {
            true => StatusCode::NO_CONTENT.into_response(),
            false => StatusCode::BAD_REQUEST.into_response(),
        }),
    )
    .await;
    let dir = TempDir::new("dead-letters-api");
    let digest = digest(TOKEN);
    let file = dir.join("relay.toml");
    let text = format!(
        "admin_token_sha256 = \"{digest}\"\n\
         [[destinations]]\nname = \"billing\"\nurl = \"http://{rx}/b\"\n\
         [[destinations]]\nname = \"shipping\"\nurl = \"http://{rx}/s\"\n"
    );
    std::fs::write(&file, text).unwrap();
    let relay = Relay::start(&format!(
        "--config {} --no-journal --retries 0 --dead-letter-file {} \
         --dead-letter-max-bytes 700 --dead-letter-keep 8",
        file.display(),
        dir.arg("dl.jsonl")
    ))
    .await;
    let mut ids = HashSet::new();
    for n in 0..5 {
        ids.insert(post(&relay, "billing", n).await);
    }
    for n in 5..7 {
        ids.insert(post(&relay, "shipping", n).await);
    }
    let url = |q: &str| relay.admin_url(&format!("/v1/dead-letters{q}"));
    let all_there = eventually(Duration::from_secs(20), || async {
        get(&url("?limit=1000"), Some(TOKEN)).await.1["dead_letters"]
            .as_array()
            .map_or(0, Vec::len)
            == 7
    })
    .await;
    assert!(all_there, "{:?}", get(&url(""), Some(TOKEN)).await);
    assert!(
        std::fs::metadata(dir.join("dl.jsonl.1")).is_ok(),
        "the files rotated"
    );

    // Three at a time, through the cursors: every line once.
    let mut seen = Vec::new();
    let mut query = "?limit=3".to_owned();
    for _ in 0..10 {
        let (status, page) = get(&url(&query), Some(TOKEN)).await;
        assert_eq!(status, 200, "{page}");
        for line in page["dead_letters"].as_array().unwrap() {
            seen.push(line["id"].as_str().unwrap().to_owned());
            assert_eq!(line["last_status"], 400);
        }
        if page["more"] != true {
            break;
        }
        query = format!("?limit=3&cursor={}", page["next_cursor"].as_str().unwrap());
    }
    assert_eq!(seen.len(), 7, "{seen:?}");
    assert_eq!(seen.iter().cloned().collect::<HashSet<_>>(), ids);

    let (_, shipping) = get(&url("?destination=shipping"), Some(TOKEN)).await;
    assert_eq!(shipping["dead_letters"].as_array().unwrap().len(), 2);
    // A page that ends on the last line says nothing more follows.
    for q in ["?limit=7", "?destination=shipping&limit=2"] {
        let (_, page) = get(&url(q), Some(TOKEN)).await;
        assert_eq!(page["more"], false, "{q}: {page}");
    }
    for (bad, want) in [
        ("?limit=0", 400),
        ("?limit=5000", 400),
        ("?limit=1&limit=2", 400),
        ("?cursor=nope!", 422),
    ] {
        let (status, body) = get(&url(bad), Some(TOKEN)).await;
        assert_eq!(status, want, "{bad}: {body}");
    }
    assert_eq!(get(&url(""), None).await.0, 401);

    // Redrive two by id, then shipping's: each line once, under its id.
    healed.store(true, Ordering::Relaxed);
    let billing: Vec<String> = seen
        .iter()
        .filter(|id| !shipping_ids(&shipping).contains(*id))
        .take(2)
        .cloned()
        .collect();
    let by_ids = serde_json::json!({ "ids": billing });
    let redrive = |body: String| {
        http()
            .post(relay.admin_url("/v1/dead-letters/redrive"))
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let answer = |r: reqwest::Response| async move {
        let status = r.status().as_u16();
        let text = r.text().await.unwrap_or_default();
        (
            status,
            serde_json::from_str::<Value>(&text).unwrap_or(Value::Null),
        )
    };
    let (status, done) = answer(redrive(by_ids.to_string()).await.unwrap()).await;
    assert_eq!(
        (status, done["readmitted"].as_u64()),
        (200, Some(2)),
        "{done}"
    );
    let (_, again) = answer(redrive(by_ids.to_string()).await.unwrap()).await;
    assert_eq!(again["readmitted"], 0, "never twice: {again}");
    let body = "{\"destination\":\"shipping\"}".to_owned();
    let (_, ship) = answer(redrive(body).await.unwrap()).await;
    assert_eq!(ship["readmitted"], 2, "{ship}");
    for (bad, want) in [("{}", 422), ("{\"ids\":[]}", 422), ("nope", 400)] {
        let (status, body) = answer(redrive(bad.to_owned()).await.unwrap()).await;
        assert_eq!(status, want, "{bad}: {body}");
    }
    // The four arrive, each under the id it had.
    let mut want: HashSet<String> = billing.into_iter().collect();
    want.extend(shipping_ids(&shipping));
    let arrived = log
        .until(Duration::from_secs(20), |hits| {
            want.iter()
                .all(|id| hits.iter().filter(|h| &h.key == id).count() == 2)
        })
        .await;
    assert!(arrived, "{want:?}");
}

/// The ids in a page.
fn shipping_ids(page: &Value) -> HashSet<String> {
    page["dead_letters"]
        .as_array()
        .map(|all| {
            all.iter()
                .filter_map(|l| l["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}
