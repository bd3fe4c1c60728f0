//! A `PUT` that leaves a secret out of a destination that signs is a 422
//! naming the field (`null` stops signing); `PATCH` changes only what it
//! names; no admin answer shows a URL's password.

use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::contract::{Bench, Engine, receiver, send_json};
use crate::receivers::Log;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_is_never_dropped_by_leaving_it_out() {
    let log = Arc::new(Log::default());
    let rx = receiver(log.clone(), 204, Duration::ZERO).await;
    let bench = Bench::start(
        Engine::Local,
        "secrets",
        &format!("--destination a=http://{rx}/a"),
    )
    .await;
    let relay = &bench.relay;
    let url = relay.admin_url("/v1/destinations/signed");
    let hooks = format!("http://ops:hunter2@{rx}/signed");
    let (status, made) =
        send_json(Method::PUT, &url, &json!({"url": hooks, "secret": SECRET})).await;
    assert_eq!(status, 201, "{made}");
    assert_eq!(made["secret_set"], true);

    // Only the rate: refused, naming the field; nothing changed.
    let (status, refused) = send_json(Method::PUT, &url, &json!({"url": hooks, "rate": 30})).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["type"], "urn:dripfeed:problem:secret-left-out");
    assert!(
        refused["detail"]
            .as_str()
            .unwrap_or_default()
            .starts_with("secret:"),
        "{refused}"
    );
    let now = crate::contract::get_json(&url).await;
    assert_eq!(now["secret_set"], true, "{now}");

    // PATCH changes what it names, and keeps signing.
    let (status, patched) = send_json(Method::PATCH, &url, &json!({"rate": 30})).await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(
        (patched["rate"].as_f64(), &patched["secret_set"]),
        (Some(30.0), &json!(true)),
        "{patched}"
    );
    let p = crate::contract::post(relay, "signed", &[], "{\"n\":1}").await;
    assert_eq!(p.status, 202, "{}", p.body);
    assert!(log.until(Duration::from_secs(10), |h| !h.is_empty()).await);
    let hit = &log.hits()[0];
    assert!(
        hit.headers.contains_key("webhook-signature"),
        "still signed: {:?}",
        hit.headers
    );

    // null says it: no signing.
    let (status, plain) =
        send_json(Method::PUT, &url, &json!({"url": hooks, "secret": null})).await;
    assert_eq!(status, 200, "{plain}");
    assert_eq!(plain["secret_set"], false, "{plain}");
    let (status, gone) = send_json(Method::PATCH, &url, &json!({"url": null})).await;
    assert_eq!(status, 422, "{gone}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_urls_password_is_in_no_admin_answer() {
    let log = Arc::new(Log::default());
    let rx = receiver(log.clone(), 204, Duration::ZERO).await;
    let bench = Bench::start(
        Engine::Local,
        "passwords",
        &format!("--destination a=http://ops:hunter2@{rx}/a"),
    )
    .await;
    let relay = &bench.relay;
    let url = relay.admin_url("/v1/destinations/b");
    let (status, made) = send_json(
        Method::PUT,
        &url,
        &json!({"url": format!("http://ops:hunter2@{rx}/b")}),
    )
    .await;
    assert_eq!(status, 201, "{made}");
    assert_eq!(made["url"], format!("http://ops:***@{rx}/b"), "{made}");
    for answer in [
        crate::contract::get_json(&relay.admin_url("/v1/destinations")).await,
        crate::contract::get_json(&relay.admin_url("/v1/destinations/a")).await,
        crate::contract::get_json(&url).await,
    ] {
        assert!(!answer.to_string().contains("hunter2"), "{answer}");
    }
}
