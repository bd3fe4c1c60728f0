//! A queued job is never stranded with the drain asleep. The drain sleeps
//! whenever the queue runs dry and is woken only on the empty→non-empty
//! edge; here producers on other threads submit tiny bursts with random
//! pauses, racing that edge (two producers at once, per-key refusals that
//! give a reservation back), and every admitted job must be delivered.
//! Real threads, no sleeps: a bound on the total wait, not a timing.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dripfeed::{Attempt, Delivery, Quota, Throttle};
use tokio::sync::Notify;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_admitted_job_is_emitted_across_idle_edges() {
    let delivered = Arc::new(AtomicU64::new(0));
    let all_in = Arc::new(Notify::new());
    let (d, n) = (delivered.clone(), all_in.clone());
    let (throttle, _drain) = Throttle::builder()
        .drain_rate(1_000_000.0)
        .capacity(64)
        .per_key(16, Quota::new(2.0, 1e6).unwrap())
        .build(move |_: &u64, _: Attempt| {
            d.fetch_add(1, Ordering::Relaxed);
            n.notify_one();
            async { Delivery::Done }
        })
        .unwrap();
    let admitted = Arc::new(AtomicU64::new(0));
    let producers: Vec<_> = (0..3u64)
        .map(|p| {
            let (t, admitted) = (throttle.clone(), admitted.clone());
            std::thread::spawn(move || {
                let mut rng = fastrand::Rng::with_seed(p);
                for i in 0..4_000u64 {
                    for _ in 0..rng.usize(1..3) {
                        let ok = if rng.u8(0..4) == 0 {
                            // cost 3 > size 2: refused after reserving a place
                            t.try_submit_keyed(i % 5, if rng.bool() { 1.0 } else { 3.0 }, i)
                                .is_ok()
                        } else {
                            t.try_submit(i).is_ok()
                        };
                        if ok {
                            admitted.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    // let the drain run dry now and then
                    for _ in 0..rng.usize(0..200) {
                        std::thread::yield_now();
                    }
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    let want = admitted.load(Ordering::Relaxed);
    assert!(want > 6_000, "{want}");
    let done = tokio::time::timeout(Duration::from_secs(30), async {
        while delivered.load(Ordering::Relaxed) < want {
            all_in.notified().await;
        }
    })
    .await;
    assert!(
        done.is_ok(),
        "stranded: {} of {want} delivered",
        delivered.load(Ordering::Relaxed)
    );
    assert_eq!(throttle.depth(), 0);
}
