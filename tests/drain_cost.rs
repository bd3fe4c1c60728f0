//! Jobs that cost more than one at the drain (`ThrottleBuilder::cost_by`):
//! the drain emits units at its rate, so cost-5 jobs go out five units'
//! time apart, mixed costs each after their own, and a full queue's
//! `Retry-After` counts the queued jobs at the mean cost emitted lately.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dripfeed::{Delivery, Reason, Throttle};
use tokio::time::Instant;

type Times = Arc<Mutex<Vec<(u32, Duration)>>>;

fn throttle(rate: f64, capacity: usize) -> (Throttle<u32>, dripfeed::Drain<u32>, Times) {
    let start = Instant::now();
    let times: Times = Arc::default();
    let seen = times.clone();
    let (t, d) = Throttle::builder()
        .drain_rate(rate)
        .capacity(capacity)
        .cost_by(|units: &u32| *units)
        .build(move |units: &u32, _| {
            seen.lock().unwrap().push((*units, start.elapsed()));
            async { Delivery::Done }
        })
        .unwrap();
    (t, d, times)
}

#[tokio::test(start_paused = true)]
async fn a_cost_five_job_takes_five_units_time() {
    let (t, _d, times) = throttle(100.0, 1_000);
    for _ in 0..100 {
        t.try_submit(5).unwrap();
    }
    tokio::time::sleep(Duration::from_secs(10)).await;
    let times = times.lock().unwrap();
    assert_eq!(times.len(), 100);
    // 500 units at 100 a second: five seconds, 50 ms apart.
    for pair in times.windows(2) {
        let gap = pair[1].1 - pair[0].1;
        assert!(
            gap >= Duration::from_millis(49) && gap <= Duration::from_millis(51),
            "{gap:?}"
        );
    }
    let last = times[99].1;
    assert!(
        last >= Duration::from_millis(4_940) && last <= Duration::from_millis(4_960),
        "{last:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn mixed_costs_each_take_their_own_time() {
    let (t, _d, times) = throttle(10.0, 100);
    for units in [1, 3, 1, 10, 1] {
        t.try_submit(units).unwrap();
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let ms = millis(&times);
    assert_eq!(ms, [(1, 0), (3, 100), (1, 400), (10, 500), (1, 1_500)]);
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_answers_with_the_wait_in_units() {
    let (t, _d, times) = throttle(10.0, 10);
    for _ in 0..10 {
        t.try_submit(5).unwrap();
    }
    // Two emitted (the mean cost is 5 from the first), then full again.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(times.lock().unwrap().len(), 2);
    for _ in 0..2 {
        t.try_submit(5).unwrap();
    }
    let refused = t.try_submit(5).unwrap_err();
    assert_eq!(refused.reason(), Reason::Overloaded);
    // Ten queued jobs of five units at 10 a second: about 5 s, not 1 s.
    let wait = refused.retry_after().expect("a wait");
    assert!(wait >= Duration::from_secs(4), "{wait:?}");
}

#[tokio::test(start_paused = true)]
async fn a_panicking_cost_counts_one_and_the_drain_goes_on() {
    let start = Instant::now();
    let times: Times = Arc::default();
    let seen = times.clone();
    let (t, _d) = Throttle::builder()
        .drain_rate(10.0)
        .capacity(10)
        .cost_by(|n: &u32| if *n == 0 { panic!("no cost for 0") } else { *n })
        .build(move |n: &u32, _| {
            seen.lock().unwrap().push((*n, start.elapsed()));
            async { Delivery::Done }
        })
        .unwrap();
    for n in [0, 2, 1] {
        t.try_submit(n).unwrap();
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let ms = millis(&times);
    assert_eq!(ms, [(0, 0), (2, 100), (1, 300)]);
}

#[tokio::test(start_paused = true)]
async fn a_rate_change_keeps_the_last_jobs_cost() {
    let (t, _d, times) = throttle(10.0, 100);
    t.try_submit(5).unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    // Five units at the new 5/s: the next is due 1 s after the first
    // (not 200 ms: the rate change keeps what the last job cost).
    t.set_drain_rate(5.0).unwrap();
    t.try_submit(1).unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ms = millis(&times);
    assert_eq!(ms, [(5, 0), (1, 1_000)]);
}

/// Each job's units and when it was emitted, in ms.
fn millis(times: &Times) -> Vec<(u32, u128)> {
    times
        .lock()
        .unwrap()
        .iter()
        .map(|(u, d)| (*u, d.as_millis()))
        .collect()
}
