//! Awaitable slots: FIFO at the drain rate, cancel-safe, fail fast when full.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dripfeed::rate::AimdConfig;
use dripfeed::{Delivery, Outcome, Reason, Slots};
use support::settle;
use tokio::time::{Instant, sleep};

/// Spawns `n` callers in order (each queued before the next starts); each
/// records (its index, when it was granted).
async fn callers(
    slots: &Slots,
    n: usize,
    log: &Arc<Mutex<Vec<(usize, Instant)>>>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::new();
    for i in 0..n {
        let (slots, log) = (slots.clone(), log.clone());
        tasks.push(tokio::spawn(async move {
            let slot = slots.acquire().await.unwrap();
            log.lock().unwrap().push((i, Instant::now()));
            slot.report(Delivery::Done);
        }));
        settle().await;
    }
    tasks
}

#[tokio::test(start_paused = true)]
async fn sixty_four_callers_are_served_fifo_at_the_rate() {
    let (slots, _drain) = Slots::builder()
        .drain_rate(20.0)
        .capacity(100)
        .build_slots()
        .unwrap();
    let start = Instant::now();
    let log = Arc::new(Mutex::new(Vec::new()));
    for t in callers(&slots, 64, &log).await {
        t.await.unwrap();
    }
    let log = log.lock().unwrap();
    let order: Vec<usize> = log.iter().map(|(i, _)| *i).collect();
    assert_eq!(order, (0..64).collect::<Vec<_>>(), "FIFO");
    for (k, (_, at)) in log.iter().enumerate() {
        let want = Duration::from_millis(50 * k as u64);
        let got = *at - start;
        assert!(
            got + Duration::from_millis(1) >= want && got <= want + Duration::from_millis(1),
            "slot {k}: {got:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn dropping_half_the_waiters_loses_no_slot_and_stalls_nothing() {
    let (slots, _drain) = Slots::builder()
        .drain_rate(10.0)
        .capacity(100)
        .build_slots()
        .unwrap();
    slots.throttle().pause();
    let log = Arc::new(Mutex::new(Vec::new()));
    let tasks = callers(&slots, 64, &log).await;
    assert_eq!(slots.depth(), 64);
    for (i, t) in tasks.iter().enumerate() {
        if i % 2 == 1 {
            t.abort();
        }
    }
    settle().await;
    assert_eq!(
        slots.depth(),
        32,
        "withdrawn waiters give their place back at once"
    );
    let start = Instant::now();
    slots.throttle().resume();
    for (i, t) in tasks.into_iter().enumerate() {
        if i % 2 == 0 {
            t.await.unwrap();
        }
    }
    let took = start.elapsed();
    // 32 live waiters at 10/s: the first at once, the last 3.1 s later; no slot spent on the dead
    assert!(took <= Duration::from_millis(3101), "{took:?}");
    let stats = slots.stats();
    assert_eq!(stats.outcome(Outcome::Delivered), 32);
    assert_eq!(stats.outcome(Outcome::Cancelled), 32);
    assert_eq!(stats.emitted(), 32);
    assert_eq!(stats.submitted(), 64);
}

#[tokio::test(start_paused = true)]
async fn try_acquire_answers_a_full_queue_at_once_with_a_wait_hint() {
    let (slots, _drain) = Slots::builder()
        .drain_rate(5.0)
        .capacity(10)
        .build_slots()
        .unwrap();
    slots.throttle().pause();
    let log = Arc::new(Mutex::new(Vec::new()));
    let _tasks = callers(&slots, 10, &log).await;
    let start = Instant::now();
    let refused = slots.try_acquire().await.unwrap_err();
    assert_eq!(start.elapsed(), Duration::ZERO, "no wait");
    assert_eq!(refused.reason(), Reason::Overloaded);
    let wait = refused.retry_after().unwrap();
    assert!(
        wait >= Duration::from_secs(2) && wait <= Duration::from_millis(2400),
        "10 / 5 per s: {wait:?}"
    );
}

/// Beyond the queue's room, `acquire` waits in line: first in, first out,
/// nobody refused, and a caller that gives up in line takes nobody's turn.
#[tokio::test(start_paused = true)]
async fn acquire_waits_for_room_in_line() {
    let (slots, _drain) = Slots::builder()
        .drain_rate(10.0)
        .capacity(2)
        .build_slots()
        .unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..8u32 {
        let (slots, order) = (slots.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            let slot = slots.acquire().await.map_err(|r| r.reason())?;
            order.lock().unwrap().push(i);
            slot.report(Delivery::Done);
            Ok::<_, Reason>(())
        }));
        settle().await; // arrive in order
    }
    // One in line gives up: the others keep their turns.
    tasks[5].abort();
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.ok());
    }
    assert_eq!(results.iter().filter(|r| **r == Some(Ok(()))).count(), 7);
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4, 6, 7]);
    assert_eq!(slots.stats().outcome(Outcome::Refused), 0);
}

#[tokio::test(start_paused = true)]
async fn shutdown_releases_waiters_as_closed() {
    let (slots, _drain) = Slots::builder()
        .drain_rate(1.0)
        .capacity(10)
        .build_slots()
        .unwrap();
    slots.throttle().pause();
    let waiter = {
        let slots = slots.clone();
        tokio::spawn(async move { slots.acquire().await.map(|_| ()) })
    };
    settle().await;
    let report = slots.shutdown(Duration::ZERO).await;
    assert_eq!(waiter.await.unwrap().unwrap_err().reason(), Reason::Closed);
    assert_eq!(report.outcome(Outcome::Returned), 1);
}

/// Slots whose drain adapts between 10/s and 100/s.
fn adaptive_slots() -> dripfeed::ThrottleBuilder<dripfeed::Waiter> {
    let aimd = AimdConfig::default()
        .with_floor(10.0)
        .with_ceiling(100.0)
        .build()
        .unwrap();
    Slots::builder().adaptive(aimd)
}

#[tokio::test(start_paused = true)]
async fn reported_calls_drive_the_adaptive_rate() {
    let (slots, _drain) = adaptive_slots()
        .drain_rate(50.0)
        .capacity(1000)
        .build_slots()
        .unwrap();
    // the partner answers 429 with Retry-After: 1 to every call
    let mut tasks = Vec::new();
    for _ in 0..200 {
        let slots = slots.clone();
        tasks.push(tokio::spawn(async move {
            slots
                .call(sleep(Duration::from_millis(20)), |_| Delivery::Retry {
                    after: Some(Duration::from_secs(1)),
                })
                .await
        }));
    }
    sleep(Duration::from_millis(1500)).await;
    assert!(
        slots.drain_rate() < 50.0,
        "congestion answers cut the rate: {}",
        slots.drain_rate()
    );
    for t in tasks {
        t.abort();
    }
}

/// A partner's `Retry-After` pauses the slots from its answer: an idle
/// drain that hears of it later waits only what is left of it.
#[tokio::test(start_paused = true)]
async fn a_retry_after_pauses_from_the_answer_not_from_the_next_call() {
    let (slots, _drain) = adaptive_slots().drain_rate(100.0).build_slots().unwrap();
    let slot = slots.acquire().await.unwrap();
    slot.report(Delivery::Retry {
        after: Some(Duration::from_secs(2)),
    });
    sleep(Duration::from_millis(1500)).await;
    let asked = Instant::now();
    let _next = slots.acquire().await.unwrap();
    let waited = asked.elapsed();
    assert!(
        waited >= Duration::from_millis(450) && waited <= Duration::from_millis(600),
        "the half second left of the 2 s: {waited:?}"
    );
}
