//! What a delivery keeps, whichever way deliveries run (polled by the drain
//! or a task each): the in-flight bound, the timeout, panic isolation with
//! a retry, and a shutdown that waits for deliveries still running.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use dripfeed::{Attempt, Delivery, Dispatch, Outcome, RetryPolicy, Throttle};
use tokio::time::{Instant, sleep};

const MODES: [Dispatch; 2] = [Dispatch::Inline, Dispatch::Spawn];

#[tokio::test(start_paused = true)]
async fn the_in_flight_bound_holds() {
    for mode in MODES {
        let (now, most) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
        let (n, m) = (now.clone(), most.clone());
        let (throttle, _drain) = Throttle::builder()
            .drain_rate(1_000.0)
            .capacity(100)
            .max_in_flight(3)
            .dispatch(mode)
            .build(move |_: &u32, _| {
                let (n, m) = (n.clone(), m.clone());
                async move {
                    m.fetch_max(n.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                    sleep(Duration::from_millis(50)).await;
                    n.fetch_sub(1, Ordering::SeqCst);
                    Delivery::Done
                }
            })
            .unwrap();
        for i in 0..30 {
            throttle.try_submit(i).unwrap();
        }
        let report = throttle.shutdown(Duration::from_secs(10)).await;
        assert_eq!(report.stats.delivered(), 30, "{mode:?}");
        assert_eq!(
            most.load(Ordering::SeqCst),
            3,
            "{mode:?}: never more than 3 at once"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn panics_and_timeouts_are_failed_attempts_and_retried() {
    for mode in MODES {
        let (throttle, _drain) = Throttle::builder()
            .drain_rate(100.0)
            .deliver_timeout(Duration::from_secs(1))
            .retries(
                RetryPolicy::new(3).backoff(Duration::from_millis(10), Duration::from_millis(10)),
            )
            .dispatch(mode)
            .build(|job: &u32, a: Attempt| {
                let job = *job;
                async move {
                    match (job, a.number()) {
                        (0, 1) => panic!("first attempt of job 0"),
                        (1, 1) => std::future::pending().await,
                        _ => Delivery::Done,
                    }
                }
            })
            .unwrap();
        throttle.try_submit(0).unwrap();
        throttle.try_submit(1).unwrap();
        sleep(Duration::from_secs(3)).await;
        let stats = throttle.stats();
        assert_eq!(stats.delivered(), 2, "{mode:?}");
        assert_eq!(
            (stats.delivery_failures(), stats.retried()),
            (2, 2),
            "{mode:?}"
        );
    }
}

/// A shutdown ends within its grace: a delivery still running at its end
/// is stopped and its job handed off (here, back to the caller), counted
/// once; one that ends within the grace is delivered.
#[tokio::test(start_paused = true)]
async fn shutdown_stops_deliveries_still_running_at_its_grace() {
    for mode in MODES {
        let (throttle, _drain) = Throttle::builder()
            .drain_rate(10.0)
            .dispatch(mode)
            .build(|job: &u32, _| {
                let wait = Duration::from_millis(u64::from(*job));
                async move {
                    sleep(wait).await;
                    Delivery::Done
                }
            })
            .unwrap();
        throttle.try_submit(2_000).unwrap(); // runs past the grace
        sleep(Duration::from_millis(10)).await; // out, and running
        throttle.try_submit(50).unwrap(); // out at 100 ms, ends at 150 ms
        let began = Instant::now();
        let report = throttle.shutdown(Duration::from_millis(300)).await;
        let took = began.elapsed();
        assert!(took <= Duration::from_millis(310), "{mode:?}: {took:?}");
        assert_eq!(report.returned, vec![2_000], "{mode:?}");
        assert_eq!(
            report.stats.delivered(),
            1,
            "{mode:?}: the one within the grace"
        );
        assert_eq!(report.stats.outcome(Outcome::Returned), 1, "{mode:?}");
        assert_eq!(report.stats.in_flight(), 0, "{mode:?}");
        assert_eq!(
            report.stats.delivery_failures(),
            0,
            "{mode:?}: a stopped delivery is not a failed one"
        );
    }
}

/// A delivery that ends where it starts leaves its box to the next one:
/// the box must keep nothing of the job it carried, whether the deliveries
/// before and after it ended at once or waited.
#[tokio::test(start_paused = true)]
async fn a_delivered_job_is_dropped_at_once_while_the_drain_runs() {
    for mode in MODES {
        let marker = Arc::new(());
        let (throttle, _drain) = Throttle::builder()
            .drain_rate(1_000.0)
            .dispatch(mode)
            .build(|job: &(u32, Arc<()>), _| {
                let waits = job.0.is_multiple_of(3);
                async move {
                    if waits {
                        sleep(Duration::from_millis(5)).await;
                    }
                    Delivery::Done
                }
            })
            .unwrap();
        for i in 0..10 {
            throttle.try_submit((i, marker.clone())).unwrap();
        }
        sleep(Duration::from_millis(100)).await;
        assert_eq!(throttle.stats().delivered(), 10, "{mode:?}");
        assert_eq!(
            Arc::strong_count(&marker),
            1,
            "{mode:?}: no delivered job is kept, the drain still running"
        );
        throttle.shutdown(Duration::from_secs(1)).await;
    }
}
