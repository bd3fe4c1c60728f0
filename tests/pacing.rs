//! The drain's output rate: constant, exact, and no burst after idle.

use crate::support;

use std::time::Duration;

use dripfeed::{Delivery, Throttle};
use support::{Recorder, settle};
use tokio::time::{Instant, advance, sleep};

const TICK: Duration = Duration::from_millis(1);

fn gaps(times: &[Instant]) -> Vec<Duration> {
    times.windows(2).map(|w| w[1] - w[0]).collect()
}

#[tokio::test(start_paused = true)]
async fn queued_jobs_leave_at_the_drain_rate_the_first_at_once() {
    let rec = Recorder::new();
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(50.0)
        .capacity(100)
        .build(rec.clone())
        .unwrap();
    let start = Instant::now();
    for i in 0..100u32 {
        throttle.try_submit(i).unwrap();
    }
    sleep(Duration::from_secs(3)).await;
    let times = rec.times();
    assert_eq!(rec.jobs(), (0..100).collect::<Vec<_>>(), "FIFO, none lost");
    assert!(times[0] - start <= TICK, "first at once");
    let span = times[99] - times[0];
    let want = Duration::from_secs_f64(99.0 / 50.0);
    assert!(
        span + TICK >= want && span <= want + TICK,
        "span {span:?} vs {want:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn exact_average_at_high_rates_despite_the_millisecond_timer() {
    for rate in [1_000.0, 7_000.0, 100_000.0] {
        let count = Recorder::<u32>::new();
        let (throttle, _drain) = Throttle::builder()
            .drain_rate(rate)
            .capacity(1_000_000)
            .build(count.clone())
            .unwrap();
        let n = (rate as u32) * 2;
        for i in 0..n {
            throttle.try_submit(i).unwrap();
        }
        let start = Instant::now();
        sleep(Duration::from_secs(1)).await;
        settle().await;
        let sent = count.len() as f64;
        // jobs due in [0, 1 s] from a schedule starting at 0: rate + 1, ± one tick's worth
        let slack = rate * TICK.as_secs_f64() + 1.0;
        assert!(
            (sent - (rate + 1.0)).abs() <= slack,
            "rate {rate}: {sent} in {:?}",
            start.elapsed()
        );
        throttle.pause();
    }
}

#[tokio::test(start_paused = true)]
async fn a_burst_after_idle_leaves_at_the_rate_not_at_once() {
    let rec = Recorder::new();
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(10.0)
        .capacity(50)
        .build(rec.clone())
        .unwrap();
    throttle.try_submit(0u32).unwrap();
    sleep(Duration::from_secs(60)).await; // a long idle: a token bucket would have a burst saved
    let burst_at = Instant::now();
    for i in 1..=20u32 {
        throttle.try_submit(i).unwrap();
    }
    sleep(Duration::from_millis(1050)).await;
    let times: Vec<_> = rec.times().into_iter().filter(|t| *t >= burst_at).collect();
    assert_eq!(
        times.len(),
        11,
        "first at once, then one per 100 ms: {:?}",
        gaps(&times)
    );
    assert!(times[0] - burst_at <= TICK);
    for gap in gaps(&times) {
        assert!(gap + TICK >= Duration::from_millis(100), "gap {gap:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn pause_stops_emission_and_resume_does_not_burst() {
    let rec = Recorder::new();
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(10.0)
        .capacity(50)
        .build(rec.clone())
        .unwrap();
    throttle.pause();
    for i in 0..30u32 {
        throttle.try_submit(i).unwrap();
    }
    sleep(Duration::from_secs(5)).await;
    assert_eq!(rec.len(), 0, "paused: nothing emitted, all admitted");
    assert_eq!(throttle.depth(), 30);
    throttle.resume();
    sleep(Duration::from_millis(450)).await;
    assert_eq!(rec.len(), 5, "one at once, then 10/s");
}

#[tokio::test(start_paused = true)]
async fn a_new_rate_applies_from_the_next_emission() {
    let rec = Recorder::new();
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(1.0)
        .max_rate(100.0)
        .capacity(100)
        .build(rec.clone())
        .unwrap();
    for i in 0..50u32 {
        throttle.try_submit(i).unwrap();
    }
    settle().await;
    assert_eq!(rec.len(), 1);
    advance(Duration::from_millis(100)).await;
    throttle.set_drain_rate(100.0).unwrap();
    // next due 10 ms after the first emission, which is already past
    sleep(Duration::from_millis(100)).await;
    let n = rec.len();
    assert!((10..=13).contains(&n), "{n} after the change");
    assert_eq!(throttle.drain_rate(), 100.0);
}

#[tokio::test(start_paused = true)]
async fn the_slowest_rate_works_too() {
    let rec = Recorder::new();
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(0.1)
        .capacity(3)
        .build(rec.clone())
        .unwrap();
    for i in 0..3u32 {
        throttle.try_submit(i).unwrap();
    }
    sleep(Duration::from_secs(19)).await;
    assert_eq!(rec.len(), 2, "0 s and 10 s");
    sleep(Duration::from_secs(2)).await;
    assert_eq!(rec.len(), 3);
    let _ = Delivery::Done;
}
