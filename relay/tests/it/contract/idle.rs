//! A configured destination publishes its capacity and its rate (its
//! gauges and the admin API) from the start, busy or idle: a dashboard's
//! `depth / capacity` never divides by zero when a destination rests, and
//! `rate_now` of an idle destination is the rate it would start at.

use std::sync::Arc;
use std::time::Duration;

use super::{Bench, Engine, both, post, receiver};
use crate::harness::TempDir;
use crate::receivers::Log;

both!(a_configured_destination_shows_its_capacity_and_rate_from_the_start);

async fn a_configured_destination_shows_its_capacity_and_rate_from_the_start(engine: Engine) {
    let log = Arc::new(Log::default());
    let rx = receiver(log.clone(), 204, Duration::ZERO).await;
    // a: 10/s for 2 s (20); b: the defaults, 5/s for 1 s (5).
    let files = TempDir::new("contract-idle-files");
    let list = files.join("destinations.json");
    std::fs::write(
        &list,
        format!(
            r#"[{{"name": "a", "url": "http://{rx}/a", "rate": 10, "budget": "2s"}},
                {{"name": "b", "url": "http://{rx}/b"}}]"#
        ),
    )
    .expect("a destinations file");
    let bench = Bench::start(
        engine,
        "idle",
        &format!(
            "--destinations {} --drain-rate 5 --latency-budget 1s",
            list.display()
        ),
    )
    .await;
    let shown = || async {
        let m = bench.relay.metrics().await;
        let a = [("destination", "a")];
        (
            m.find("leaky_bucket_queue_capacity", &a),
            m.find("leaky_bucket_drain_rate", &a),
        )
    };
    assert_eq!(
        shown().await,
        (Some(20.0), Some(10.0)),
        "before any webhook"
    );
    let live = bench.live("a").await;
    let now = |l: &serde_json::Value| (l["capacity"].as_u64(), l["rate_now"].as_f64());
    assert_eq!(now(&live), (Some(20), Some(10.0)), "{live}");
    let b = bench.live("b").await;
    assert_eq!(now(&b), (Some(5), Some(5.0)), "{b}");

    // Busy, then idle for longer than a destination takes to rest.
    assert_eq!(post(&bench.relay, "a", &[], "{\"n\":1}").await.status, 202);
    assert!(log.until(Duration::from_secs(10), |h| !h.is_empty()).await);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(shown().await, (Some(20.0), Some(10.0)), "idle, as before");
    let live = bench.live("a").await;
    assert_eq!(now(&live), (Some(20), Some(10.0)), "{live}");
}
