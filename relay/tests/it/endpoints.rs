//! An endpoint as a user manages it, through the binary: its subscription
//! is shown, a merge patch of `event_types` and `disabled` through its
//! application's route takes, its event's payload reaches it as the
//! sender wrote it (not re-serialized), and a configured destination keeps
//! its own metric series through a `PATCH`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{Relay, TempDir, argv, http};
use crate::receivers::{Log, ok};

/// `method` `url` with `body` (raw text) as `content_type`: status, JSON.
async fn call(method: reqwest::Method, url: &str, content_type: &str, body: &str) -> (u16, Value) {
    let resp = http()
        .request(method, url)
        .header("content-type", content_type)
        .body(body.to_owned())
        .send()
        .await
        .expect("the relay answers");
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_is_shown_patched_and_sent_its_payload_as_written() {
    let log = Arc::new(Log::default());
    let rx = ok(log.clone(), Duration::ZERO).await;
    let dir = TempDir::new("endpoints");
    let args = format!(
        "--destination shop=http://{rx}/shop --data-dir {}",
        dir.arg("data")
    );
    let relay = Relay::start_with(&argv(&args), &[]).await;
    let put = reqwest::Method::PUT;
    let patch = reqwest::Method::PATCH;
    let json_type = "application/json";
    let merge = "application/merge-patch+json";

    let (status, _) = call(
        put.clone(),
        &relay.admin_url("/v1/applications/acme"),
        json_type,
        "{}",
    )
    .await;
    assert_eq!(status, 201);
    let e1 = relay.admin_url("/v1/applications/acme/endpoints/e1");
    let body = json!({"url": format!("http://{rx}/e1"), "event_types": ["invoice.*"], "description": "billing"});
    let (status, v) = call(put, &e1, json_type, &body.to_string()).await;
    assert_eq!(status, 201, "{v}");
    assert_eq!(
        (
            &v["application"],
            &v["event_types"],
            &v["description"],
            &v["disabled"]
        ),
        (
            &json!("acme"),
            &json!(["invoice.*"]),
            &json!("billing"),
            &json!(false)
        ),
        "the subscription is shown: {v}"
    );

    // A merge patch of an endpoint's own fields, through its application.
    let (status, v) = call(
        patch.clone(),
        &e1,
        merge,
        r#"{"event_types": ["invoice.paid"]}"#,
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["event_types"], json!(["invoice.paid"]), "{v}");

    // The payload as written: keys in the sender's order, its spacing.
    let post = relay.url("/v1/applications/acme/events");
    let payload = r#"{"zeta": 1, "alpha": {"b": 2, "a": [1, 2.50]}}"#;
    let event = format!(r#"{{"type": "invoice.paid", "payload": {payload}}}"#);
    let (status, v) = call(reqwest::Method::POST, &post, json_type, &event).await;
    assert_eq!((status, &v["endpoints"]), (202, &json!(1)), "{v}");
    let came = log
        .until(Duration::from_secs(30), |hits| {
            hits.iter()
                .any(|h| h.headers.contains_key("webhook-event-type"))
        })
        .await;
    assert!(came, "the copy reached e1");
    let copy = log
        .hits()
        .into_iter()
        .find(|h| h.headers.contains_key("webhook-event-type"))
        .expect("the copy");
    assert_eq!(std::str::from_utf8(&copy.body).unwrap(), payload);

    // A patch that names its application as it is: taken.
    let body = r#"{"application": "acme", "description": "billing, EU"}"#;
    let (status, v) = call(patch.clone(), &e1, merge, body).await;
    assert_eq!(
        (status, &v["description"]),
        (200, &json!("billing, EU")),
        "{v}"
    );

    // Disabled: it takes no new event.
    let (status, v) = call(patch.clone(), &e1, merge, r#"{"disabled": true}"#).await;
    assert_eq!((status, &v["disabled"]), (200, &json!(true)), "{v}");
    let (status, v) = call(reqwest::Method::POST, &post, json_type, &event).await;
    assert_eq!((status, &v["endpoints"]), (202, &json!(0)), "{v}");

    // A configured destination has its series, and keeps them through a
    // PATCH (which makes it the admin API's).
    let shop = relay.admin_url("/v1/destinations/shop");
    let (status, v) = call(reqwest::Method::GET, &shop, json_type, "").await;
    assert_eq!((status, &v["metrics"]), (200, &json!(true)), "{v}");
    assert!(v.get("application").is_none(), "no endpoint: {v}");
    let (status, v) = call(patch, &shop, merge, r#"{"rate": 20}"#).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (&v["rate"], &v["metrics"]),
        (&json!(20.0), &json!(true)),
        "{v}"
    );
}
