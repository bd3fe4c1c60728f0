//! A downstream that panics, fails or hangs never stops the drain.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use dripfeed::{Attempt, ChannelSink, DeadLetterReason, Delivery, Outcome, Throttle};
use tokio::time::sleep;

#[tokio::test(start_paused = true)]
async fn panics_failures_and_hangs_are_counted_and_the_drain_goes_on() {
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let downstream = move |job: &u32, _: Attempt| {
        c.fetch_add(1, Ordering::Relaxed);
        let job = *job;
        async move {
            match job % 4 {
                0 => panic!("downstream bug on job {job}"),
                1 => Delivery::Failed,
                2 => std::future::pending().await,
                _ => Delivery::Done,
            }
        }
    };
    let (sink, mut letters) = ChannelSink::new(100).unwrap();
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(100.0)
        .deliver_timeout(Duration::from_secs(1))
        .dead_letter(sink)
        .build(downstream)
        .unwrap();
    for i in 0..40u32 {
        throttle.try_submit(i).unwrap();
    }
    sleep(Duration::from_secs(3)).await;
    assert_eq!(calls.load(Ordering::Relaxed), 40, "every job was tried");
    let stats = throttle.stats();
    assert_eq!(stats.delivered(), 10);
    assert_eq!(stats.delivery_failures(), 30);
    assert_eq!(
        stats.outcome(Outcome::DeadLettered),
        30,
        "failed jobs are kept, not lost"
    );
    assert_eq!(stats.in_flight(), 0);
    let mut failed: Vec<u32> = Vec::new();
    while let Ok(letter) = letters.try_recv() {
        assert_eq!(letter.why, DeadLetterReason::Failed { attempts: 1 });
        failed.push(letter.job);
    }
    failed.sort();
    assert_eq!(failed, (0..40).filter(|j| j % 4 != 3).collect::<Vec<_>>());
    // and the drain still works
    throttle.try_submit(3).unwrap();
    sleep(Duration::from_millis(50)).await;
    assert_eq!(throttle.stats().delivered(), 11);
}

#[tokio::test(start_paused = true)]
async fn the_drain_waits_when_every_delivery_slot_is_busy() {
    let slow = |_: &u32, _: Attempt| async {
        sleep(Duration::from_secs(1)).await;
        Delivery::Done
    };
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(1000.0)
        .max_in_flight(2)
        .build(slow)
        .unwrap();
    for i in 0..10u32 {
        throttle.try_submit(i).unwrap();
    }
    sleep(Duration::from_millis(500)).await;
    let stats = throttle.stats();
    assert_eq!((stats.in_flight(), stats.depth()), (2, 8));
    sleep(Duration::from_millis(4600)).await;
    assert_eq!(throttle.stats().delivered(), 10);
}

#[tokio::test(start_paused = true)]
async fn expired_jobs_take_no_slot_and_go_to_the_hook() {
    let expired = Arc::new(std::sync::Mutex::new(Vec::new()));
    let hook = expired.clone();
    let rec = support::Recorder::new();
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(10.0)
        .capacity(20)
        .max_queue_wait(Duration::from_millis(250))
        .on_expired(move |job| hook.lock().unwrap().push(job))
        .build(rec.clone())
        .unwrap();
    for i in 0..10u32 {
        throttle.try_submit(i).unwrap();
    }
    sleep(Duration::from_secs(2)).await;
    // 0 s, 0.1 s, 0.2 s go out; the rest waited past 250 ms
    assert_eq!(rec.jobs(), vec![0, 1, 2]);
    assert_eq!(*expired.lock().unwrap(), (3..10).collect::<Vec<_>>());
    let stats = throttle.stats();
    assert_eq!((stats.expired(), stats.outcome(Outcome::Expired)), (7, 7));
    // expiry took no pacing slot: a fresh job goes out at once
    let before = rec.len();
    throttle.try_submit(50).unwrap();
    support::settle().await;
    assert_eq!(rec.len(), before + 1);
}
