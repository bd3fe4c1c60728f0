//! The fleet's limit through the set: two relays, one with a single
//! `--downstream` and one with two destinations, take their permits from one
//! Redis bucket (`--redis --global-rate 60`), so the receiver gets 60/s in
//! all however much the three destinations hold.

use std::sync::Arc;
use std::time::Duration;

use crate::harness::{Relay, argv};
use crate::load::burst;
use crate::receivers::{self, Log};
use crate::support_redis;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_relays_and_three_destinations_share_one_fleet_rate() {
    if !support_redis::available("two_relays_and_three_destinations_share_one_fleet_rate") {
        return;
    }
    const GLOBAL: f64 = 60.0;
    let redis = support_redis::RedisServer::start();
    let log = Arc::new(Log::default());
    let rx = receivers::ok(log.clone(), Duration::ZERO).await;
    let fleet = format!(
        "--redis {} --global-rate 60 --fleet-size 2 --drain-rate 200 --latency-budget 10s \
         --no-journal --retries 0 --dead-letter-file /dev/null",
        redis.url()
    );
    let one = argv(&format!("{fleet} --downstream http://{rx}/hooks?d=default"));
    let two = argv(&format!(
        "{fleet} --destination a=http://{rx}/hooks?d=a --destination b=http://{rx}/hooks?d=b"
    ));
    let (one, two) = (
        Relay::start_with(&one, &[]).await,
        Relay::start_with(&two, &[]).await,
    );
    // 100/s offered to each relay for 6 s: far above the fleet's 60/s.
    let flood_one = burst(one.addr, 100, 6, |_| Vec::new());
    let flood_two = burst(two.addr, 100, 6, |n| {
        vec![("x-destination", ["a", "b"][n as usize % 2].to_owned())]
    });
    let (a, b) = tokio::join!(flood_one, flood_two);
    assert_eq!(
        a.count(202) + b.count(202),
        1200,
        "all queued: {:?} {:?}",
        a.statuses,
        b.statuses
    );
    let hits = log.hits();
    let first = hits.first().expect("deliveries").at;
    // After a second of warm-up, four seconds of steady state.
    let window = |h: &&crate::receivers::Hit| {
        h.at >= first + Duration::from_secs(1) && h.at < first + Duration::from_secs(5)
    };
    let steady: Vec<_> = hits.iter().filter(window).collect();
    let rate = steady.len() as f64 / 4.0;
    eprintln!(
        "fleet: {rate:.1}/s over 4 s ({} delivered by then)",
        hits.len()
    );
    assert!(
        (rate - GLOBAL).abs() <= GLOBAL * 0.1,
        "the fleet delivered {rate:.1}/s, not {GLOBAL}/s"
    );
    for d in ["d=default", "d=a", "d=b"] {
        let n = steady.iter().filter(|h| h.query == d).count();
        assert!(n >= 20, "every destination gets a share: {d} {n}");
    }
}
