//! An `Idempotency-Key` is scoped by tenant, encoded so that no tenant and
//! key collide with another pair, and names one request: its destination
//! and its body. The same request again names the first id; another body
//! or another destination is 422 `key-reused`, and nothing is queued.

use std::sync::Arc;
use std::time::Duration;

use super::{Bench, Engine, both, post, receiver};
use crate::receivers::Log;

both!(a_key_names_one_request);

async fn a_key_names_one_request(engine: Engine) {
    let log = Arc::new(Log::default());
    let rx = receiver(log.clone(), 204, Duration::ZERO).await;
    let bench = Bench::start(
        engine,
        "keys",
        &format!(
            "--destination a=http://{rx}/a?d=a --destination b=http://{rx}/b?d=b --drain-rate 50"
        ),
    )
    .await;
    let relay = &bench.relay;
    let key = [("idempotency-key", "order-1")];
    let first = post(relay, "a", &key, r#"{"n":1}"#).await;
    assert_eq!(
        (first.status, &first.body["status"]),
        (202, &"queued".into()),
        "{}",
        first.body
    );
    let again = post(relay, "a", &key, r#"{"n":1}"#).await;
    assert_eq!(again.status, 202, "{}", again.body);
    assert_eq!(again.body["status"], "duplicate");
    assert_eq!(
        again.body["id"], first.body["id"],
        "the same request names the first id"
    );
    let other_body = post(relay, "a", &key, r#"{"n":2}"#).await;
    assert_eq!(other_body.status, 422, "another body: {}", other_body.body);
    assert_eq!(other_body.body["type"], "urn:dripfeed:problem:key-reused");
    let other_destination = post(relay, "b", &key, r#"{"n":1}"#).await;
    assert_eq!(
        other_destination.status, 422,
        "another destination: {}",
        other_destination.body
    );
    assert_eq!(
        other_destination.body["type"],
        "urn:dripfeed:problem:key-reused"
    );

    // Tenant "a:b" with key "c" and tenant "a" with key "b:c" are two
    // requests of two tenants, not one.
    let mut ids = Vec::new();
    for (tenant, key) in [("a:b", "c"), ("a", "b:c")] {
        let p = post(
            relay,
            "a",
            &[("x-tenant", tenant), ("idempotency-key", key)],
            r#"{"n":3}"#,
        )
        .await;
        assert_eq!(p.status, 202, "{tenant} {key}: {}", p.body);
        assert_eq!(p.body["status"], "queued", "{tenant} {key}: {}", p.body);
        ids.push(p.body["id"].as_str().unwrap_or_default().to_owned());
    }
    assert_ne!(ids[0], ids[1]);

    // Delivered: the first once, the two tenants' each; nothing else.
    let first_id = first.body["id"].as_str().unwrap_or_default().to_owned();
    let arrived = log
        .until(Duration::from_secs(20), |hits| hits.len() >= 3)
        .await;
    assert!(arrived, "three webhooks delivered: {}", log.len());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let keys = log.keys();
    assert_eq!(keys.len(), 3, "{keys:?}");
    for id in [&first_id, &ids[0], &ids[1]] {
        assert_eq!(keys.get(id), Some(&1), "{id} delivered once: {keys:?}");
    }
    for h in log.hits() {
        assert_eq!(h.query, "d=a", "nothing for b");
        assert!(
            !String::from_utf8_lossy(&h.body).contains("\"n\":2"),
            "not the other body"
        );
    }
}
