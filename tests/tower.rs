//! The tower layer: clones share one limit; poll_ready holds no slot.

use crate::support;

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use dripfeed::Slots;
use dripfeed::tower::{ThrottleError, ThrottleLayer};
use tokio::time::{Instant, sleep};
use tower::{Layer, Service, ServiceExt};

#[tokio::test(start_paused = true)]
async fn two_clones_share_one_rate() {
    let (slots, _drain) = Slots::builder()
        .drain_rate(20.0)
        .capacity(1000)
        .build_slots()
        .unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let inner = tower::service_fn(move |_: u32| {
        c.fetch_add(1, Ordering::Relaxed);
        async { Ok::<_, Infallible>(()) }
    });
    let svc = ThrottleLayer::new(slots).layer(inner);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for clone in 0..2 {
        let svc = svc.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..100u32 {
                svc.clone().oneshot(clone * 1000 + i).await.unwrap();
            }
        }));
    }
    sleep(Duration::from_millis(5025)).await;
    // 20/s shared: 101 calls in 5 s (one at 0), not 202
    assert_eq!(
        calls.load(Ordering::Relaxed),
        101,
        "after {:?}",
        start.elapsed()
    );
    for t in tasks {
        t.abort();
    }
}

#[tokio::test(start_paused = true)]
async fn poll_ready_reserves_nothing_and_refusals_are_typed() {
    let (slots, _drain) = Slots::builder()
        .drain_rate(1.0)
        .capacity(1)
        .build_slots()
        .unwrap();
    slots.throttle().pause();
    let inner = tower::service_fn(|_: ()| async { Ok::<_, Infallible>(()) });
    let mut svc = ThrottleLayer::new(slots.clone())
        .refuse_when_full()
        .layer(inner);
    // ready, many times, holds no place
    for _ in 0..10 {
        let waker = futures_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(matches!(svc.poll_ready(&mut cx), Poll::Ready(Ok(()))));
    }
    assert_eq!(slots.depth(), 0);
    let first = tokio::spawn(svc.clone().oneshot(()));
    support::settle().await;
    assert_eq!(slots.depth(), 1);
    let err = svc.clone().oneshot(()).await.unwrap_err();
    match err {
        ThrottleError::Rejected(r) => assert!(r.retry_after().is_some()),
        ThrottleError::Inner(e) => match e {},
    }
    first.abort();
}

fn futures_waker() -> std::task::Waker {
    std::task::Waker::noop().clone()
}

/// A request queued for its slot holds none of the inner service's
/// capacity: the inner service is made ready only once the slot is granted.
#[tokio::test(start_paused = true)]
async fn a_queued_request_holds_no_inner_capacity() {
    let (slots, _drain) = Slots::builder()
        .drain_rate(10.0)
        .capacity(10)
        .build_slots()
        .unwrap();
    slots.throttle().pause();
    let inner = tower::limit::ConcurrencyLimit::new(
        tower::service_fn(|_: u32| async { Ok::<_, Infallible>(()) }),
        1,
    );
    let mut other = inner.clone(); // shares the one concurrency permit
    let svc = ThrottleLayer::new(slots.clone()).layer(inner);
    let queued = tokio::spawn(svc.oneshot(1));
    support::settle().await;
    assert!(!queued.is_finished(), "waiting for its slot");
    let waker = std::task::Waker::noop();
    let mut cx = Context::from_waker(waker);
    assert!(
        matches!(other.poll_ready(&mut cx), Poll::Ready(Ok(()))),
        "the inner permit is free while the request queues"
    );
    drop(other);
    slots.throttle().resume();
    assert!(queued.await.unwrap().is_ok());
}

/// The first hour's client: 50 callers at once through the layer with the
/// default settings (a queue of 1 s × 20/s = 20) make 200 calls: all
/// complete, none is refused, and no second sees more than ⌈1.01 R⌉ + 1.
#[tokio::test(start_paused = true)]
async fn fifty_callers_through_the_default_layer_all_wait_their_turn() {
    let (slots, _drain) = Slots::builder().drain_rate(20.0).build_slots().unwrap();
    assert_eq!(slots.capacity(), 20);
    let start = Instant::now();
    let at = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = at.clone();
    let inner = tower::service_fn(move |_: u32| {
        seen.lock().unwrap().push(start.elapsed());
        async { Ok::<_, Infallible>(()) }
    });
    let svc = ThrottleLayer::new(slots.clone()).layer(inner);
    let callers: Vec<_> = (0..50u32)
        .map(|c| {
            let svc = svc.clone();
            tokio::spawn(async move {
                let mut refused = 0;
                for i in 0..4 {
                    if svc.clone().oneshot(c * 10 + i).await.is_err() {
                        refused += 1;
                    }
                }
                refused
            })
        })
        .collect();
    let mut refused = 0;
    for c in callers {
        refused += c.await.unwrap();
    }
    let at = at.lock().unwrap().clone();
    assert_eq!((at.len(), refused), (200, 0), "all complete, none refused");
    let most = (0..at.len())
        .map(|i| {
            at[i..]
                .iter()
                .take_while(|t| **t < at[i] + Duration::from_secs(1))
                .count()
        })
        .max()
        .unwrap_or(0);
    assert!(most <= 22, "{most} calls in one second at 20/s");
}
