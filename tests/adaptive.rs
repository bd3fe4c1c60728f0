//! The adaptive drain through the real drain task, against a modeled fragile
//! downstream (a queue: latency grows with its backlog above capacity), on
//! paused time: minutes of traffic in about a second.

use crate::support;

use std::time::Duration;

use dripfeed::rate::AimdConfig;
use dripfeed::{Attempt, Delivery, Throttle};
use support::sim::{Scenario, run};
use tokio::time::sleep;

const TARGET: f64 = 0.150;

#[tokio::test(start_paused = true)]
async fn converges_below_capacity_with_p99_near_target() {
    for capacity in [60.0, 120.0, 180.0] {
        let t = run(&Scenario::new(capacity)).await;
        let mean = t.mean_rate(30.0, 120.0);
        let (lo, hi) = (t.min_rate(30.0, 120.0), t.max_rate(0.0, 120.0));
        let p99 = t.p99(30.0, 120.0);
        eprintln!(
            "C={capacity}: mean {:.3} C, band [{:.3}, {:.3}] C, max {:.3} C, p99 {:.0} ms, first >= 0.8 C at {:?} s",
            mean / capacity,
            lo / capacity,
            t.max_rate(30.0, 120.0) / capacity,
            hi / capacity,
            p99 * 1000.0,
            t.first_at_or_above(0.0, 0.8 * capacity)
        );
        // The cut lands just under the capacity the p99's growth implies:
        // the rate averages about 0.99 C and its troughs stay near 0.97 C.
        assert!(
            mean >= 0.95 * capacity && mean <= capacity,
            "C={capacity}: mean {mean}"
        );
        assert!(lo >= 0.95 * capacity, "C={capacity}: trough {lo}");
        assert!(hi <= 1.15 * capacity, "C={capacity}: peaked at {hi}");
        assert!(p99 <= 1.2 * TARGET, "C={capacity}: p99 {p99}");
        assert!(
            t.throughput(30.0, 120.0) >= 0.75 * capacity,
            "C={capacity}: goodput"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn recovers_within_twenty_seconds_after_an_outage() {
    let capacity = 120.0;
    let mut s = Scenario::new(capacity);
    s.outage = Some((Duration::from_secs(60), Duration::from_secs(70)));
    let t = run(&s).await;
    assert!(
        t.min_rate(60.0, 75.0) < 0.8 * capacity,
        "the outage cut the rate"
    );
    let back = t
        .first_at_or_above(70.0, 0.8 * capacity)
        .expect("recovered");
    eprintln!(
        "recovered above 0.8 C at {back:.1} s ({:.1} s after the outage)",
        back - 70.0
    );
    assert!(back - 70.0 <= 20.0, "recovery took {:.1} s", back - 70.0);
    assert!(t.max_rate(0.0, 120.0) <= 1.15 * capacity);
}

#[tokio::test(start_paused = true)]
async fn an_idle_queue_never_raises_the_rate() {
    let (throttle, _drain) = Throttle::builder()
        .adaptive(AimdConfig::default().build().unwrap())
        .build(|_: &u32, _: Attempt| async { Delivery::Done })
        .unwrap();
    // a trickle: every job finds the drain idle; fast answers, no evidence of need
    for i in 0..60 {
        throttle.try_submit(i).unwrap();
        sleep(Duration::from_secs(1)).await;
    }
    assert_eq!(throttle.drain_rate(), 20.0);
}

#[tokio::test(start_paused = true)]
async fn at_the_floor_a_bad_downstream_does_not_cut_further() {
    // capacity 10/s, below the floor of 20/s: every window is bad
    let mut s = Scenario::new(10.0);
    s.length = Duration::from_secs(60);
    let t = run(&s).await;
    assert!(
        t.points.iter().all(|(_, r, _)| *r >= 20.0),
        "never below the floor"
    );
    assert_eq!(t.points.last().unwrap().1, 20.0, "sits at the floor");
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_hint_counts_as_congestion_and_pauses_emission() {
    use std::sync::atomic::Ordering;
    let (throttle, calls) = support::hinted_throttle(Duration::from_secs(3));
    sleep(Duration::from_millis(1100)).await; // 40/s: the 31st answer says "slow down, 3 s"
    let at_cut = calls.load(Ordering::Relaxed);
    assert_eq!(throttle.drain_rate(), 30.0, "cut by ×0.75");
    sleep(Duration::from_millis(2500)).await;
    assert!(
        calls.load(Ordering::Relaxed) - at_cut <= 1,
        "paused for the hint"
    );
    sleep(Duration::from_secs(2)).await;
    assert!(
        calls.load(Ordering::Relaxed) - at_cut >= 30,
        "resumed after it"
    );
}
