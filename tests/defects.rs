//! Seven defects of the library's first design, one test each.
//! Each failed on that design and passes on the current one.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use dripfeed::keyed::Quota;
use dripfeed::rate::AimdConfig;
use dripfeed::{
    Attempt, DeadLetterReason, DeadLetterSink, Delivery, Outcome, Overflow, Reason, RetryPolicy,
    Slots, Stats, Throttle,
};
use metrics_util::debugging::DebuggingRecorder;
use support::{counters, settle};
use tokio::time::{Instant, sleep, timeout};

/// 1. A per-key refusal must not hold a place that a waiting `submit` then
/// never hears about. One thread loops keyed submissions its key always
/// refuses; a task submits 2,000 jobs into a queue of one place, each
/// within a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_key_refusal_never_strands_a_waiting_submit() {
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(20_000.0)
        .capacity(1)
        .per_key(16, Quota::per_second(1.0).burst(1.0).unwrap())
        .build(|_: &u32, _| async { Delivery::Done })
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let refuser = {
        let (throttle, stop) = (throttle.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut refused = 0u64;
            while !stop.load(Ordering::Relaxed) && refused < 50_000_000 {
                // A cost above the key's size: always refused.
                let r = throttle.try_submit(dripfeed::Submission::new(0).key("k", 5.0));
                assert_eq!(r.map_err(|r| r.reason()), Err(Reason::Invalid));
                refused += 1;
            }
            refused
        })
    };
    let mut late = 0;
    for i in 0..2_000 {
        match timeout(Duration::from_secs(1), throttle.submit(i)).await {
            Ok(admitted) => assert!(admitted.is_ok()),
            Err(_) => late += 1,
        }
    }
    stop.store(true, Ordering::Relaxed);
    let refused = refuser.join().unwrap();
    assert!(refused > 0);
    assert_eq!(
        late, 0,
        "a submit slept through the room it was waiting for"
    );
}

/// 2. `Slots`: waiters withdrawn while the drain is paused must not fill
/// the ring and get a live caller refused while the queue is empty.
#[tokio::test(start_paused = true)]
async fn withdrawn_waiters_never_fill_the_ring() {
    let (slots, _drain) = Slots::builder()
        .drain_rate(10.0)
        .capacity(2)
        .build_slots()
        .unwrap();
    slots.throttle().pause();
    for _ in 0..2 {
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let slots = slots.clone();
                tokio::spawn(async move { slots.acquire().await.is_ok() })
            })
            .collect();
        settle().await;
        assert_eq!(slots.depth(), 2);
        for w in waiters {
            w.abort();
            assert!(w.await.is_err(), "aborted while waiting");
        }
        assert_eq!(slots.depth(), 0, "withdrawn places are free at once");
    }
    let live = {
        let slots = slots.clone();
        tokio::spawn(async move { slots.acquire().await.map(|_| ()).map_err(|r| r.reason()) })
    };
    settle().await;
    assert!(!live.is_finished(), "queued, not refused");
    assert_eq!(slots.depth(), 1);
    slots.throttle().resume();
    assert_eq!(live.await.unwrap(), Ok(()));
    let stats = slots.stats();
    assert_eq!(stats.outcome(Outcome::Cancelled), 4);
    assert_eq!(stats.outcome(Outcome::Refused), 0);
}

/// A dead-letter sink that panics on every offer.
struct Panicking;

#[async_trait::async_trait]
impl DeadLetterSink<u32> for Panicking {
    fn try_offer(&self, _job: u32, _why: DeadLetterReason) -> Result<(), u32> {
        panic!("sink down")
    }
}

/// 3. A panicking sink is caught: the drain lives on and shutdown ends.
#[tokio::test(start_paused = true)]
async fn a_panicking_sink_neither_kills_the_drain_nor_hangs_shutdown() {
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(1.0)
        .capacity(10)
        .max_queue_wait(Duration::from_millis(100))
        .dead_letter(Panicking)
        .build(|_: &u32, _| async { Delivery::Done })
        .unwrap();
    throttle.try_submit(1).unwrap(); // out at once
    throttle.try_submit(2).unwrap(); // due at 1 s, expired at 100 ms: to the sink, which panics
    sleep(Duration::from_secs(2)).await;
    let report = timeout(
        Duration::from_secs(10),
        throttle.shutdown(Duration::from_secs(5)),
    )
    .await
    .expect("shutdown ends within its grace");
    let stats = report.stats;
    assert_eq!(stats.delivered(), 1);
    assert_eq!(stats.outcome(Outcome::Expired), 1);
    assert_eq!(stats.submitted(), 2);
    assert_eq!(stats.finished(), 2, "every job counted");
}

/// 4. A retry scheduled by a delivery still running when shutdown begins
/// gets the rest of the grace.
#[tokio::test(start_paused = true)]
async fn a_retry_scheduled_during_shutdown_gets_the_remaining_grace() {
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(10.0)
        .retries(RetryPolicy::new(3))
        .build(|_: &u32, attempt: Attempt| async move {
            if attempt.number() == 1 {
                Delivery::Retry {
                    after: Some(Duration::from_millis(100)),
                }
            } else {
                Delivery::Done
            }
        })
        .unwrap();
    throttle.try_submit(7).unwrap();
    let start = Instant::now();
    let report = throttle.shutdown(Duration::from_secs(60)).await;
    assert_eq!(report.stats.delivered(), 1);
    assert!(report.returned.is_empty());
    assert_eq!(report.stats.outcome(Outcome::Returned), 0);
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "it ends once the retry is delivered"
    );
}

/// 5. A paused drain is not a busy one: AIMD does not raise the rate on
/// the samples it had before the pause.
#[tokio::test(start_paused = true)]
async fn a_paused_drain_does_not_raise_the_rate() {
    let aimd = AimdConfig::default()
        .with_floor(20.0)
        .with_ceiling(200.0)
        .build()
        .unwrap();
    let (throttle, _drain) = Throttle::builder()
        .adaptive(aimd)
        .capacity(100_000)
        .build(|_: &u32, _| async { Delivery::Done })
        .unwrap();
    // Busy for 3 s: more than the drain can take, so jobs wait.
    for i in 0..150 {
        throttle.try_submit(i).unwrap();
    }
    sleep(Duration::from_secs(3)).await;
    while throttle.depth() > 0 {
        sleep(Duration::from_millis(10)).await;
    }
    throttle.pause();
    let rate = throttle.drain_rate();
    sleep(Duration::from_secs(5)).await;
    assert_eq!(throttle.drain_rate(), rate, "no evidence while paused");
}

/// 6. A rate change does not cancel a pause the downstream asked for.
#[tokio::test(start_paused = true)]
async fn a_rate_change_keeps_the_downstreams_pause() {
    let (throttle, calls) = support::hinted_throttle(Duration::from_secs(10));
    sleep(Duration::from_millis(1100)).await; // the 31st answer: "slow down, 10 s"
    assert_eq!(throttle.drain_rate(), 30.0, "cut");
    let at_cut = calls.load(Ordering::Relaxed);
    throttle.set_drain_rate(35.0).unwrap();
    sleep(Duration::from_secs(8)).await;
    assert!(
        calls.load(Ordering::Relaxed) - at_cut <= 1,
        "still paused for the hint"
    );
    sleep(Duration::from_secs(3)).await;
    assert!(
        calls.load(Ordering::Relaxed) - at_cut >= 10,
        "resumed after it"
    );
}

/// Every counter the throttle published equals what `stats()` says.
fn assert_published(recorder: &DebuggingRecorder, stats: &Stats) {
    let m = counters(recorder);
    let get = |name: &str| m.get(name).copied().unwrap_or(0);
    for o in Outcome::ALL {
        let name = format!("leaky_bucket_jobs_total{{{}}}", o.as_str());
        assert_eq!(get(&name), stats.outcome(o), "{name}");
    }
    for (reason, n) in stats.rejections() {
        let name = format!("leaky_bucket_rejected_total{{{}}}", reason.as_str());
        assert_eq!(get(&name), n, "{name}");
    }
    for p in Overflow::ALL {
        let name = format!("leaky_bucket_overflow_total{{{}}}", p.as_str());
        assert_eq!(get(&name), stats.overflow(p), "{name}");
    }
    assert_eq!(get("leaky_bucket_admitted_total{}"), stats.admitted());
    assert_eq!(get("leaky_bucket_emitted_total{}"), stats.emitted());
    assert_eq!(get("leaky_bucket_expired_total{}"), stats.expired());
    assert_eq!(
        get("leaky_bucket_delivery_failures_total{}"),
        stats.delivery_failures()
    );
}

/// 7. The published counters agree with `stats()`: refusals counted while
/// no drain runs, keyed places, head-drop, a closed throttle.
#[tokio::test(start_paused = true)]
async fn published_counters_equal_stats() {
    // No drain at all: refusals are still published once stats are read.
    let recorder = DebuggingRecorder::new();
    let (throttle, drain) = metrics::with_local_recorder(&recorder, || {
        Throttle::builder()
            .drain_rate(1.0)
            .capacity(1)
            .build_unspawned(|_: &u32, _| async { Delivery::Done })
            .unwrap()
    });
    throttle.try_submit(1).unwrap();
    assert_eq!(
        throttle.try_submit(2).unwrap_err().reason(),
        Reason::Overloaded
    );
    drop(drain);
    assert_published(&recorder, &throttle.stats());

    // A run with keyed refusals, head-drop and refusals after close.
    let recorder = DebuggingRecorder::new();
    let (throttle, _drain) = metrics::with_local_recorder(&recorder, || {
        Throttle::builder()
            .drain_rate(50.0)
            .capacity(5)
            .overflow(Overflow::HeadDrop)
            .per_key(8, Quota::per_second(1.0).burst(3.0).unwrap())
            .build(|_: &u32, _| async { Delivery::Done })
            .unwrap()
    });
    for i in 0..200 {
        let _ = throttle.try_submit(dripfeed::Submission::new(i).key(i % 7, 1.0));
        let _ = throttle.try_submit(i);
        if i % 20 == 0 {
            sleep(Duration::from_millis(30)).await;
        }
    }
    let report = throttle.shutdown(Duration::from_secs(5)).await;
    assert!(throttle.try_submit(0).is_err(), "closed");
    let stats = throttle.stats();
    assert_eq!(stats.rejected(Reason::Closed), 1);
    assert!(stats.outcome(Outcome::Evicted) > 0 && stats.rejected(Reason::OverQuota) > 0);
    assert_eq!(stats.submitted(), 401);
    assert_eq!(report.stats.delivered(), stats.delivered());
    assert_published(&recorder, &stats);
}
