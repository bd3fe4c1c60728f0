//! Many producer tasks on a multi-thread runtime never push the depth past
//! the bound. Real threads, no sleeps: the drain is paused while they race.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use dripfeed::{Attempt, Delivery, Overflow, Throttle};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_bound_holds_under_a_flood_of_producers() {
    for policy in [Overflow::TailDrop, Overflow::HeadDrop] {
        let (throttle, _drain) = Throttle::builder()
            .drain_rate(1_000.0)
            .max_rate(100_000.0)
            .latency_budget(Duration::from_millis(100)) // bound 100, ring 10,000
            .overflow(policy)
            .build(|_: &u64, _: Attempt| async { Delivery::Done })
            .unwrap();
        throttle.pause();
        let stop = Arc::new(AtomicBool::new(false));
        let worst = Arc::new(AtomicU64::new(0));
        let watcher = {
            let (t, stop, worst) = (throttle.clone(), stop.clone(), worst.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    worst.fetch_max(t.depth() as u64, Ordering::Relaxed);
                    tokio::task::yield_now().await;
                }
            })
        };
        let producers: Vec<_> = (0..8)
            .map(|p| {
                let t = throttle.clone();
                tokio::spawn(async move {
                    let mut ok = 0u64;
                    for i in 0..20_000u64 {
                        if t.try_submit(p * 1_000_000 + i).is_ok() {
                            ok += 1;
                        }
                        if i % 500 == 0 {
                            tokio::task::yield_now().await;
                        }
                    }
                    ok
                })
            })
            .collect();
        let mut accepted = 0;
        for p in producers {
            accepted += p.await.unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        watcher.await.unwrap();
        assert!(
            worst.load(Ordering::Relaxed) <= 100,
            "{policy:?}: depth reached {}",
            worst.load(Ordering::Relaxed)
        );
        assert_eq!(throttle.depth(), 100);
        let stats = throttle.stats();
        match policy {
            Overflow::TailDrop => assert_eq!(accepted, 100),
            _ => assert_eq!(
                stats.admitted(),
                accepted,
                "every head-drop admission queued"
            ),
        }
        assert_eq!(stats.submitted(), 160_000, "every job accounted for");
        throttle.shutdown(Duration::ZERO).await;
    }
}
