//! Each overflow policy: who is dropped, who is told what, and the honest wait.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dripfeed::{ChannelSink, DeadLetterReason, Outcome, Overflow, Reason, Throttle, headers};
use support::Recorder;
use tokio::time::sleep;

#[tokio::test(start_paused = true)]
async fn tail_drop_refuses_the_newcomer_and_keeps_the_queue() {
    let rec = Recorder::new();
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(10.0)
        .capacity(3)
        .build(rec.clone())
        .unwrap();
    throttle.pause();
    for i in 0..3u32 {
        assert!(throttle.try_submit(i).unwrap().is_queued());
    }
    let refused = throttle.try_submit(99).unwrap_err();
    assert_eq!(refused.reason(), Reason::Overloaded);
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.into_job(), 99, "handed back");
    throttle.resume();
    sleep(Duration::from_secs(1)).await;
    assert_eq!(rec.jobs(), vec![0, 1, 2]);
    let stats = throttle.stats();
    assert_eq!(stats.overflow(Overflow::TailDrop), 1);
    assert_eq!(stats.rejected(Reason::Overloaded), 1);
    assert_eq!(stats.outcome(Outcome::Refused), 1);
}

#[tokio::test(start_paused = true)]
async fn head_drop_evicts_the_oldest_to_the_hook_and_queues_the_newcomer() {
    let rec = Recorder::new();
    let evicted = Arc::new(Mutex::new(Vec::new()));
    let hook = evicted.clone();
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(10.0)
        .max_rate(100.0) // the ring is larger than the bound: force_push alone would not do
        .latency_budget(Duration::from_millis(300))
        .overflow(Overflow::HeadDrop)
        .on_evicted(move |job| hook.lock().unwrap().push(job))
        .build(rec.clone())
        .unwrap();
    assert_eq!(throttle.capacity(), 3);
    throttle.pause();
    for i in 0..5u32 {
        assert!(throttle.try_submit(i).unwrap().is_queued());
        assert!(throttle.depth() <= 3);
    }
    assert_eq!(*evicted.lock().unwrap(), vec![0, 1]);
    throttle.resume();
    sleep(Duration::from_secs(1)).await;
    assert_eq!(rec.jobs(), vec![2, 3, 4]);
    let stats = throttle.stats();
    assert_eq!(stats.outcome(Outcome::Evicted), 2);
    assert_eq!(stats.overflow(Overflow::HeadDrop), 2);
    assert_eq!(stats.admitted(), 5);
    assert_eq!(stats.delivered(), 3);
}

#[tokio::test(start_paused = true)]
async fn dead_letter_defers_the_newcomer_and_refuses_when_the_sink_is_full() {
    let rec = Recorder::new();
    let (sink, mut letters) = ChannelSink::new(2).unwrap();
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(10.0)
        .capacity(2)
        .overflow(Overflow::DeadLetter)
        .dead_letter(sink)
        .build(rec.clone())
        .unwrap();
    throttle.pause();
    assert!(throttle.try_submit(0u32).unwrap().is_queued());
    assert!(throttle.try_submit(1).unwrap().is_queued());
    assert!(throttle.try_submit(2).unwrap().is_deferred());
    assert!(throttle.try_submit(3).unwrap().is_deferred());
    let refused = throttle.try_submit(4).unwrap_err();
    assert_eq!(
        (refused.reason(), refused.into_job()),
        (Reason::Overloaded, 4)
    );
    let first = letters.recv().await.unwrap();
    assert_eq!((first.job, first.why), (2, DeadLetterReason::Overflow));
    assert_eq!(letters.recv().await.unwrap().job, 3);
    let stats = throttle.stats();
    assert_eq!(stats.outcome(Outcome::DeadLettered), 2);
    assert_eq!(stats.outcome(Outcome::Refused), 1);
    assert_eq!(stats.overflow(Overflow::DeadLetter), 3);
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_depth_over_rate_within_the_jitter_band() {
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(200.0)
        .max_rate(400.0)
        .latency_budget(Duration::from_secs(2))
        .build(Recorder::<u32>::new())
        .unwrap();
    throttle.pause();
    let mut waits = Vec::new();
    for i in 0..1000u32 {
        if let Err(refused) = throttle.try_submit(i) {
            waits.push(refused.retry_after().unwrap());
            let fields = headers::for_rejected(&refused);
            assert_eq!(fields[0].0, "retry-after");
            let secs: u64 = fields[0].1.parse().unwrap();
            assert!((2..=3).contains(&secs), "header {secs}");
        }
    }
    assert_eq!(waits.len(), 600);
    let base = Duration::from_secs(2); // 400 queued / 200 per s
    assert!(waits.iter().all(|w| *w >= base && *w <= base.mul_f64(1.2)));
    let spread =
        waits.iter().max().unwrap().as_secs_f64() - waits.iter().min().unwrap().as_secs_f64();
    assert!(spread > 0.2, "jitter spreads the retries: {spread}");

    // a lower rate: the bound follows, the hint grows with depth / rate
    throttle.set_drain_rate(100.0).unwrap();
    assert_eq!(throttle.capacity(), 200);
    let wait = throttle.try_submit(0).unwrap_err().retry_after().unwrap();
    assert!(
        wait >= Duration::from_secs(4) && wait <= Duration::from_secs_f64(4.8),
        "{wait:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_waiting_submit_gets_the_next_free_place_and_is_cancel_safe() {
    let rec = Recorder::new();
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(10.0)
        .capacity(1)
        .build(rec.clone())
        .unwrap();
    throttle.pause();
    throttle.try_submit(0u32).unwrap();
    // a wait that is dropped holds no place
    let dropped = tokio::time::timeout(Duration::from_millis(50), throttle.submit(1)).await;
    assert!(dropped.is_err());
    let waiter = {
        let t = throttle.clone();
        tokio::spawn(async move { t.submit(2).await })
    };
    support::settle().await;
    assert!(!waiter.is_finished());
    throttle.resume();
    assert!(waiter.await.unwrap().unwrap().is_queued());
    sleep(Duration::from_secs(1)).await;
    assert_eq!(rec.jobs(), vec![0, 2]);
    assert_eq!(throttle.stats().submitted(), 2);
}
