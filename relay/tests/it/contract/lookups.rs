//! `GET /v1/webhooks/{id}` finds a webhook among many destinations
//! without asking each (the fleet asks Redis about the destinations whose
//! tag the id carries, about one in a thousand: it asked every one, a
//! round trip each, for any id anyone holding an intake key sent), and an
//! event's id is no webhook's (404 in both engines, not one copy's
//! status).

use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use super::{Bench, Engine, both, get_json, post, receiver, send_json};
use crate::harness::http;
use crate::receivers::Log;

/// Destinations beside the one the webhook goes to.
const OTHERS: usize = 200;

both!(a_webhook_is_found_among_many_destinations_and_an_event_is_not_one);

async fn a_webhook_is_found_among_many_destinations_and_an_event_is_not_one(engine: Engine) {
    let log = Arc::new(Log::default());
    let rx = receiver(log.clone(), 204, Duration::ZERO).await;
    let bench = Bench::start(engine, "lookups", "").await;
    let relay = &bench.relay;
    for i in 0..OTHERS {
        let url = relay.admin_url(&format!("/v1/destinations/d{i:03}"));
        let (status, v) =
            send_json(Method::PUT, &url, &json!({"url": format!("http://{rx}/d")})).await;
        assert_eq!(status, 201, "{v}");
    }
    let (status, _) = send_json(
        Method::PUT,
        &relay.admin_url("/v1/applications/acme"),
        &json!({}),
    )
    .await;
    assert_eq!(status, 201);
    let e = relay.admin_url("/v1/applications/acme/endpoints/e");
    let (status, v) = send_json(Method::PUT, &e, &json!({"url": format!("http://{rx}/e")})).await;
    assert_eq!(status, 201, "{v}");

    let webhook = |i: usize| async move {
        let p = post(relay, &format!("d{i:03}"), &[], "{\"n\":1}").await;
        assert_eq!(p.status, 202, "{}", p.body);
        p.body["id"].as_str().expect("an id").to_owned()
    };
    let status_of = |id: String| async move {
        let resp = http()
            .get(relay.url(&format!("/v1/webhooks/{id}")))
            .send()
            .await
            .expect("an answer");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        (
            status,
            serde_json::from_str::<serde_json::Value>(&text).unwrap_or_default(),
        )
    };
    for i in [0, 77, OTHERS - 1] {
        let id = webhook(i).await;
        let (status, v) = status_of(id).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["destination"], format!("d{i:03}"), "{v}");
    }
    let events = relay.url("/v1/applications/acme/events");
    let (status, v) = send_json(
        Method::POST,
        &events,
        &json!({"type": "t.x", "payload": {}}),
    )
    .await;
    assert_eq!((status, &v["endpoints"]), (202, &json!(1)), "{v}");
    let event = v["id"].as_str().expect("an event id").to_owned();
    let shown = get_json(&relay.admin_url(&format!("/v1/applications/acme/events/{event}"))).await;
    assert!(shown["copies"].is_array(), "{shown}");
    let (status, v) = status_of(event).await;
    assert_eq!(status, 404, "an event's id is no webhook's: {v}");

    // The fleet asks Redis about a few destinations, not all of them.
    let Some(redis) = &bench.redis else {
        return;
    };
    let scripts = || {
        let stats = redis.cli(&["INFO", "commandstats"]);
        stats
            .lines()
            .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
            .filter_map(|l| {
                l.split("calls=")
                    .nth(1)?
                    .split(',')
                    .next()?
                    .parse::<u64>()
                    .ok()
            })
            .sum::<u64>()
    };
    let before = scripts();
    const LOOKUPS: u64 = 20;
    for n in 0..LOOKUPS {
        let (status, _) = status_of(format!("{}", 1_000_003 + n * 7919)).await;
        assert_eq!(status, 404);
    }
    let asked = scripts() - before;
    // About OTHERS / 1024 a lookup, with whatever else runs meanwhile
    // (drains, sweeps); every destination would be 20 × 202.
    assert!(
        asked < LOOKUPS * 20,
        "{asked} scripts run for {LOOKUPS} lookups of unknown ids"
    );
}
