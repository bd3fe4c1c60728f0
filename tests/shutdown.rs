//! Shutdown loses nothing: drained, dead-lettered or handed back, every job counted.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use dripfeed::{ChannelSink, DeadLetterReason, Delivery, Outcome, Reason, RetryPolicy, Throttle};
use support::Recorder;
use tokio::time::{Instant, sleep};

#[tokio::test(start_paused = true)]
async fn shutdown_drains_until_the_deadline_then_hands_back_the_rest() {
    let rec = Recorder::new();
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(10.0)
        .capacity(100)
        .build(rec.clone())
        .unwrap();
    for i in 0..50u32 {
        throttle.try_submit(i).unwrap();
    }
    let start = Instant::now();
    let report = throttle.shutdown(Duration::from_millis(2050)).await;
    assert!(start.elapsed() <= Duration::from_millis(2100));
    assert_eq!(
        rec.jobs(),
        (0..21).collect::<Vec<_>>(),
        "0 s, 0.1 s, … 2.0 s"
    );
    assert_eq!(report.returned, (21..50).collect::<Vec<_>>());
    assert_eq!(report.stats.outcome(Outcome::Returned), 29);
    assert_eq!(report.stats.submitted(), 50);
    assert!(report.stats.is_closed());
    let refused = throttle.try_submit(99).unwrap_err();
    assert_eq!(
        (refused.reason(), refused.retry_after()),
        (Reason::Closed, None)
    );
}

#[tokio::test(start_paused = true)]
async fn leftovers_go_to_the_sink_when_there_is_one() {
    let (sink, mut letters) = ChannelSink::new(100).unwrap();
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(1.0)
        .capacity(10)
        .dead_letter(sink)
        .build(Recorder::<u32>::new())
        .unwrap();
    for i in 0..10u32 {
        throttle.try_submit(i).unwrap();
    }
    let report = throttle.shutdown(Duration::from_millis(500)).await;
    assert!(report.returned.is_empty());
    assert_eq!(report.stats.delivered(), 1);
    assert_eq!(report.stats.outcome(Outcome::DeadLettered), 9);
    for i in 1..10u32 {
        let letter = letters.recv().await.unwrap();
        assert_eq!((letter.job, letter.why), (i, DeadLetterReason::Shutdown));
    }
}

#[tokio::test(start_paused = true)]
async fn an_empty_queue_shuts_down_at_once_after_deliveries_finish() {
    let slow = |_: &u32, _| async {
        sleep(Duration::from_secs(3)).await;
        dripfeed::Delivery::Done
    };
    let (throttle, _drain) = Throttle::builder().drain_rate(100.0).build(slow).unwrap();
    throttle.try_submit(1).unwrap();
    sleep(Duration::from_millis(10)).await;
    let start = Instant::now();
    let report = throttle.shutdown(Duration::from_secs(60)).await;
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(2900) && took < Duration::from_secs(4),
        "{took:?}"
    );
    assert_eq!(
        report.stats.delivered(),
        1,
        "the delivery in flight was waited for"
    );
}

#[tokio::test(start_paused = true)]
async fn dropping_every_handle_shuts_down_the_same_way() {
    let rec = Recorder::new();
    let (throttle, drain) = Throttle::builder()
        .drain_rate(10.0)
        .capacity(100)
        .shutdown_grace(Duration::from_millis(950))
        .build(rec.clone())
        .unwrap();
    let clone = throttle.clone();
    for i in 0..20u32 {
        clone.try_submit(i).unwrap();
    }
    drop(throttle);
    sleep(Duration::from_millis(100)).await;
    assert!(!drain.is_finished(), "a clone is still alive");
    drop(clone);
    let report = drain.join().await;
    assert_eq!(report.stats.delivered() + report.returned.len() as u64, 20);
    assert_eq!(report.stats.delivered(), rec.len() as u64);
    assert!(report.stats.delivered() >= 10);
}

#[tokio::test(start_paused = true)]
async fn waiting_submits_are_released_as_closed() {
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(1.0)
        .capacity(1)
        .build(Recorder::<u32>::new())
        .unwrap();
    throttle.pause();
    throttle.try_submit(0).unwrap();
    let t = throttle.clone();
    let waiter = tokio::spawn(async move { t.submit(1).await });
    support::settle().await;
    let report = throttle.shutdown(Duration::ZERO).await;
    let refused = waiter.await.unwrap().unwrap_err();
    assert_eq!((refused.reason(), refused.into_job()), (Reason::Closed, 1));
    assert_eq!(report.returned, vec![0]);
}

/// A throttle whose every delivery asks to be tried again `after`, with
/// `attempts` allowed, and how many it has made.
fn asking_again(
    after: Duration,
    attempts: u32,
) -> (Arc<AtomicU32>, Throttle<u32>, dripfeed::Drain<u32>) {
    let tried = Arc::new(AtomicU32::new(0));
    let seen = tried.clone();
    let policy =
        RetryPolicy::new(attempts).backoff(Duration::from_secs(1), Duration::from_secs(600));
    let (throttle, drain) = Throttle::builder()
        .drain_rate(100.0)
        .retries(policy)
        .build(move |_: &u32, _| {
            seen.fetch_add(1, Ordering::Relaxed);
            std::future::ready(Delivery::Retry { after: Some(after) })
        })
        .unwrap();
    (tried, throttle, drain)
}

/// A shutdown whose queue is empty and whose retries are all due after
/// its grace does not wait the grace out: none of them could go before
/// it. It hands them back at once, as it would at the deadline; a retry
/// due within the grace is still tried.
#[tokio::test(start_paused = true)]
async fn retries_due_after_the_grace_are_handed_back_at_once() {
    // Asks for a minute.
    let (tried, throttle, _drain) = asking_again(Duration::from_secs(60), 5);
    throttle.try_submit(1).unwrap();
    sleep(Duration::from_millis(100)).await;
    assert_eq!(throttle.stats().retry_wait(), 1);
    let start = Instant::now();
    let report = throttle.shutdown(Duration::from_secs(10)).await;
    assert!(
        start.elapsed() < Duration::from_millis(50),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(report.returned, [1]);
    assert_eq!(tried.load(Ordering::Relaxed), 1);

    // One due within the grace is tried in it.
    let (tried, throttle, _drain) = asking_again(Duration::from_millis(500), 2);
    throttle.try_submit(2).unwrap();
    sleep(Duration::from_millis(100)).await;
    let report = throttle.shutdown(Duration::from_secs(10)).await;
    assert_eq!(
        tried.load(Ordering::Relaxed),
        2,
        "its retry came within the grace"
    );
    assert!(report.returned.is_empty());
}

/// A closing drain starts no delivery it expects to outlast its grace:
/// with deliveries lately taking 1.5 s, none starts in the last 1.5 s, so
/// none is cut off at the deadline (to be sent again after a restart
/// although its receiver may have taken it). Those not started are handed
/// back, and the drain ends as the last delivery lands.
#[tokio::test(start_paused = true)]
async fn a_closing_drain_starts_no_delivery_that_would_outlast_its_grace() {
    let (started, ended) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let downstream = {
        let (started, ended) = (started.clone(), ended.clone());
        move |_: &u32, _| {
            let (started, ended) = (started.clone(), ended.clone());
            async move {
                started.fetch_add(1, Ordering::Relaxed);
                sleep(Duration::from_millis(1500)).await;
                ended.fetch_add(1, Ordering::Relaxed);
                Delivery::Done
            }
        }
    };
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(4.0)
        .capacity(100)
        .max_in_flight(16)
        .build(downstream)
        .unwrap();
    for i in 0..20u32 {
        throttle.try_submit(i).unwrap();
    }
    sleep(Duration::from_secs(3)).await;
    let start = Instant::now();
    let report = throttle.shutdown(Duration::from_secs(2)).await;
    let took = start.elapsed();
    let (started, ended) = (
        started.load(Ordering::Relaxed),
        ended.load(Ordering::Relaxed),
    );
    assert_eq!(started, ended, "every delivery started ran to its end");
    assert_eq!(u64::from(ended), report.stats.delivered());
    assert_eq!(report.stats.delivered() + report.returned.len() as u64, 20);
    // Started at 0, 0.25, … 3.0 s, and for 0.5 s of the grace: 15.
    assert_eq!(report.stats.delivered(), 15);
    assert!(took <= Duration::from_millis(2000), "{took:?}");
}
