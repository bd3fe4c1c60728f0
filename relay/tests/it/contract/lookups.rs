//! `GET /v1/webhooks/{id}` finds a webhook among many destinations
//! without asking each (the fleet asks Redis about the destinations whose
//! tag the id carries, one in 256: it asked every one, a
//! round trip each, for any id anyone holding an intake key sent), and an
//! event's id is no webhook's (404 in both engines, not one copy's
//! status). A page of every destination's dead letters reads the letters
//! of those that have some (the fleet counts them a batch to a round
//! trip; it read each destination's letters in turn).

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
    let bench = Bench::start(engine, "lookups", "--retries 0").await;
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

    // Three dead letters, of one destination.
    let failing = Arc::new(Log::default());
    let bad = receiver(failing.clone(), 400, Duration::ZERO).await;
    let url = relay.admin_url("/v1/destinations/zz-failing");
    let (status, v) = send_json(
        Method::PUT,
        &url,
        &json!({"url": format!("http://{bad}/f")}),
    )
    .await;
    assert_eq!(status, 201, "{v}");
    for n in 0..3 {
        let p = post(relay, "zz-failing", &[], &format!("{{\"n\":{n}}}")).await;
        assert_eq!(p.status, 202, "{}", p.body);
    }
    let letters = relay.admin_url("/v1/dead-letters");
    let three = crate::harness::eventually(Duration::from_secs(30), || async {
        get_json(&letters).await["dead_letters"]
            .as_array()
            .map_or(0, Vec::len)
            == 3
    })
    .await;
    assert!(three, "{}", get_json(&letters).await);

    // The fleet asks Redis about a few destinations, not all of them.
    let Some(redis) = &bench.redis else {
        return;
    };
    let calls = |command: &str| {
        let stats = redis.cli(&["INFO", "commandstats"]);
        let prefix = format!("cmdstat_{command}:");
        stats
            .lines()
            .filter(|l| l.starts_with(&prefix))
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
    let before = calls("xrange");
    let page = get_json(&letters).await;
    assert_eq!(
        page["dead_letters"].as_array().map_or(0, Vec::len),
        3,
        "{page}"
    );
    let read = calls("xrange") - before;
    assert!(read <= 4, "{read} destinations' letters read for one page");
    let scripts = || calls("evalsha") + calls("eval");
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
