//! `--global-rate` with the fleet's queue (`--queue redis`): one limit over
//! every destination of the fleet. Two relays on one Redis, two
//! destinations at 200/s each and a global rate of 40/s: the receiver gets
//! 40/s in all, both destinations a share. (Before, the relay refused
//! `--global-rate` with `--queue redis` at start, exit 2.)

use std::sync::Arc;
use std::time::Duration;

use crate::contract::{Bench, Engine};
use crate::load::burst;
use crate::receivers::{self, Log};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_keeps_one_rate_over_every_destination() {
    const GLOBAL: f64 = 40.0;
    let log = Arc::new(Log::default());
    let rx = receivers::ok(log.clone(), Duration::ZERO).await;
    let bench = Bench::start(
        Engine::Fleet,
        "global-rate",
        &format!(
            "--destination a=http://{rx}/hooks?d=a --destination b=http://{rx}/hooks?d=b \
             --drain-rate 200 --latency-budget 10s --retries 0 --global-rate {GLOBAL}"
        ),
    )
    .await;
    let other = bench.another("n2").await;
    // 60/s offered to each relay for 4 s: six times the fleet's 40/s.
    let pick = |n: u64| vec![("x-destination", ["a", "b"][n as usize % 2].to_owned())];
    let (one, two) = tokio::join!(
        burst(bench.relay.addr, 60, 4, pick),
        burst(other.addr, 60, 4, pick)
    );
    assert_eq!(one.count(202) + two.count(202), 480, "all queued");
    let counted = log
        .until(Duration::from_secs(30), |hits| {
            hits.first().is_some_and(|f| {
                hits.last()
                    .is_some_and(|l| l.at >= f.at + Duration::from_secs(4))
            })
        })
        .await;
    assert!(counted, "deliveries for 4 s");
    let hits = log.hits();
    let first = hits[0].at;
    // After a second of warm-up, three seconds of steady state.
    let steady: Vec<_> = hits
        .iter()
        .filter(|h| h.at >= first + Duration::from_secs(1) && h.at < first + Duration::from_secs(4))
        .collect();
    let rate = steady.len() as f64 / 3.0;
    eprintln!("fleet queue with a global rate: {rate:.1}/s over 3 s");
    assert!(
        (rate - GLOBAL).abs() <= GLOBAL * 0.25,
        "the fleet delivered {rate:.1}/s, not {GLOBAL}/s"
    );
    for d in ["d=a", "d=b"] {
        let n = steady.iter().filter(|h| h.query == d).count();
        assert!(n >= 20, "every destination gets a share: {d} {n}");
    }
}
