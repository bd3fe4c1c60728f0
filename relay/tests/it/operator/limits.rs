//! Limits as the README promises them: a request head over 64 KiB is a 431
//! on both listeners (not only one over hyper's read buffer), and the
//! series of a deleted destination leave `/metrics`, so the page stays
//! bounded by `max_destinations` however many come and go.

use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::contract::{Bench, Engine, post, receiver, send_json};
use crate::harness::eventually;
use crate::raw;
use crate::receivers::Log;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_over_64_kib_is_a_431_on_both_listeners() {
    let log = Arc::new(Log::default());
    let rx = receiver(log.clone(), 204, Duration::ZERO).await;
    let bench = Bench::start(
        Engine::Local,
        "head",
        &format!("--destination a=http://{rx}/a"),
    )
    .await;
    let relay = &bench.relay;
    let admin = relay.admin.expect("an admin listener");
    for size in [70_000usize, 114_515, 200_000] {
        let filler = "x".repeat(size);
        for (addr, head) in [
            (
                relay.addr,
                format!(
                    "POST /v1/webhooks/deliver HTTP/1.1\r\nhost: relay\r\ncontent-type: application/json\r\n\
                     x-filler: {filler}\r\ncontent-length: 2\r\n\r\n{{}}"
                ),
            ),
            (
                admin,
                format!(
                    "GET /v1/destinations HTTP/1.1\r\nhost: relay\r\nx-filler: {filler}\r\n\r\n"
                ),
            ),
        ] {
            let status = raw::exchange(addr, head.as_bytes(), Duration::from_secs(10)).await;
            assert_eq!(status, Some(431), "a head of {size} bytes to {addr}");
        }
    }
    // Under the limit, taken.
    let p = post(relay, "a", &[("x-filler", &"y".repeat(60_000))], "{}").await;
    assert_eq!(p.status, 202, "{}", p.body);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(log.len(), 1, "no webhook of a refused head was delivered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_destinations_series_leave_the_metrics_page() {
    let log = Arc::new(Log::default());
    let rx = receiver(log.clone(), 204, Duration::ZERO).await;
    let bench = Bench::start(
        Engine::Local,
        "series",
        &format!("--destination a=http://{rx}/a --max-destinations 3"),
    )
    .await;
    let relay = &bench.relay;
    let series = |page: &str| page.lines().filter(|l| !l.starts_with('#')).count();
    let before = series(&relay.metrics_page().await);
    let mut most = 0;
    for n in 0..40 {
        let name = format!("d{n}");
        let url = relay.admin_url(&format!("/v1/destinations/{name}"));
        let (status, body) = send_json(
            Method::PUT,
            &url,
            &json!({"url": format!("http://{rx}/{name}")}),
        )
        .await;
        assert_eq!(status, 201, "{body}");
        assert_eq!(post(relay, &name, &[], "{}").await.status, 202);
        let (status, body) = send_json(Method::DELETE, &url, &json!({})).await;
        assert_eq!(status, 202, "{body}");
        let gone = eventually(Duration::from_secs(10), || async {
            crate::contract::get_json(&url).await["type"]
                == "urn:dripfeed:problem:unknown-destination"
        })
        .await;
        assert!(gone, "{name} drained and forgotten");
        let page = relay.metrics_page().await;
        assert!(
            !page.contains(&format!("destination=\"{name}\"")),
            "{name}'s series stayed"
        );
        most = most.max(series(&page));
    }
    assert!(
        most <= before * 3,
        "the page grew from {before} to {most} series over 40 destinations made and deleted"
    );
    assert_eq!(log.len(), 40, "each destination delivered its webhook");
}
